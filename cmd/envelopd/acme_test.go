package main

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/envelopd/envelopd/internal/knottest"
)

func selfSigned(t *testing.T, dir string) (cert, key string) {
	t.Helper()
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), DNSNames: []string{"mx.example.com"}, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
	der, _ := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	kder, _ := x509.MarshalECPrivateKey(k)
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
	return cert, key
}

// TestACMEFlagsRefused: bad ACME settings stop serve at start, before
// any order: an unwritable cache dir, no listener to answer a challenge,
// --acme with --tls-cert, --https without a certificate.
func TestACMEFlagsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o600)
	cert, key := selfSigned(t, dir)
	base := []string{"serve", "--db", filepath.Join(dir, "db"), "--smtp", "127.0.0.1:0"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--http", "127.0.0.1:0", "--acme", "mx.example.com", "--acme-cache", filepath.Join(file, "acme")}, "--acme-cache"},
		{[]string{"--acme", "mx.example.com"}, "no challenge can be answered"},
		{[]string{"--http", "127.0.0.1:0", "--acme", "mx.example.com", "--tls-cert", cert, "--tls-key", key}, "not both"},
		{[]string{"--https", "127.0.0.1:0"}, "--https needs a certificate"},
		{[]string{"--acme-cache", dir}, "need --acme"},
	} {
		if e := cliErr(t, append(base, tc.args...)...); !strings.Contains(e, tc.want) {
			t.Errorf("%v: %q, want %q", tc.args, e, tc.want)
		}
	}
}

// TestIMAPS: relay mode's IMAP view with implicit TLS (--imaps) on the
// STARTTLS certificate: a TLS client that trusts it gets the greeting
// and a capability list.
func TestIMAPS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cert, key := selfSigned(t, dir)
	addr := knottest.FreeAddr(t)
	startServe(t, filepath.Join(dir, "db"), "--relay", "--domain", "shop.test", "--imaps", addr, "--tls-cert", cert, "--tls-key", key)
	pool := x509.NewCertPool()
	b, _ := os.ReadFile(cert)
	pool.AppendCertsFromPEM(b)
	var c *tls.Conn
	var err error
	for range 50 { // the view starts listening with serve; its port is known
		if c, err = tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "mx.example.com"}); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if l, _ := r.ReadString('\n'); !strings.HasPrefix(l, "* OK") {
		t.Fatalf("greeting %q", l)
	}
	c.Write([]byte("a CAPABILITY\r\n"))
	if l, _ := r.ReadString('\n'); !strings.HasPrefix(l, "* CAPABILITY IMAP4rev2 IMAP4rev1") {
		t.Errorf("capability %q", l)
	}
	if e := cliErr(t, "serve", "--db", filepath.Join(dir, "db2"), "--smtp", "127.0.0.1:0", "--relay", "--domain", "shop.test", "--imaps", "127.0.0.1:0"); !strings.Contains(e, "--imaps needs a certificate") {
		t.Errorf("--imaps without a certificate: %q", e)
	}
}
