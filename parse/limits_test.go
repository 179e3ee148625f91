package parse

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/envelopd/envelopd/internal/hostile"
	"github.com/envelopd/envelopd/protocols"
)

// jsonParts is a mail with n application/json attachments of one object each.
func jsonParts(n int) []byte {
	return hostile.ManyParts("parts", n)
}

// TestLimits: each limit gives its exact code, and what lies past it is
// not analysed.
func TestLimits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		raw     []byte
		lim     Limits
		code    protocols.Code
		maxAtts int // attachments listed at most
	}{
		{"parts", jsonParts(12), Limits{MaxParts: 5}, protocols.CodeTooManyParts, 3},
		{"parts-100k-defaults", jsonParts(100000), Limits{}, protocols.CodeTooManyParts, DefaultMaxAttachments},
		{"attachments", jsonParts(10), Limits{MaxAttachments: 3}, protocols.CodeTooManyAttachments, 3},
		{"json-depth-body", hostile.NestedBody("d", 30000), Limits{}, protocols.CodeJSONTooDeep, 0},
		{"json-depth-body-65", []byte("From: a@x.test\r\nSubject: PAY | x\r\n\r\n" + hostile.Nested(65) + "\r\n"), Limits{}, protocols.CodeJSONTooDeep, 0},
		{"json-size-body", []byte("From: a@x.test\r\nSubject: PAY | x\r\n\r\n{\"v\":\"" + strings.Repeat("x", 2000) + "\"}\r\n"), Limits{MaxJSONBytes: 1000}, protocols.CodeJSONTooLarge, 0},
		{"json-depth-methods", []byte("From: a@x.test\r\nSubject: METHODS\r\n\r\n" + hostile.Nested(65) + "\r\n"), Limits{}, protocols.CodeJSONTooDeep, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := Parse(tc.raw, Options{Limits: tc.lim})
			checkInvariants(t, r)
			if !r.Errors.Has(tc.code) || r.Valid {
				t.Fatalf("errors %v, want %s", r.Errors, tc.code)
			}
			if len(r.Attachments) > tc.maxAtts {
				t.Errorf("%d attachments listed, limit %d", len(r.Attachments), tc.maxAtts)
			}
			if r.Body != nil {
				t.Errorf("body %q parsed past a JSON limit", r.Body)
			}
		})
	}
}

// TestLimitsDefaultsLeaveOrdinaryMailAlone: the corpus parses the same
// with the default limits as without any (its goldens are unchanged), and
// a 64-level body is still parsed.
func TestLimitsDefaultsLeaveOrdinaryMailAlone(t *testing.T) {
	t.Parallel()
	raw := []byte("From: a@x.test\r\nSubject: WHICH\r\n\r\n" + strings.Replace(hostile.Nested(64), `{"a":`, `{"v":"0.2.0","type":"which","a":`, 1) + "\r\n")
	r := Parse(raw, Options{})
	if r.Body == nil || r.Errors.Has(protocols.CodeJSONTooDeep) {
		t.Fatalf("64 levels: errors %v", r.Errors)
	}
}

// TestOutputBoundNestedJSON: what `envelopd parse` prints for the nested
// JSON shapes is at most 4× the input + 64 KiB, with the default limits
// and with limits so loose that the body is parsed and printed (the
// printer then falls back to compact JSON).
func TestOutputBoundNestedJSON(t *testing.T) {
	t.Parallel()
	for _, size := range []int{1000, 30000, 300000} {
		for _, lim := range []Limits{{}, {MaxJSONDepth: 1 << 20, MaxJSONBytes: 1 << 30}} {
			for name, raw := range map[string][]byte{
				"body":       hostile.NestedBody("n", size),
				"attachment": hostile.NestedAttachment("n", size),
				"arrays":     []byte("From: a@x.test\r\nSubject: PAY | x\r\n\r\n" + strings.Repeat("[{\"a\":", size/6) + "1" + strings.Repeat("}]", size/6) + "\r\n"),
			} {
				t.Run(fmt.Sprintf("%s-%d-%d", name, size, lim.MaxJSONDepth), func(t *testing.T) {
					r := Parse(raw, Options{Limits: lim})
					limit := lim.OutputLimit(len(raw))
					r.Bound(limit)
					var b bytes.Buffer
					if err := EncodeWithin(&b, r, nil, limit); err != nil {
						t.Fatal(err)
					}
					if max := 4*len(raw) + 64<<10; b.Len() > max {
						t.Fatalf("printed %d bytes for a %d-byte mail, more than %d", b.Len(), len(raw), max)
					}
					if !json.Valid(b.Bytes()) {
						t.Fatal("output is not JSON")
					}
				})
			}
		}
	}
}

