package store

import (
	"encoding/json"
	"reflect"
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
		col := problemCol(list, []byte(tc.result), "errors")
		if (col == "") != tc.once {
			t.Errorf("%s: stored %q, want once %v", tc.name, col, tc.once)
		}
		if got, want := decodeProblemCol(col, []byte(tc.result), "errors"), decodeProblems(list); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: read back %v, want %v", tc.name, got, want)
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
		col := problemCol(list, result, "errors")
		if got, want := decodeProblemCol(col, result, "errors"), decodeProblems(list); !reflect.DeepEqual(got, want) {
			t.Fatalf("stored %q over %q: read %v, want %v", col, result, got, want)
		}
	})
}
