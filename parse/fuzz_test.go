package parse

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/protocols/envelopay"
)

// seedCorpus adds every corpus mail to a fuzz target.
func seedCorpus(f *testing.F, add func(raw []byte, file string)) {
	for _, file := range corpus(f) {
		raw, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		add(raw, file)
	}
}

// FuzzParse: no input makes Parse panic or break its invariants, and the
// result always encodes to one JSON object.
func FuzzParse(f *testing.F) {
	seedCorpus(f, func(raw []byte, file string) { f.Add(raw, optionsFor(file).Lenient) })
	f.Fuzz(func(t *testing.T, raw []byte, lenient bool) {
		r := Parse(raw, Options{Lenient: lenient})
		checkInvariants(t, r)
		var b bytes.Buffer
		if err := Encode(&b, r, map[string]any{"dkim": nil}); err != nil {
			t.Fatal(err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b.Bytes(), &m); err != nil {
			t.Fatalf("output is not a JSON object: %v\n%s", err, b.Bytes())
		}
	})
}

// FuzzFindJSON: what FindJSON returns is a JSON object taken verbatim from
// the text; its errors are invalid_json Problems.
func FuzzFindJSON(f *testing.F) {
	seedCorpus(f, func(raw []byte, _ string) {
		if _, body, _ := readHeader(raw); body != nil {
			f.Add(body)
		}
	})
	for _, s := range []string{`{}`, `[{}]`, `{"a":"}"}`, `{"a":"\"}`, `x {y} {"z":1}`, `{"v":`, `[{"a":1},`, "{\"\u2028\":1}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		obj, err := FindJSON(text)
		if err != nil {
			code := err.(protocols.Problem).Code
			if obj != nil || (code != protocols.CodeInvalidJSON && code != protocols.CodeJSONTooDeep && code != protocols.CodeJSONTooLarge) {
				t.Fatalf("%q: %v, %q", text, err, obj)
			}
			return
		}
		if obj == nil {
			return
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(obj, &m) != nil || !bytes.Contains(text, obj) || obj[0] != '{' || obj[len(obj)-1] != '}' {
			t.Fatalf("%q: returned %q", text, obj)
		}
	})
}

// FuzzSubjectLine: SubjectLine never panics; when it accepts a line, the
// subject is one of the nine types, rest is a suffix of text, and the
// JSON found in rest has that type.
func FuzzSubjectLine(f *testing.F) {
	for _, s := range []string{"ORDER | x\n{\"type\":\"order\"}", "PAY\n\n{\"type\":\"order\"}", "{\"type\":\"pay\"}", "\n\nWHICH |\n{\"type\":\"which\"}", "Re: PAY\n{}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		s, rest, ok := SubjectLine(text)
		if !ok {
			return
		}
		if !envelopay.IsType(s.Type) || !bytes.HasSuffix(text, rest) {
			t.Fatalf("accepted %+v, rest %q of %q", s, rest, text)
		}
		_, fields, err := findJSON(rest)
		var typ string
		if err != nil || json.Unmarshal(fields["type"], &typ) != nil || !strings.EqualFold(typ, s.Type) {
			t.Fatalf("accepted %+v but rest %q has no JSON of that type", s, rest)
		}
	})
}
