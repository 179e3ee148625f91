package tunnel

import (
	"testing"
	"time"

	"github.com/envelopd/envelopd/protocols/internal/vectors"
)

// FuzzInspect feeds arbitrary parts to Inspect under each media type: it
// must never panic, must be valid exactly when it reports no problem, must
// name only known protocols, and must agree with MediaType on detection.
func FuzzInspect(f *testing.F) {
	for _, doc := range vectors.Docs(f, vectorDir) {
		f.Add(doc, "application/json")
	}
	f.Add([]byte(`{"jsonrpc":"2.0","method":"SendMessage"}`), "application/a2a+json")
	f.Add([]byte(`{}`), "application/pvp+json")
	f.Add([]byte(`{}`), "application/vcp+json")
	f.Add([]byte(`{"v":"0.1"}`), "application/aicp+json")
	opts := Options{Now: time.Unix(1735776000, 0)}
	f.Fuzz(func(t *testing.T, data []byte, contentType string) {
		r := Inspect(data, contentType, "part.json", opts)
		if r.Errors == nil || r.Summary == nil {
			t.Fatal("nil errors or summary")
		}
		if r.Valid != (len(r.Errors) == 0) {
			t.Fatalf("valid=%v with %d errors", r.Valid, len(r.Errors))
		}
		switch r.Protocol {
		case "", VCP, Vacant, A2A, AICP, PVP:
		default:
			t.Fatalf("unknown protocol %q", r.Protocol)
		}
		mt := MediaType(data)
		if r.Protocol == "" && mt != "application/json" {
			t.Fatalf("plain part labelled %s", mt)
		}
		if r.Protocol == "" && !r.Valid && len(r.Errors) != 1 {
			t.Fatalf("a part that does not parse has %d errors", len(r.Errors))
		}
	})
}
