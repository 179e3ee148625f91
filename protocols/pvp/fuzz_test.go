package pvp

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzPVP feeds arbitrary bytes to Validate: it must never panic, must
// always name the protocol, and must be valid exactly when it reports no
// problem; claims come only from valid envelopes, and the same input always
// gives the same report.
func FuzzPVP(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(vectorDir, "*.json"))
	for _, p := range files {
		doc, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(doc)
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		r := Validate(doc)
		if r.Protocol != Protocol {
			t.Fatalf("protocol %q", r.Protocol)
		}
		if r.Errors == nil || r.Summary == nil {
			t.Fatal("nil errors or summary")
		}
		if r.Valid != (len(r.Errors) == 0) {
			t.Fatalf("valid=%v with %d errors", r.Valid, len(r.Errors))
		}
		for _, p := range r.Errors {
			if p.Code == "" || p.Message == "" {
				t.Fatalf("problem without code or message: %+v", p)
			}
		}
		if !r.Valid && len(r.Claims) > 0 {
			t.Fatal("claims from an invalid envelope")
		}
		if again := Validate(doc); !reflect.DeepEqual(r, again) {
			t.Fatalf("not deterministic:\n%+v\n%+v", r, again)
		}
	})
}
