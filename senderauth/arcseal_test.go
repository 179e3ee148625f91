package senderauth_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/envelopd/envelopd/authdns/dnstest"
	"github.com/envelopd/envelopd/dkim"
	"github.com/envelopd/envelopd/senderauth"
)

// sealer makes a key for domain/selector "arc" and publishes it on s.
func sealer(t testing.TB, s *dnstest.Server, domain, algo string) dkim.Signer {
	t.Helper()
	k, err := dkim.GenerateKey(algo)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := dkim.TXTRecord(domain, "arc", k.Public())
	if err != nil {
		t.Fatal(err)
	}
	name, txt, _ := strings.Cut(rec, " ")
	s.TXT(name, txt)
	return dkim.Signer{Domain: domain, Selector: "arc", Key: k}
}

// TestSealARC: a first seal (cv=none, i=1) and a seal on top of dkimpy's
// chain (cv=pass, i=2) verify, with RSA and Ed25519 keys; a change after
// sealing breaks the chain.
func TestSealARC(t *testing.T) {
	t.Parallel()
	s, r := dns(t)
	loadKeys(t, s, "testdata/arc/keys.txt")
	ctx := context.Background()
	now := time.Unix(1795000000, 0)
	plain := []byte("From: a@relay.test\r\nTo: b@far.test\r\nSubject: hi\r\nMessage-ID: <x@relay.test>\r\n\r\nhello\r\n")
	fwd, err := os.ReadFile("testdata/arc/forwarded.eml")
	if err != nil {
		t.Fatal(err)
	}
	for _, algo := range []string{"rsa", "ed25519"} {
		sig := sealer(t, s, algo+".relay.test", algo)
		one, err := senderauth.SealARC(ctx, r, plain, "mx.relay.test; auth=pass smtp.auth=a@relay.test", sig, now)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(one), "ARC-Seal: i=1; a=") || !strings.Contains(string(one), "cv=none") {
			t.Fatalf("first seal:\n%s", one)
		}
		if got := senderauth.VerifyARC(ctx, r, one); got.Result != "pass" || !slices.Equal(got.Sealers, []string{sig.Domain}) {
			t.Fatalf("%s first seal: %s %v (%s)", algo, got.Result, got.Sealers, got.Reason)
		}
		two, err := senderauth.SealARC(ctx, r, fwd, "mx.relay.test; arc=pass", sig, now)
		if err != nil {
			t.Fatal(err)
		}
		if got := senderauth.VerifyARC(ctx, r, two); got.Result != "pass" || !slices.Equal(got.Sealers, []string{"list.test", sig.Domain}) {
			t.Fatalf("%s second seal: %s %v (%s)", algo, got.Result, got.Sealers, got.Reason)
		}
		if got := senderauth.VerifyARC(ctx, r, []byte(strings.Replace(string(two), "Sent through", "Sent thru", 1))); got.Result != "fail" {
			t.Fatalf("%s: changed after sealing: %s", algo, got.Result)
		}
	}
}
