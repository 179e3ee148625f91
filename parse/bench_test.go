package parse

import (
	"os"
	"testing"
)

// BenchmarkParse2KB parses a realistic 2 KB Envelopay mail (a prepaid
// ORDER, multipart/alternative, with Received and DKIM-Signature headers).
// Target (issue 4): ≤ 20 µs/op and a small, flat number of allocations.
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
