package dkim

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// TestParseStatic reads testdata/dkim/static/NAME.txt and compares with
// NAME.json: {"records": {name: [txt...]}} or {"error": "..."}.
func TestParseStatic(t *testing.T) {
	files, _ := filepath.Glob(testdata + "static/*.txt")
	if len(files) == 0 {
		t.Fatal("no cases")
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			var want struct {
				Records map[string][]string `json:"records"`
				Error   string              `json:"error"`
			}
			if err := json.Unmarshal(readFile(t, strings.TrimSuffix(f, ".txt")+".json"), &want); err != nil {
				t.Fatal(err)
			}
			fh, err := os.Open(f)
			if err != nil {
				t.Fatal(err)
			}
			defer fh.Close()
			r, err := ParseStatic(fh)
			if want.Error != "" {
				var se *SyntaxError
				if !errors.As(err, &se) || err.Error() != want.Error {
					t.Fatalf("error %v, want SyntaxError %q", err, want.Error)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(r.records, want.Records) {
				t.Errorf("records %q, want %q", r.records, want.Records)
			}
			for name, txts := range want.Records {
				got, err := r.LookupTXT(context.Background(), strings.ToUpper(name)+".")
				if err != nil || !reflect.DeepEqual(got, txts) {
					t.Errorf("LookupTXT(%s) = %q, %v", name, got, err)
				}
			}
		})
	}
}

func TestStaticResolverNotFound(t *testing.T) {
	r := NewStaticResolver()
	_, err := r.LookupTXT(context.Background(), "x._domainkey.lab.test")
	var le *LookupError
	if !errors.Is(err, ErrNoRecord) || !errors.As(err, &le) || le.Temporary() {
		t.Fatalf("err = %v, want a permanent LookupError wrapping ErrNoRecord", err)
	}
}

func TestLoadStaticResolverErrors(t *testing.T) {
	if _, err := LoadStaticResolver(testdata + "static/does-not-exist.txt"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	_, err := LoadStaticResolver(testdata + "static/no-value.txt")
	var se *SyntaxError
	if !errors.As(err, &se) || se.Line != 2 || !strings.HasPrefix(err.Error(), testdata+"static/no-value.txt: line 2:") {
		t.Errorf("bad file: %v", err)
	}
}

func TestStaticResolverConcurrent(t *testing.T) {
	r := NewStaticResolver()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				r.Add("a._domainkey.lab.test", "v")
				if _, err := r.LookupTXT(context.Background(), "A._domainkey.lab.test."); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	got, _ := r.LookupTXT(context.Background(), "a._domainkey.lab.test")
	if len(got) != 800 {
		t.Errorf("%d records, want 800", len(got))
	}
}

func FuzzParseStatic(f *testing.F) {
	files, _ := filepath.Glob(testdata + "static/*.txt")
	for _, p := range append(files, testdata+"keys.txt") {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseStatic(strings.NewReader(string(data)))
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) && !strings.Contains(err.Error(), "token too long") {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		for name, txts := range r.records {
			if name != normName(name) || len(txts) == 0 {
				t.Fatalf("bad entry %q %q", name, txts)
			}
		}
	})
}
