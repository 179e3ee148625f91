package envelopay

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/envelopd/envelopd/protocols"
)

// readJSONL decodes each non-empty line of a testdata file into a new T.
func readJSONL[T any](t testing.TB, name string) []T {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var out []T
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var v T
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("%s:%d: %v", name, n, err)
		}
		out = append(out, v)
	}
	return out
}

type subjectCase struct {
	Subject string `json:"subject"`
	Lenient bool   `json:"lenient"`
	Type    string `json:"type"`
	Keyword string `json:"keyword"`
	Note    string `json:"note"`
	Err     string `json:"err"`
}

func TestParseSubject(t *testing.T) {
	cases := readJSONL[subjectCase](t, "testdata/subjects.jsonl")
	if len(cases) < 30 {
		t.Fatalf("only %d cases", len(cases))
	}
	for _, c := range cases {
		got, err := ParseSubject(c.Subject, c.Lenient)
		code := ""
		if err != nil {
			var p protocols.Problem
			if !errors.As(err, &p) {
				t.Errorf("%q: error %v is not a Problem", c.Subject, err)
				continue
			}
			code = string(p.Code)
			if p.Field != "subject" || p.Message == "" {
				t.Errorf("%q: problem %+v", c.Subject, p)
			}
		}
		want := Subject{Type: c.Type, Keyword: c.Keyword, Note: c.Note}
		if got != want || code != c.Err {
			t.Errorf("ParseSubject(%q, %v) = %+v, %q; want %+v, %q", c.Subject, c.Lenient, got, code, want, c.Err)
		}
	}
}

// The spec's unknown_type shape must agree with ParseSubject in strict mode.
var unknownShape = regexp.MustCompile(`(?s)^[A-Z]+(\s*\|.*)?$`)

func FuzzSubject(f *testing.F) {
	for _, c := range readJSONL[subjectCase](f, "testdata/subjects.jsonl") {
		f.Add(c.Subject, c.Lenient)
	}
	f.Fuzz(func(t *testing.T, s string, lenient bool) {
		got, err := ParseSubject(s, lenient)
		if err == nil {
			if !IsType(got.Type) || !strings.EqualFold(got.Keyword, strings.ToUpper(got.Type)) {
				t.Fatalf("%q: bad subject %+v", s, got)
			}
			if !lenient && got.Keyword != strings.ToUpper(got.Type) {
				t.Fatalf("%q: strict mode accepted keyword %q", s, got.Keyword)
			}
			return
		}
		var p protocols.Problem
		if !errors.As(err, &p) || (p.Code != protocols.CodeUnknownType && p.Code != protocols.CodeNotEnvelopay) {
			t.Fatalf("%q: error %v", s, err)
		}
		trimmed := strings.Trim(s, " \t\r\n\f")
		if !lenient && (p.Code == protocols.CodeUnknownType) != unknownShape.MatchString(trimmed) {
			t.Fatalf("%q: code %s disagrees with the spec's shape", s, p.Code)
		}
	})
}

type problemPair [2]string // code, field

type validateCase struct {
	Name     string          `json:"name"`
	Type     string          `json:"type"`
	Body     json.RawMessage `json:"body"`
	BodyText *string         `json:"body_text"`
	Errors   []problemPair   `json:"errors"`
	Warnings []problemPair   `json:"warnings"`
}

func pairs(ps protocols.Problems) []problemPair {
	out := []problemPair{}
	for _, p := range ps {
		out = append(out, problemPair{string(p.Code), p.Field})
	}
	return out
}

func (c validateCase) body() []byte {
	if c.BodyText != nil {
		return []byte(*c.BodyText)
	}
	if string(c.Body) == "null" || c.Body == nil {
		return nil
	}
	return c.Body
}

func TestValidate(t *testing.T) {
	cases := readJSONL[validateCase](t, "testdata/validate.jsonl")
	for _, c := range cases {
		errs, warns := Validate(c.Type, c.body())
		want := func(p []problemPair) []problemPair {
			if p == nil {
				return []problemPair{}
			}
			return p
		}
		if g, w := pairs(errs), want(c.Errors); !equalPairs(g, w) {
			t.Errorf("%s: errors %v, want %v (%v)", c.Name, g, w, errs)
		}
		if g, w := pairs(warns), want(c.Warnings); !equalPairs(g, w) {
			t.Errorf("%s: warnings %v, want %v (%v)", c.Name, g, w, warns)
		}
		for _, p := range append(errs, warns...) {
			if p.Message == "" {
				t.Errorf("%s: %+v has no message", c.Name, p)
			}
		}
	}
}

