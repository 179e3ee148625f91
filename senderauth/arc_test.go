package senderauth_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/envelopd/envelopd/senderauth"
)

// TestARCMatchesDkimpy verifies the chains dkimpy's arc_sign made
// (testdata/arc/gen.py) and compares each verdict with the one dkimpy's
// arc_verify gave at generation time (expected.json): a one-hop and a
// two-hop chain pass, a chain changed after sealing and a forged seal
// fail, mail without ARC is none.
func TestARCMatchesDkimpy(t *testing.T) {
	t.Parallel()
	s, r := dns(t)
	loadKeys(t, s, "testdata/arc/keys.txt")
	var want map[string]struct {
		CV      string   `json:"cv"`
		Sealers []string `json:"sealers"`
	}
	b, err := os.ReadFile("testdata/arc/expected.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if len(want) < 7 {
		t.Fatalf("expected.json has %d cases", len(want))
	}
	for name, w := range want {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			raw, err := os.ReadFile(filepath.Join("testdata/arc", name))
			if err != nil {
				t.Fatal(err)
			}
			got := senderauth.VerifyARC(context.Background(), r, raw)
			if got.Result != w.CV {
				t.Fatalf("ARC %s (%s), dkimpy says %s", got.Result, got.Reason, w.CV)
			}
			if w.CV == "pass" {
				sealers := slices.Clone(w.Sealers)
				slices.Reverse(sealers) // dkimpy lists the newest first
				if !slices.Equal(got.Sealers, sealers) {
					t.Fatalf("sealers %v, dkimpy %v", got.Sealers, sealers)
				}
			}
		})
	}
}

// TestARCFailureReasons: each broken chain fails for its own reason.
func TestARCFailureReasons(t *testing.T) {
	t.Parallel()
	s, r := dns(t)
	loadKeys(t, s, "testdata/arc/keys.txt")
	for name, want := range map[string]string{
		"broken.eml": "ARC-Message-Signature i=1: body hash did not verify",
		"forged.eml": "ARC-Message-Signature i=1: signature did not verify",
	} {
		raw, err := os.ReadFile(filepath.Join("testdata/arc", name))
		if err != nil {
			t.Fatal(err)
		}
		if got := senderauth.VerifyARC(context.Background(), r, raw); got.Reason != want {
			t.Errorf("%s: reason %q, want %q", name, got.Reason, want)
		}
	}
}
