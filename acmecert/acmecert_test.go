package acmecert

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/crypto/acme"

	"github.com/envelopd/envelopd/store"
)

// bundle makes a self-signed key+certificate PEM valid from nb to na.
func bundle(t *testing.T, serial int64, nb, na time.Time) []byte {
	t.Helper()
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "mx.example.com"},
		DNSNames: []string{"mx.example.com"}, NotBefore: nb, NotAfter: na}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(k)
	return append(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
}

func testCache(t *testing.T, c Cache) {
	t.Helper()
	ctx := context.Background()
	if _, err := c.Get(ctx, "cert:a"); !errors.Is(err, ErrCacheMiss) {
		t.Fatalf("empty: %v", err)
	}
	if err := c.Put(ctx, "cert:a", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if b, err := c.Get(ctx, "cert:a"); err != nil || string(b) != "x" {
		t.Fatalf("get %q %v", b, err)
	}
	if err := c.Delete(ctx, "cert:a"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, "cert:a"); !errors.Is(err, ErrCacheMiss) {
		t.Fatalf("deleted: %v", err)
	}
}

func TestCaches(t *testing.T) {
	t.Parallel()
	d, err := OpenDirCache(filepath.Join(t.TempDir(), "acme"))
	if err != nil {
		t.Fatal(err)
	}
	testCache(t, d)
	st, err := store.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	testCache(t, StoreCache{Store: st})
	// A directory that cannot be written is refused at once (as root
	// permissions do not stop writes: a path under a regular file).
	f := filepath.Join(t.TempDir(), "file")
	os.WriteFile(f, nil, 0o600)
	if _, err := OpenDirCache(filepath.Join(f, "acme")); err == nil {
		t.Error("a cache dir under a file was accepted")
	}
}

// TestLoadAndDue: the cached certificate is served; renewal is due a
// third of its lifetime before its end (or RenewBefore, when shorter);
// a newer cached certificate replaces the served one, an older does not.
func TestLoadAndDue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, _ := OpenDirCache(t.TempDir())
	m, err := New(Config{Domains: []string{"MX.example.com."}, Cache: d, HTTP01: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.GetCertificate(&tls.ClientHelloInfo{}); err == nil {
		t.Error("a certificate before any")
	}
	if !m.due(time.Now()) {
		t.Error("not due without a certificate")
	}
	now := time.Now()
	d.Put(ctx, m.certKey(), bundle(t, 1, now.Add(-time.Hour), now.Add(2*time.Hour)))
	m.load(ctx)
	c, err := m.GetCertificate(&tls.ClientHelloInfo{}) // no SNI: SMTP clients
	if err != nil || c.Leaf.SerialNumber.Int64() != 1 {
		t.Fatalf("served %v %v", c, err)
	}
	if m.due(now) || !m.due(now.Add(time.Hour+time.Minute)) {
		t.Error("due is not at a third of the lifetime before the end")
	}
	d.Put(ctx, m.certKey(), bundle(t, 2, now.Add(-time.Hour), now.Add(time.Hour)))
	m.load(ctx)
	if m.Leaf().SerialNumber.Int64() != 1 {
		t.Error("an older cached certificate replaced the served one")
	}
	d.Put(ctx, m.certKey(), bundle(t, 3, now, now.Add(90*24*time.Hour)))
	m.load(ctx)
	if m.Leaf().SerialNumber.Int64() != 3 {
		t.Error("a newer cached certificate was not swapped in")
	}
	// RenewBefore (30 days by default) when shorter than a third.
	if m.due(now.Add(59*24*time.Hour)) || !m.due(now.Add(61*24*time.Hour)) {
		t.Error("RenewBefore not honoured")
	}
	if _, err := New(Config{Domains: []string{"a.example"}, Cache: d}); err == nil {
		t.Error("no challenge accepted")
	}
}

// TestHTTPHandler: HTTP-01 answers from this process or the cache (another
// node's), everything else passes through.
func TestHTTPHandler(t *testing.T) {
	t.Parallel()
	d, _ := OpenDirCache(t.TempDir())
	m, _ := New(Config{Domains: []string{"mx.example.com"}, Cache: d, HTTP01: true})
	m.tokens["/.well-known/acme-challenge/mine"] = "mine.thumb"
	d.Put(context.Background(), "http-01:/.well-known/acme-challenge/other", []byte("other.thumb"))
	srv := httptest.NewServer(m.HTTPHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("next")) })))
	defer srv.Close()
	for path, want := range map[string]string{
		"/.well-known/acme-challenge/mine":  "mine.thumb",
		"/.well-known/acme-challenge/other": "other.thumb",
		"/.well-known/acme-challenge/none":  "no such challenge\n",
		"/v0/inboxes":                       "next",
	} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != want {
			t.Errorf("%s: %q, want %q", path, b, want)
		}
	}
}

// TestDescribe: the CA's problems (RFC 8555 §6.7) as sentences.
func TestDescribe(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&acme.Error{StatusCode: 429, ProblemType: "urn:ietf:params:acme:error:rateLimited", Detail: "too many certificates"},
			"rate limited by the CA (HTTP 429): too many certificates"},
		{&acme.Error{StatusCode: 400, ProblemType: "urn:ietf:params:acme:error:rejectedIdentifier", Detail: "blocked"},
			"the CA refused (rejectedIdentifier, HTTP 400): blocked"},
		{errors.New("dial tcp: connection refused"), "dial tcp: connection refused"},
	} {
		if got := describe(tc.err); got != tc.want {
			t.Errorf("describe(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