func equalPairs(a, b []problemPair) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func FuzzValidate(f *testing.F) {
	for _, c := range readJSONL[validateCase](f, "testdata/validate.jsonl") {
		f.Add(c.Type, c.body())
	}
	f.Fuzz(func(t *testing.T, typ string, body []byte) {
		errs, _ := Validate(typ, body)
		if body != nil && !json.Valid(body) && !errs.Has(protocols.CodeInvalidJSON) && IsType(typ) {
			t.Fatalf("invalid JSON %q accepted", body)
		}
		if body != nil && json.Valid(body) {
			// DecodeObject must agree with encoding/json on objects.
			var want map[string]json.RawMessage
			got, err := DecodeObject(body)
			if json.Unmarshal(body, &want) != nil || want == nil { // "null" decodes to a nil map
				if err == nil {
					t.Fatalf("%q: DecodeObject accepted a non-object", body)
				}
				return
			}
			if err != nil || len(got) != len(want) {
				t.Fatalf("%q: DecodeObject = %v, %v; want %v", body, got, err, want)
			}
			for k, v := range want {
				if !bytes.Equal(bytes.TrimSpace(got[k]), bytes.TrimSpace(v)) {
					t.Fatalf("%q: key %q = %s, want %s", body, k, got[k], v)
				}
			}
		}
	})
}

func TestOOPSFor(t *testing.T) {
	for _, c := range []struct {
		code      protocols.Code
		ref, note string
		extra     map[string]any
		want      string
	}{
		{protocols.CodeUnknownType, "", "Unknown type REFUND", nil,
			`{"v":"0.2.0","type":"oops","note":"Unknown type REFUND","error":{"code":"unknown_type","supported":["which","methods","pay","order","fulfill","invoice","offer","accept","oops"]},"ref":""}`},
		{protocols.CodeTxNotFound, "pay_1", "Payment <not> found & gone", map[string]any{"tx": "0x3a7f"},
			`{"v":"0.2.0","type":"oops","note":"Payment <not> found & gone","error":{"code":"tx_not_found","tx":"0x3a7f"},"ref":"pay_1"}`},
		{protocols.CodeMissingWallet, "inv_1", "no wallet", map[string]any{"field": "wallet", "code": "ignored"},
			`{"v":"0.2.0","type":"oops","note":"no wallet","error":{"code":"missing_wallet","field":"wallet"},"ref":"inv_1"}`},
	} {
		got := string(OOPSFor(c.code, c.ref, c.note, c.extra))
		want := strings.Replace(c.want, `,"ref":""`, "", 1)
		if got != want {
			t.Errorf("OOPSFor(%s) =\n %s\nwant\n %s", c.code, got, want)
		}
		// An OOPS we write must itself be a valid OOPS.
		if errs, warns := Validate("oops", []byte(got)); len(errs)+len(warns) != 0 {
			t.Errorf("OOPSFor(%s) does not validate: %v %v", c.code, errs, warns)
		}
	}
}

func TestIDs(t *testing.T) {
	want := []string{"wch_", "mth_", "pay_", "ord_", "ful_", "inv_", "ofr_", "acc_", "oops_"}
	for i, typ := range Types {
		if IDPrefix(typ) != want[i] {
			t.Errorf("IDPrefix(%s) = %q, want %q", typ, IDPrefix(typ), want[i])
		}
		a, b := NewID(typ), NewID(typ)
		if !regexp.MustCompile("^"+want[i]+"[0-9a-f]{16}$").MatchString(a) || a == b {
			t.Errorf("NewID(%s) = %q, %q", typ, a, b)
		}
		if Keywords[i] != strings.ToUpper(typ) {
			t.Errorf("Keywords[%d] = %q", i, Keywords[i])
		}
	}
	if IDPrefix("refund") != "" {
		t.Error("IDPrefix of an unknown type")
	}
}
