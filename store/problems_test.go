package store

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/envelopd/envelopd/protocols"
)

// TestProblemCol: a list is stored as ” exactly when the result holds
// the same bytes under its top-level key, written once; a reader then
// gets the same list back.
func TestProblemCol(t *testing.T) {
	t.Parallel()
	list := `[{"code":"not_envelopay","field":"subject","message":"a <b> & \"c\""}]`
	for _, tc := range []struct {
		name, result string
		once         bool
	}{
		{"the result's", `{"type":null,"errors":` + list + `,"warnings":[]}`, true},
		{"spaced", "{ \"type\" : null ,\n \"errors\" : " + list + " }", true},
		{"last key", `{"body":{"x":[1,{"y":"]}"}]},"errors":` + list + `}`, true},
		{"another list", `{"errors":[],"warnings":` + list + `}`, false},
		{"nested only", `{"body":{"errors":` + list + `}}`, false},
		{"twice", `{"errors":` + list + `,"errors":` + list + `}`, false},
		{"escaped key", `{"err\u006frs":` + list + `}`, false},
		{"HTML escaped", `{"errors":[{"code":"not_envelopay","field":"subject","message":"a \u003cb\u003e \u0026 \"c\""}]}`, false},
		{"cut short", `{"errors":` + list, false},
		{"not an object", `[` + list + `]`, false},
		{"not JSON", `not json`, false},
		{"none", ``, false},
	} {
		col, wcol := problemCols(list, "[]", []byte(tc.result))
		if (col == "") != tc.once {
			t.Errorf("%s: stored %q, want once %v", tc.name, col, tc.once)
		}
		if got, _ := decodeProblemCols(col, wcol, []byte(tc.result)); !reflect.DeepEqual(got, decodeProblems(list)) {
			t.Errorf("%s: read back %v, want %v", tc.name, got, decodeProblems(list))
		}
	}
	if got := problemsJSON(decodeProblems(list)); got != list {
		t.Errorf("problemsJSON: %s, want %s", got, list)
	}
}

// TestCodeTags: each code once, sorted, as its JSON reads back.
func TestCodeTags(t *testing.T) {
	t.Parallel()
	errs := protocols.Problems{{Code: "b"}, {Code: "a"}, {Code: "bad\xff"}}
	warns := protocols.Problems{{Code: "a"}, {Code: protocols.Code(string(make([]byte, maxTagBytes)))}}
	want := []string{"code:a", "code:b", "code:bad\uFFFD"}
	if got := codeTags(errs, warns); !reflect.DeepEqual(got, want) {
		t.Errorf("codeTags: %q, want %q", got, want)
	}
	if got := codeTags(nil, protocols.Problems{}); got != nil {
		t.Errorf("no problems: %q, want nil", got)
	}
}

// FuzzProblemCol: whatever the result bytes and the list, what a reader
// makes of the stored column is the list written, and topLevel never
// panics.
func FuzzProblemCol(f *testing.F) {
	f.Add([]byte(`{"type":null,"errors":[{"code":"x","message":"y"}],"warnings":[]}`), `[{"code":"x","message":"y"}]`)
	f.Add([]byte(`{"errors":[],"errors":[]}`), `[]`)
	f.Add([]byte(`{"a":{"errors":"[]"},"errors":"[]"}`), `[]`)
	f.Fuzz(func(t *testing.T, result []byte, list string) {
		var ps protocols.Problems
		if json.Unmarshal([]byte(list), &ps) != nil {
			return
		}
		list = problemsJSON(ps)
		if len(ps) > 0 {
			// The bytes parse.Result writes for the same list.
			var b bytes.Buffer
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false)
			if enc.Encode(ps) == nil && list != strings.TrimSuffix(b.String(), "\n") {
				t.Fatalf("problemsJSON %s, want %s", list, b.String())
			}
		}
		for _, l := range [][2]string{{list, "[]"}, {"[]", list}, {list, list}} {
			e, w := problemCols(l[0], l[1], result)
			gotE, gotW := decodeProblemCols(e, w, result)
			if !reflect.DeepEqual(gotE, decodeProblems(l[0])) || !reflect.DeepEqual(gotW, decodeProblems(l[1])) {
				t.Fatalf("stored %q %q over %q: read %v %v, want %s %s", e, w, result, gotE, gotW, l[0], l[1])
			}
		}
	})
}

// BenchmarkProblemCol: the write path's cost of keeping the lists once,
// on the result of a 600-byte mail with one error.
func BenchmarkProblemCol(b *testing.B) {
	list := `[{"code":"not_envelopay","field":"subject","message":"subject \"Order 0: question about delivery\" is not TYPE or TYPE | note with one of the nine all-caps types"}]`
	result := []byte(`{"type":null,"note":"","valid":false,"message_id":"fp0.600@buyer.test","in_reply_to":"","references":[],"from":["buyer0@buyer.test"],"to":["agent@shop.test"],"cc":[],"subject":"Order 0: question about delivery","date":"2026-11-27T10:00:00Z","fields":null,"body":null,"attachments":[{"filename":"o.json","content_type":"application/json","size":33,"protocol":null,"valid":true,"errors":[],"summary":null}],"errors":` + list + `,"warnings":[],"oops":null}`)
	errs := decodeProblems(list)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if e, w := problemCols(problemsJSON(errs), "[]", result); e != "" || w != "" {
			b.Fatal("not once")
		}
		_ = codeTags(errs, nil)
	}
}
