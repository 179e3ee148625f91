package parse

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/protocols/envelopay"
)

// TestOOPSBody pins the one composer of courtesy OOPS bodies: what a
// peer wrote reaches it only sanitised.
func TestOOPSBody(t *testing.T) {
	long := strings.Repeat("x", 500)
	for _, tc := range []struct {
		name string
		p    protocols.Problem
		ref  string
		want string
	}{
		{"unknown type", protocols.Problem{Code: protocols.CodeUnknownType, Field: "subject", Message: `unknown Envelopay type "REFUND"`}, "",
			`{"v":"0.2.0","type":"oops","note":"unknown Envelopay type \"REFUND\"","error":{"code":"unknown_type","field":"subject","supported":["which","methods","pay","order","fulfill","invoice","offer","accept","oops"]}}`},
		{"dkim tags never echoed", protocols.Problem{Code: protocols.CodeDKIMFailed, Message: "DKIM signature of evil.example (selector http://x/\x1b[31m) did not verify"}, "ord_1",
			`{"v":"0.2.0","type":"oops","note":"A DKIM signature of your message did not verify, so it was not processed; send it again with a valid signature.","error":{"code":"dkim_failed"},"ref":"ord_1"}`},
		{"control characters", protocols.Problem{Code: protocols.CodeMissingField, Field: "amount\x1b", Message: "\"amount\"\x1b[2J is\r\nrequired\u202e"}, "pay\x00",
			`{"v":"0.2.0","type":"oops","note":"\"amount\" [2J is required","error":{"code":"missing_field"}}`},
		{"bounded", protocols.Problem{Code: protocols.CodeMissingField, Message: long}, long,
			`{"v":"0.2.0","type":"oops","note":"` + strings.Repeat("x", MaxOOPSNote-1) + `…","error":{"code":"missing_field"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(OOPSBody(tc.p, tc.ref)); got != tc.want {
				t.Errorf("OOPSBody =\n %s\nwant\n %s", got, tc.want)
			}
		})
	}
}

// TestOOPSOwed: which errors get an OOPS (and the preview) — none for
// invalid_json or invalid_field, none for an OOPS or a From in
// doubt.
func TestOOPSOwed(t *testing.T) {
	pr := func(c protocols.Code, field string) protocols.Problem {
		return protocols.Problem{Code: c, Field: field}
	}
	for _, tc := range []struct {
		typ  string
		errs protocols.Problems
		want protocols.Code // "" = none
	}{
		{"pay", protocols.Problems{pr(protocols.CodeInvalidJSON, "")}, ""},
		{"pay", protocols.Problems{pr(protocols.CodeInvalidField, "amount"), pr(protocols.CodeMissingField, "proof")}, protocols.CodeMissingField},
		{"", protocols.Problems{pr(protocols.CodeUnknownType, "subject")}, protocols.CodeUnknownType},
		{"", protocols.Problems{pr(protocols.CodeMissingField, "x")}, ""},
		{"oops", protocols.Problems{pr(protocols.CodeMissingField, "error")}, ""},
		{"pay", protocols.Problems{pr(protocols.CodeMissingField, "amount"), pr(protocols.CodeInvalidField, "from")}, ""},
		{"pay", protocols.Problems{pr(protocols.CodeDKIMFailed, "")}, protocols.CodeDKIMFailed},
	} {
		p, ok := OOPSOwed(tc.typ, tc.errs)
		if ok != (tc.want != "") || p.Code != tc.want {
			t.Errorf("OOPSOwed(%q, %v) = %v %v, want %q", tc.typ, tc.errs, p, ok, tc.want)
		}
	}
}

// FuzzOOPSBody: whatever the problem text, field and ref, the body is a
// valid Envelopay OOPS whose note is printable, on one line and bounded.
func FuzzOOPSBody(f *testing.F) {
	f.Add("missing_field", "amount", "\"amount\" is required", "pay_1")
	f.Add("dkim_failed", "", "d=evil s=\x1b[31m", "")
	f.Add("unknown_type", "subject", "unknown \u202e type", strings.Repeat("é", 300))
	f.Fuzz(func(t *testing.T, code, field, msg, ref string) {
		b := OOPSBody(protocols.Problem{Code: protocols.Code(code), Field: field, Message: msg}, ref)
		var v struct {
			Note string `json:"note"`
		}
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, b)
		}
		if utf8.RuneCountInString(v.Note) > MaxOOPSNote || v.Note == "" {
			t.Fatalf("note of %d runes: %q", utf8.RuneCountInString(v.Note), v.Note)
		}
		for _, r := range v.Note {
			if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
				t.Fatalf("note holds %U: %q", r, v.Note)
			}
		}
		if code != "" {
			if errs, _ := envelopay.Validate("oops", b); len(errs) > 0 {
				t.Fatalf("invalid OOPS %s: %v", b, errs)
			}
		}
	})
}
