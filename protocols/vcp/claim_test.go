package vcp

import (
	"os"
	"path/filepath"
	"testing"
)

// TestClaimReplayVersusConflict pins the choice of the canonical request:
// a re-send with a new msg_id, ts and signature claims the same value, a
// different request under the same key claims another.
func TestClaimReplayVersusConflict(t *testing.T) {
	claim := func(name string) string {
		t.Helper()
		doc, err := os.ReadFile(filepath.Join(vectorDir, name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		r := Validate(doc)
		if !r.Valid || len(r.Claims) != 1 {
			t.Fatalf("%s: valid=%v claims=%d errors=%v", name, r.Valid, len(r.Claims), r.Errors)
		}
		return r.Claims[0].Key + " " + r.Claims[0].Value
	}
	orig := claim("spec-commerce-search")
	if got := claim("idem-retry"); got != orig {
		t.Errorf("re-send claims %q, want the original's %q", got, orig)
	}
	for _, name := range []string{"idem-conflict", "idem-other-in-reply-to"} {
		if got := claim(name); got == orig {
			t.Errorf("%s claims the same value as the original", name)
		}
	}
}
