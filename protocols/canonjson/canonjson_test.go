package canonjson

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const vectorDir = "../../testdata/protocols/canonjson"

// TestVectors runs every NAME.json in the vector directory: inputs that must
// be rejected have NAME.err; the others have the outputs of node and python3
// (see gen.sh) in NAME.js, NAME.py and NAME.pyascii, or NAME.py.err.
func TestVectors(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join(vectorDir, "*.json"))
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no vectors in %s: %v", vectorDir, err)
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(in, ".json")
		t.Run(filepath.Base(name), func(t *testing.T) {
			data := mustRead(t, in)
			v, err := Parse(data)
			if want, ok := readOpt(t, name+".err"); ok {
				if err == nil {
					t.Fatalf("Parse accepted input that must be rejected")
				}
				if !errors.Is(err, ErrSyntax) {
					t.Errorf("error %v does not wrap ErrSyntax", err)
				}
				if w := strings.TrimSpace(string(want)); !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			checked := 0
			check := func(file string, enc func() ([]byte, error)) {
				want, ok := readOpt(t, file)
				if !ok {
					return
				}
				checked++
				got, err := enc()
				if err != nil {
					t.Errorf("%s: %v", filepath.Base(file), err)
					return
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s:\n got %s\nwant %s", filepath.Base(file), got, want)
				}
			}
			check(name+".js", func() ([]byte, error) { return JS(v) })
			check(name+".py", func() ([]byte, error) { return Python(v, false) })
			check(name+".pyascii", func() ([]byte, error) { return Python(v, true) })
			if _, ok := readOpt(t, name+".py.err"); ok {
				checked++
				if out, err := Python(v, false); err == nil {
					t.Errorf("Python printed %s, want an error", out)
				}
			}
			if checked < 2 {
				t.Errorf("vector has %d expected outputs, want at least 2", checked)
			}
		})
	}
}

// TestGoValues covers the Go types the encoders accept beside the parse tree.
func TestGoValues(t *testing.T) {
	v := map[string]any{
		"f": 1.0, "g": 1e-5, "h": 1e16, "i": int64(-3), "u": uint64(7),
		"s": []string{"<", "&"}, "m": map[string]string{"b": "2", "a": "1"},
	}
	tests := []struct {
		name string
		enc  func() ([]byte, error)
		want string
	}{
		{"js", func() ([]byte, error) { return JS(v) }, `{"f":1,"g":0.00001,"h":10000000000000000,"i":-3,"m":{"a":"1","b":"2"},"s":["<","&"],"u":7}`},
		{"python", func() ([]byte, error) { return Python(v, false) }, `{"f":1.0,"g":1e-05,"h":1e+16,"i":-3,"m":{"a":"1","b":"2"},"s":["<","&"],"u":7}`},
	}
	for _, tc := range tests {
		got, err := tc.enc()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if string(got) != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
	var uv *UnsupportedValueError
	if _, err := JS(map[string]any{"x": struct{}{}}); !errors.As(err, &uv) || uv.Path != ".x" {
		t.Errorf("JS(struct) error = %v, want UnsupportedValueError at .x", err)
	}
	if _, err := Python("\xff", false); !errors.As(err, &uv) {
		t.Errorf("Python(invalid UTF-8) error = %v, want UnsupportedValueError", err)
	}
}

func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readOpt(t *testing.T, name string) ([]byte, bool) {
	t.Helper()
	b, err := os.ReadFile(name)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return b, true
}
