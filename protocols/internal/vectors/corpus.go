package vectors

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/protocols/canonjson"
)

// Files returns the NAME.json documents of dir; fewer than min is fatal.
func Files(t testing.TB, dir string, min int) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < min {
		t.Fatalf("found %d vectors in %s, want at least %d", len(files), dir, min)
	}
	return files
}

// Each runs f as a subtest NAME for every NAME.json of dir (at least min of
// them) with the document and the bytes of its NAME+ext companion.
func Each(t *testing.T, dir string, min int, ext string, f func(t *testing.T, doc, want []byte)) {
	t.Helper()
	for _, path := range Files(t, dir, min) {
		name := strings.TrimSuffix(path, ".json")
		t.Run(filepath.Base(name), func(t *testing.T) {
			doc, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(name + ext)
			if err != nil {
				t.Fatal(err)
			}
			f(t, doc, want)
		})
	}
}

// Docs returns the contents of every NAME.json of dir, the seeds of a fuzz
// target; a file that cannot be read is fatal.
func Docs(t testing.TB, dir string) [][]byte {
	t.Helper()
	var docs [][]byte
	for _, path := range Files(t, dir, 0) {
		doc, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, doc)
	}
	return docs
}

// RunExpect runs validate on every NAME.json of dir (at least one) and
// compares the report with NAME.expect (see Expect and Expect.Diff); every
// problem must also carry a message.
func RunExpect(t *testing.T, dir string, validate func([]byte) protocols.Report) {
	t.Helper()
	for _, path := range Files(t, dir, 1) {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".json"), func(t *testing.T) {
			doc, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			want := ReadExpect(t, strings.TrimSuffix(path, ".json")+".expect")
			got := validate(doc)
			diff := want.Diff(got)
			for _, p := range got.Errors {
				if p.Message == "" {
					diff += "problem " + string(p.Code) + " has no message\n"
				}
			}
			if diff != "" {
				t.Errorf("%s", diff)
			}
		})
	}
}

// Problem is one entry of the "errors" list of a NAME.want file.
type Problem struct {
	Code  protocols.Code `json:"code"`
	Field string         `json:"field"`
}

// CodesAt returns "CODE@FIELD" for each problem, in order.
func CodesAt(ps []protocols.Problem) []string {
	var out []string
	for _, p := range ps {
		out = append(out, string(p.Code)+"@"+p.Field)
	}
	return out
}

// WantCodesAt is CodesAt for the problems of a NAME.want file.
func WantCodesAt(ps []Problem) []string {
	var out []string
	for _, p := range ps {
		out = append(out, string(p.Code)+"@"+p.Field)
	}
	return out
}

// CheckErrors reports an error unless r has exactly the problems of want,
// codes and fields in order, and is valid exactly when want lists none.
func CheckErrors(t *testing.T, r protocols.Report, want []Problem) {
	t.Helper()
	got, exp := CodesAt(r.Errors), WantCodesAt(want)
	if !reflect.DeepEqual(got, exp) {
		t.Errorf("errors = %v, want %v\n%v", got, exp, r.Errors)
	}
	if r.Valid != (len(exp) == 0) {
		t.Errorf("Valid = %v with errors %v", r.Valid, r.Errors)
	}
}

// FuzzValidate is the fuzz target of a validator: seeded with the NAME.json
// documents of dir, it checks that validate never panics, always names
// protocol, returns non-nil errors and summary, is valid exactly when it
// reports no problem, gives every problem a code and a message, claims only
// for valid documents, and gives the same report for the same input.
func FuzzValidate(f *testing.F, dir, protocol string, validate func([]byte) protocols.Report) {
	for _, doc := range Docs(f, dir) {
		f.Add(doc)
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		r := validate(doc)
		if r.Protocol != protocol {
			t.Fatalf("protocol %q", r.Protocol)
		}
		if r.Errors == nil || r.Summary == nil {
			t.Fatal("nil errors or summary")
		}
		if r.Valid != (len(r.Errors) == 0) {
			t.Fatalf("valid=%v with %d errors", r.Valid, len(r.Errors))
		}
		CheckProblems(t, r)
		if !r.Valid && len(r.Claims) > 0 {
			t.Fatal("claims from an invalid envelope")
		}
		if again := validate(doc); !reflect.DeepEqual(r, again) {
			t.Fatalf("not deterministic:\n%+v\n%+v", r, again)
		}
	})
}

// CheckProblems fails t at the first problem of r without a code or a
// message.
func CheckProblems(t *testing.T, r protocols.Report) {
	t.Helper()
	for _, p := range r.Errors {
		if p.Code == "" || p.Message == "" {
			t.Fatalf("problem without code or message: %+v", p)
		}
	}
}

// Detects checks a detector of decoded objects: for each FILE of dir
// (parsed with canonjson.ParseObject) detect must answer want.
func Detects(t *testing.T, dir, name string, detect func(map[string]any) bool, want map[string]bool) {
	t.Helper()
	for file, w := range want {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		m, err := canonjson.ParseObject(b)
		if err != nil {
			t.Fatal(err)
		}
		if got := detect(m); got != w {
			t.Errorf("%s(%s) = %v", name, file, got)
		}
	}
}
