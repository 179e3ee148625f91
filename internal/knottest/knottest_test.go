package knottest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/envelopd/envelopd/authdns"
)

// TestInteropKnot: knotd serves a zone and a root; authdns reads it.
func TestInteropKnot(t *testing.T) {
	if os.Getenv("ENVELOPD_INTEROP") != "1" {
		t.Skip("interop test: set ENVELOPD_INTEROP=1")
	}
	addr := StartZones(t, map[string]string{"a.test": SOA("a.test") + "@ IN TXT \"hello\"\n"})
	c, err := authdns.New(authdns.Config{Server: addr, MaxEntries: -1, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.LookupTXT(context.Background(), "a.test")
	if err != nil || len(got) != 1 || got[0] != "hello" {
		t.Fatalf("TXT a.test: %q %v", got, err)
	}
	if _, err := c.LookupTXT(context.Background(), "b.test"); err == nil {
		t.Fatal("b.test answered")
	}
}
