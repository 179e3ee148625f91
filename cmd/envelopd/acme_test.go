package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
