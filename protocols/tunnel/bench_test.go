package tunnel

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkInspect inspects one part of each protocol: the
// spec's VCP offer, PVP session.create, a signed AICP message, a Vacant
// envelope (Ed25519 verify) and an A2A request.
func BenchmarkInspect(b *testing.B) {
	names := []string{"vcp-by-content", "pvp-label-disagrees", "aicp-signed", "vacant-by-content", "a2a-message-send"}
	parts := make([][]byte, len(names))
	for i, n := range names {
		data, err := os.ReadFile(filepath.Join(vectorDir, n+".json"))
		if err != nil {
			b.Fatal(err)
		}
		parts[i] = data
	}
	opts := Options{Now: time.Unix(1735776000, 0)}
	for i, n := range names {
		b.Run(n, func(b *testing.B) {
			for b.Loop() {
				if r := Inspect(parts[i], "application/json", "part.json", opts); r.Protocol == "" {
					b.Fatal("not detected")
				}
			}
		})
	}
}

// BenchmarkMediaType is the compose --attach path: detection only.
func BenchmarkMediaType(b *testing.B) {
	data, err := os.ReadFile(filepath.Join(vectorDir, "vcp-by-content.json"))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if MediaType(data) != "application/vcp+json" {
			b.Fatal("wrong media type")
		}
	}
}
