package hostile

import (
	"bytes"
	"strings"
	"testing"
)

// lines checks that raw has only CRLF line ends and no line longer than
// SMTP allows (RFC 5321 §4.5.3.1.6: 1000 with CRLF).
func lines(t *testing.T, raw []byte) {
	t.Helper()
	if bytes.Count(raw, []byte("\n")) != bytes.Count(raw, []byte("\r\n")) || bytes.Count(raw, []byte("\r")) != bytes.Count(raw, []byte("\r\n")) {
		t.Fatal("a bare CR or LF")
	}
	for _, l := range bytes.Split(raw, []byte("\r\n")) {
		if len(l) > 998 {
			t.Fatalf("a %d-byte line", len(l))
		}
	}
}

func TestShapes(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		raw      []byte
		min, max int
		count    string
		n        int
	}{
		"many-parts": {ManyParts("p", 1000), 60_000, 80_000, "Content-Type: application/json", 1000},
		"nested":     {NestedBody("n", 30000), 30000, 32000, `{"a":`, 5000},
		"nested-att": {NestedAttachment("n", 3000), 3000, 4000, `{"a":`, 500},
		"large":      {Large("l", 1<<20), 1 << 20, 1<<20 + 200, "--b", 3},
		"normal":     {Normal("o"), 1800, 2300, "ORDER", 1},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			lines(t, tc.raw)
			if len(tc.raw) < tc.min || len(tc.raw) > tc.max {
				t.Errorf("%d bytes, want %d..%d", len(tc.raw), tc.min, tc.max)
			}
			if n := strings.Count(string(tc.raw), tc.count); n != tc.n {
				t.Errorf("%d × %q, want %d", n, tc.count, tc.n)
			}
		})
	}
}

// TestWriteLargeIsLarge: the streamed form is the same bytes.
func TestWriteLargeIsLarge(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	n, err := WriteLarge(&b, "x", 300_000)
	if err != nil || n != int64(b.Len()) || !bytes.Equal(b.Bytes(), Large("x", 300_000)) {
		t.Fatalf("WriteLarge: %d bytes, %v; differs from Large", n, err)
	}
}
