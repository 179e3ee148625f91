package mailin

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2/imapserver"
)

const tlsTestHost = "imap.example.test"

// testCert is a self-signed certificate for tlsTestHost and a pool that
// trusts it.
func testCert(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: tlsTestHost},
		DNSNames:              []string{tlsTestHost},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// TestPollTLS: imaps:// (implicit TLS) and imap:// with STARTTLS, the
// certificate checked against the account's host name.
func TestPollTLS(t *testing.T) {
	cert, pool := testCert(t)
	serverTLS := &tls.Config{Certificates: []tls.Certificate{cert}}
	for _, tc := range []struct {
		name     string
		implicit bool
		roots    *x509.CertPool
		wantErr  error
	}{
		{"imaps", true, pool, nil},
		{"starttls", false, pool, nil},
		{"imaps-untrusted", true, x509.NewCertPool(), ErrIMAPConn},
		{"starttls-untrusted", false, x509.NewCertPool(), ErrIMAPConn},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newPollFixture(t, capsMove)
			var wrap func(net.Listener) net.Listener
			var opts func(*imapserver.Options)
			if tc.implicit {
				wrap = func(ln net.Listener) net.Listener { return tls.NewListener(ln, serverTLS) }
			} else {
				opts = func(o *imapserver.Options) { o.TLSConfig = serverTLS; o.InsecureAuth = false }
			}
			f.srv = newMemIMAP(t, capsMove, wrap, opts)
			f.srv.append(t, "INBOX", corpus(t)[0])
			p := f.poller(t)
			p.Account.Host = tlsTestHost
			p.Account.TLS = tc.implicit
			p.TLSConfig = &tls.Config{RootCAs: tc.roots}
			p.dial = func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, f.srv.addr)
			}
			st, err := p.Once(context.Background())
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Once: %v, want %v", err, tc.wantErr)
				}
				checkStats(t, "refused", st, PollStats{})
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkStats(t, "over TLS", st, PollStats{Seen: 1, Stored: 1})
		})
	}
}
