package main

import (
	"bytes"
	"crypto"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/envelopd/envelopd/dkim"
)

// testDKIM is one Ed25519 key (selector "t") published for domains in a
// --dkim-txt file and written as a --dkim-key PEM, so that serve tests can
// send mail from verified senders (a courtesy OOPS goes only to
// those) and sign their OOPS.
type testDKIM struct {
	key      crypto.Signer
	txt, pem string
}

func newTestDKIM(t *testing.T, domains ...string) *testDKIM {
	t.Helper()
	k, err := dkim.GenerateKey("ed25519")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, d := range domains {
		l, err := dkim.TXTRecord(d, "t", k.Public())
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, l)
	}
	dir := t.TempDir()
	td := &testDKIM{key: k, txt: filepath.Join(dir, "keys.txt"), pem: filepath.Join(dir, "key.pem")}
	pem, err := dkim.MarshalKeyPEM(k)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(td.txt, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(td.pem, pem, 0o600); err != nil {
		t.Fatal(err)
	}
	return td
}

// flags are serve's flags verifying with the key file and signing OOPS
// for domain.
func (k *testDKIM) flags(domain string) []string {
	return []string{"--dkim-txt", k.txt, "--dkim-key", k.pem, "--dkim-selector", "t", "--dkim-domain", domain}
}

// sign returns raw with CRLF line ends, signed for the domain of its From.
func (k *testDKIM) sign(t *testing.T, raw []byte) []byte {
	t.Helper()
	raw = bytes.ReplaceAll(bytes.ReplaceAll(raw, []byte("\r\n"), []byte("\n")), []byte("\n"), []byte("\r\n"))
	from := ""
	for _, l := range strings.Split(string(raw), "\r\n") {
		if l == "" {
			break
		}
		if strings.HasPrefix(strings.ToLower(l), "from:") {
			from = strings.TrimSpace(l[5:])
		}
	}
	at := strings.LastIndexByte(from, '@')
	if at < 0 {
		t.Fatalf("no From address in %q", raw)
	}
	d := strings.TrimRight(from[at+1:], ">")
	out, err := dkim.Sign(raw, dkim.Signer{Domain: d, Selector: "t", Key: k.key})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
