package parse

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/envelopd/envelopd/protocols/envelopay"
)

var update = flag.Bool("update", false, "rewrite testdata/eml/*.golden.json from the parser's output")

// corpus returns the .eml files of testdata/eml; a name starting with
// "lenient-" is parsed with Options.Lenient.
func corpus(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob("../testdata/eml/*.eml")
	if err != nil || len(files) < 60 {
		t.Fatalf("corpus: %d files, %v", len(files), err)
	}
	return files
}

func optionsFor(file string) Options {
	return Options{Lenient: strings.HasPrefix(filepath.Base(file), "lenient-")}
}

// TestCorpus parses every mail of the corpus and compares the JSON that
// `envelopd parse` prints with NAME.golden.json, byte for byte.
func TestCorpus(t *testing.T) {
	for _, file := range corpus(t) {
		name := filepath.Base(file)
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			r := Parse(raw, optionsFor(file))
			checkInvariants(t, r)
			var got bytes.Buffer
			if err := Encode(&got, r, nil); err != nil {
				t.Fatal(err)
			}
			golden := strings.TrimSuffix(file, ".eml") + ".golden.json"
			if *update {
				if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./parse -run TestCorpus -update, then read the golden)", err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Errorf("output differs from %s:\n--- got\n%s", golden, got.Bytes())
			}
		})
	}
}

// checkInvariants holds for every result, whatever the input.
func checkInvariants(t testing.TB, r *Result) {
	t.Helper()
	if r == nil {
		t.Fatal("nil result")
	}
	if r.Valid != (len(r.Errors) == 0) {
		t.Fatalf("valid = %v with errors %v", r.Valid, r.Errors)
	}
	if r.Errors == nil || r.Warnings == nil || r.From == nil || r.To == nil || r.Cc == nil ||
		r.InReplyTo == nil || r.References == nil || r.Attachments == nil {
		t.Fatal("a list is nil (it must print as [])")
	}
	for _, p := range append(r.Errors, r.Warnings...) {
		if p.Code == "" || p.Message == "" {
			t.Fatalf("problem without code or message: %+v", p)
		}
	}
	if r.Type != "" && !envelopay.IsType(r.Type) {
		t.Fatalf("type %q", r.Type)
	}
	if r.Body != nil {
		f, err := envelopay.DecodeObject(r.Body)
		if err != nil || len(f) != len(r.Fields) {
			t.Fatalf("body %s does not decode to Fields: %v", r.Body, err)
		}
		if id, _ := envelopay.String(f["id"]); id != r.ID {
			t.Fatalf("ID %q, body id %q", r.ID, id)
		}
	} else if r.Fields != nil || r.ID != "" {
		t.Fatal("Fields or ID without a body")
	}
	if r.NaturalLanguage && (r.Type != "methods" || r.Body != nil) {
		t.Fatal("natural_language outside a METHODS without JSON")
	}
	if r.OOPS != nil {
		if r.Valid {
			t.Fatal("an OOPS for a valid message")
		}
		if errs, warns := envelopay.Validate("oops", r.OOPS); len(errs)+len(warns) > 0 {
			t.Fatalf("OOPS %s is not a valid OOPS: %v %v", r.OOPS, errs, warns)
		}
	}
	for _, a := range r.Attachments {
		if a.Size != len(a.Data) || a.ContentType == "" {
			t.Fatalf("attachment %+v", a)
		}
	}
	if _, err := json.Marshal(r); err != nil {
		t.Fatal(err)
	}
}
