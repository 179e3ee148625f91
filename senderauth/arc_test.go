package senderauth_test

import (
	"bytes"
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

// TestARCStructure: RFC 8617 §5.2's structural checks on the two-hop
// chain, each breaking it one way.
func TestARCStructure(t *testing.T) {
	t.Parallel()
	s, r := dns(t)
	loadKeys(t, s, "testdata/arc/keys.txt")
	raw, err := os.ReadFile("testdata/arc/two_hop.eml")
	if err != nil {
		t.Fatal(err)
	}
	if got := senderauth.VerifyARC(context.Background(), r, raw); got.Result != "pass" {
		t.Fatalf("unchanged chain: %s (%s)", got.Result, got.Reason)
	}
	// dropField removes the first header field starting with prefix
	// (with its folded lines).
	dropField := func(b []byte, prefix string) []byte {
		i := bytes.Index(b, []byte(prefix))
		if i < 0 {
			t.Fatalf("no %q", prefix)
		}
		j := i + bytes.IndexByte(b[i:], '\n') + 1
		for j < len(b) && (b[j] == ' ' || b[j] == '\t') {
			j += bytes.IndexByte(b[j:], '\n') + 1
		}
		return append(append([]byte(nil), b[:i]...), b[j:]...)
	}
	for _, c := range []struct {
		name   string
		mutate func([]byte) []byte
		reason string
	}{
		{"a set missing a field", func(b []byte) []byte { return dropField(b, "ARC-Authentication-Results: i=2") }, "ARC set 2 is missing or incomplete"},
		{"a field twice", func(b []byte) []byte {
			return append([]byte("ARC-Authentication-Results: i=1; x.test; none\r\n"), b...)
		}, "instance 1 has two ARC-Authentication-Results fields"},
		{"instance past 50", func(b []byte) []byte { return append([]byte("ARC-Seal: i=51; cv=pass\r\n"), b...) }, "an ARC header field has no valid i= instance"},
		{"a gap", func(b []byte) []byte { return bytes.ReplaceAll(b, []byte("i=2;"), []byte("i=3;")) }, "ARC set 2 is missing or incomplete"},
		{"newest cv=fail", func(b []byte) []byte { return bytes.Replace(b, []byte("i=2; cv=pass"), []byte("i=2; cv=fail"), 1) }, "the newest seal (i=2) says cv=fail"},
		{"first cv=pass", func(b []byte) []byte { return bytes.Replace(b, []byte("i=1; cv=none"), []byte("i=1; cv=pass"), 1) }, "ARC-Seal i=1 has cv=pass"},
		// Relaxed canonicalization: spacing is not a change, a value is; the
		// newest seal covers the older one and fails first.
		{"an older seal changed", func(b []byte) []byte {
			return bytes.Replace(b, []byte("i=1; cv=none; a=rsa-sha256; d=list.test; s=arc; t=1795000000"), []byte("i=1; cv=none; a=rsa-sha256; d=list.test; s=arc; t=1795000001"), 1)
		}, "ARC-Seal i=2: signature did not verify"},
	} {
		got := senderauth.VerifyARC(context.Background(), r, c.mutate(raw))
		if got.Result != "fail" || (c.reason != "" && got.Reason != c.reason) {
			t.Errorf("%s: %s (%s), want fail (%s)", c.name, got.Result, got.Reason, c.reason)
		}
	}
}
