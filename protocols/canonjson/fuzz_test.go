package canonjson

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func addSeeds(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(vectorDir, "*.json"))
	for _, name := range files {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
}

// FuzzJS checks that Parse never panics and that JS output is valid JSON
// that canonicalises to itself (parse(JS(v)) prints the same bytes).
func FuzzJS(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := Parse(data)
		if err != nil {
			return
		}
		out, err := JS(v)
		if err != nil {
			t.Fatalf("JS of parsed value: %v", err)
		}
		v2, err := Parse(out)
		if err != nil {
			t.Fatalf("JS output %q does not parse: %v", out, err)
		}
		out2, err := JS(v2)
		if err != nil || !bytes.Equal(out, out2) {
			t.Fatalf("JS not idempotent: %q then %q (%v)", out, out2, err)
		}
	})
}

// FuzzPython is FuzzJS for both Python variants; the only allowed encoder
// error is a non-finite float.
func FuzzPython(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := Parse(data)
		if err != nil {
			return
		}
		for _, ascii := range []bool{false, true} {
			out, err := Python(v, ascii)
			if err != nil {
				continue // 1e400: Python would print Infinity
			}
			v2, err := Parse(out)
			if err != nil {
				t.Fatalf("Python(%v) output %q does not parse: %v", ascii, out, err)
			}
			out2, err := Python(v2, ascii)
			if err != nil || !bytes.Equal(out, out2) {
				t.Fatalf("Python(%v) not idempotent: %q then %q (%v)", ascii, out, out2, err)
			}
			if ascii {
				for _, c := range out {
					if c > 0x7e {
						t.Fatalf("ensure_ascii output has byte %#x", c)
					}
				}
			}
		}
	})
}
