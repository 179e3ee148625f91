package parse

import (
	"bytes"
	"os"
	"testing"

	"github.com/envelopd/envelopd/internal/hostile"
)

// BenchmarkParse2KB parses a realistic 2 KB Envelopay mail (a prepaid
// ORDER, multipart/alternative, with Received and DKIM-Signature headers).
// Target: ≤ 20 µs/op and a small, flat number of allocations.
func BenchmarkParse2KB(b *testing.B) {
	raw, err := os.ReadFile("../testdata/eml/bench-order-2kb.eml")
	if err != nil {
		b.Fatal(err)
	}
	if r := Parse(raw, Options{}); !r.Valid || r.ID != "ord_8xK2" {
		b.Fatalf("benchmark mail does not parse as intended: %+v", r.Errors)
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		Parse(raw, Options{})
	}
}

// BenchmarkParseHostile parses the hostile shapes (internal/hostile) with the
// default limits, bounds the result and encodes it as `envelopd parse`
// does; out-bytes/op is the printed size (at most 4× the input + 64 KiB).
// The whole-server figures (peak RSS) come from `envelopd-load hostile`.
func BenchmarkParseHostile(b *testing.B) {
	for _, s := range []struct {
		name string
		raw  []byte
	}{
		{"many-parts-100k", hostile.ManyParts("p", 100000)},
		{"nested-30KB", hostile.NestedBody("n", 30000)},
		{"large-24MiB", hostile.Large("l", 24<<20)},
	} {
		b.Run(s.name, func(b *testing.B) {
			b.SetBytes(int64(len(s.raw)))
			b.ReportAllocs()
			var out bytes.Buffer
			for b.Loop() {
				out.Reset()
				r := Parse(s.raw, Options{})
				lim := Limits{}.OutputLimit(len(s.raw))
				r.Bound(lim)
				if err := EncodeWithin(&out, r, nil, lim); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(out.Len()), "out-bytes/op")
		})
	}
}