// TestBound: a result larger than the limit is cut to it, keeps its first
// errors and gets analysis_too_large; one within it is left alone.
func TestBound(t *testing.T) {
	t.Parallel()
	raw := jsonParts(4000)
	r := Parse(raw, Options{Limits: Limits{MaxParts: 1 << 20, MaxAttachments: 1 << 20}})
	if len(r.Attachments) != 4000 {
		t.Fatalf("%d attachments", len(r.Attachments))
	}
	full, _ := r.MarshalJSON()
	lim := Limits{MaxOutputBytes: OutputSlack}.OutputLimit(len(raw))
	if len(full) <= lim {
		t.Fatalf("test input too small: %d ≤ %d", len(full), lim)
	}
	if !r.Bound(lim) {
		t.Fatal("Bound did not cut")
	}
	got, _ := r.MarshalJSON()
	eb, _ := json.Marshal(r.Errors)
	wb, _ := json.Marshal(r.Warnings)
	if len(got)+len(eb)+len(wb) > lim || !r.Errors.Has(protocols.CodeAnalysisTooLarge) || len(r.Attachments) == 0 || len(r.Attachments) >= 4000 {
		t.Fatalf("%d bytes (limit %d), errors %v, %d attachments", len(got), lim, r.Errors, len(r.Attachments))
	}
	if r.From[0] != "mallory@attacker.test" {
		t.Errorf("from %v", r.From)
	}
	small := Parse(jsonParts(3), Options{})
	if small.Bound(OutputSlack) || small.Errors.Has(protocols.CodeAnalysisTooLarge) {
		t.Fatal("a small result was cut")
	}
}

// TestIndentedSize: IndentedSize predicts json.Indent's output length.
func TestIndentedSize(t *testing.T) {
	t.Parallel()
	for _, s := range []string{`{}`, `[]`, `{"a":[]}`, `{"a":[1,{},{"b":"]}[,:"}],"c":null}`, `"x"`, `[[[1]],[2,3]]`, `{"a\"}":{"b":1}}`} {
		var b bytes.Buffer
		if err := json.Indent(&b, []byte(s), "", "  "); err != nil {
			t.Fatal(err)
		}
		if got := IndentedSize([]byte(s)); got != b.Len() {
			t.Errorf("%s: IndentedSize %d, json.Indent %d", s, got, b.Len())
		}
	}
}

// FuzzIndentedSize: for any valid JSON, IndentedSize equals the length of
// json.Indent's output on its compact form.
func FuzzIndentedSize(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":[1,{},[]]}`, `[[[["x\"]"]]]]`, hostile.Nested(30)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var c bytes.Buffer
		if json.Compact(&c, data) != nil {
			return
		}
		var b bytes.Buffer
		if err := json.Indent(&b, c.Bytes(), "", "  "); err != nil {
			t.Fatal(err)
		}
		if got := IndentedSize(c.Bytes()); got != b.Len() {
			t.Fatalf("%s: IndentedSize %d, json.Indent %d", c.Bytes(), got, b.Len())
		}
	})
}

// FuzzCheckJSON: JSONDepth never exceeds the brackets in the input, and
// CheckJSON only ever returns the two limit codes.
func FuzzCheckJSON(f *testing.F) {
	for _, s := range []string{`{}`, `[[["]"]]]`, hostile.Nested(70), `"\`} {
		f.Add([]byte(s), 8, 100)
	}
	f.Fuzz(func(t *testing.T, data []byte, depth, size int) {
		d := JSONDepth(data)
		if d < 0 || d > bytes.Count(data, []byte("{"))+bytes.Count(data, []byte("[")) {
			t.Fatalf("depth %d", d)
		}
		if p := (Limits{MaxJSONDepth: depth, MaxJSONBytes: size}).CheckJSON(data, "x"); p != nil &&
			p.Code != protocols.CodeJSONTooDeep && p.Code != protocols.CodeJSONTooLarge {
			t.Fatalf("code %s", p.Code)
		}
	})
}
