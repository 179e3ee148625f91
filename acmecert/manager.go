// Package acmecert obtains and renews one TLS certificate for a set of
// names with ACME (RFC 8555), and serves it through
// tls.Config.GetCertificate, swapped in place when renewed: SMTP and
// submission STARTTLS, and the HTTPS listener use it, and connections
// open at a renewal keep theirs.
//
// It is built on golang.org/x/crypto/acme (the protocol client behind
// autocert). autocert itself is not used: it issues on the first TLS
// handshake for a name and renews on timers private to one process, so
// neither envelopd's start-up issuance nor a renewal shared by several
// nodes nor a retry it logs can be expressed with it; certmagic could,
// but brings its own storage locking and a large dependency tree for
// what is here one loop. The loop: read the certificate from the cache
// (the store: every node on one Postgres database shares it; or a
// directory), swap it in when it is newer than the one served, and when
// none is cached or the cached one is within RenewBefore of its end
// (at most a third of its lifetime), order a new one; a failure is
// logged and retried with exponential backoff while the old certificate
// keeps serving. With the store as cache, one node renews: it claims the
// renewal in the store (Claimer) for a window, the others load what it
// stores.
//
// Challenges: TLS-ALPN-01 (RFC 8737) on the HTTPS listener (GetCertificate
// answers the acme-tls/1 protocol), HTTP-01 (RFC 8555 §8.3) from
// HTTPHandler on the plain HTTP listener; key authorizations are also
// put in the cache, so any node can answer HTTP-01 for another.
package acmecert

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/acme"

	"github.com/envelopd/envelopd/internal/defaults"
	"github.com/envelopd/envelopd/runner"
)

// LetsEncrypt is the default directory.
const LetsEncrypt = acme.LetsEncryptURL

// Config configures a Manager.
type Config struct {
	Domains      []string // the certificate's names (the first is the subject and the default for clients without SNI)
	Email        string   // account contact (optional)
	DirectoryURL string   // default LetsEncrypt
	HTTPClient   *http.Client
	Cache        Cache
	// RenewBefore: renew this long before the end (default 30 days),
	// at most a third of the certificate's lifetime.
	RenewBefore time.Duration
	// Check is how often the cache is re-read (default 1 min); Backoff
	// the first wait after a failure (default 1 min), doubled up to
	// MaxBackoff (default 1 h).
	Check, Backoff, MaxBackoff time.Duration
	// TLSALPN and HTTP01 say which challenges can be answered (at least
	// one): TLS-ALPN-01 needs the HTTPS listener on port 443, HTTP-01
	// HTTPHandler on port 80.
	TLSALPN, HTTP01 bool
	// ClaimWindow: with a Cache that is a Claimer (the store), one node
	// renews a certificate: it claims the renewal for a window of this
	// length (default 10 min); the others load what it stores, and if it
	// has not renewed by the window's end, any node may claim the next.
	ClaimWindow time.Duration
	Logger      *slog.Logger
}

// Manager keeps the certificate (see the package doc).
type Manager struct {
	id     string // this process, in renewal claims
	cfg    Config
	cert   atomic.Pointer[tls.Certificate]
	mu     sync.Mutex
	alpn   map[string]*tls.Certificate // name → TLS-ALPN-01 challenge certificate
	tokens map[string]string           // HTTP-01 path → key authorization
	client *acme.Client
	wake   chan struct{}
}

// New checks cfg and returns a Manager; Run obtains and renews.
func New(cfg Config) (*Manager, error) {
	if len(cfg.Domains) == 0 || cfg.Cache == nil {
		return nil, errors.New("acmecert: Config needs Domains and Cache")
	}
	if !cfg.TLSALPN && !cfg.HTTP01 {
		return nil, errors.New("acmecert: no challenge can be answered: serve HTTPS (TLS-ALPN-01) or HTTP (HTTP-01)")
	}
	for i, d := range cfg.Domains {
		cfg.Domains[i] = strings.ToLower(strings.TrimSuffix(d, "."))
	}
	if cfg.DirectoryURL == "" {
		cfg.DirectoryURL = LetsEncrypt
	}
	defaults.Positive(&cfg.RenewBefore, 30*24*time.Hour)
	defaults.Positive(&cfg.Check, time.Minute)
	defaults.Positive(&cfg.Backoff, time.Minute)
	defaults.Positive(&cfg.MaxBackoff, time.Hour)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	defaults.Positive(&cfg.ClaimWindow, 10*time.Minute)
	id := make([]byte, 8)
	rand.Read(id)
	return &Manager{id: fmt.Sprintf("%x", id), cfg: cfg, alpn: map[string]*tls.Certificate{}, tokens: map[string]string{}, wake: make(chan struct{}, 1)}, nil
}

func (m *Manager) certKey() string { return "cert:" + strings.Join(m.cfg.Domains, ",") }

// GetCertificate is tls.Config.GetCertificate: the TLS-ALPN-01 challenge
// certificate for an acme-tls/1 handshake, else the current certificate
// (a client without SNI — SMTP clients often send none — gets it too).
func (m *Manager) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	if slices.Contains(hello.SupportedProtos, acme.ALPNProto) {
		m.mu.Lock()
		c := m.alpn[strings.ToLower(hello.ServerName)]
		m.mu.Unlock()
		if c == nil {
			return nil, fmt.Errorf("acmecert: no TLS-ALPN-01 challenge for %q", hello.ServerName)
		}
		return c, nil
	}
	if c := m.cert.Load(); c != nil {
		return c, nil
	}
	return nil, errors.New("acmecert: no certificate yet (see the log for the ACME order)")
}

// TLSConfig is a server configuration over GetCertificate that also
// speaks acme-tls/1 (for the HTTPS listener).
func (m *Manager) TLSConfig() *tls.Config {
	return &tls.Config{GetCertificate: m.GetCertificate, MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1", acme.ALPNProto}}
}

// Leaf returns the current certificate's leaf (nil before the first).
func (m *Manager) Leaf() *x509.Certificate {
	if c := m.cert.Load(); c != nil {
		return c.Leaf
	}
	return nil
}

// HTTPHandler answers HTTP-01 challenges under /.well-known/acme-challenge/
// (from this process or, through the cache, another node) and passes
// every other request to next.
func (m *Manager) HTTPHandler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/.well-known/acme-challenge/") {
			next.ServeHTTP(w, r)
			return
		}
		m.mu.Lock()
		v, ok := m.tokens[r.URL.Path]
		m.mu.Unlock()
		if !ok {
			b, err := m.cfg.Cache.Get(r.Context(), "http-01:"+r.URL.Path)
			if err != nil {
				http.Error(w, "no such challenge", http.StatusNotFound)
				return
			}
			v = string(b)
		}
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte(v))
	})
}

// Run loads, obtains and renews the certificate until ctx ends.
func (m *Manager) Run(ctx context.Context) error {
	retry := runner.Backoff{Initial: m.cfg.Backoff, Max: m.cfg.MaxBackoff}
	fails := 0 // failed orders in a row
	wait := time.Duration(0)
	for {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		case <-m.wake:
			t.Stop()
		}
		m.load(ctx)
		if !m.due(time.Now()) {
			wait, fails = m.cfg.Check, 0
			continue
		}
		leaf := m.Leaf()
		if owner, ok := m.claim(ctx, leaf, time.Now()); !ok {
			if owner != "" {
				m.cfg.Logger.Debug("acme: another node renews", "node", owner)
			}
			wait = m.cfg.Check
			continue
		}
		m.cfg.Logger.Info("acme: ordering a certificate", "names", strings.Join(m.cfg.Domains, ","), "directory", m.cfg.DirectoryURL,
			"renewal", leaf != nil)
		c, err := m.obtain(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			fails++
			wait = retry.Delay(fails)
			if d, ok := acme.RateLimit(err); ok && d > wait {
				wait = d
			}
			attrs := []any{"names", strings.Join(m.cfg.Domains, ","), "err", describe(err), "retry_in", wait.String()}
			if leaf != nil {
				attrs = append(attrs, "serving_until", leaf.NotAfter.UTC().Format(time.RFC3339))
			}
			m.cfg.Logger.Error("acme: certificate order failed", attrs...)
			continue
		}
		m.cert.Store(c)
		m.cfg.Logger.Info("acme: certificate obtained", "names", strings.Join(m.cfg.Domains, ","), "serial", c.Leaf.SerialNumber.Text(16),
			"not_after", c.Leaf.NotAfter.UTC().Format(time.RFC3339), "issuer", c.Leaf.Issuer.String())
		wait, fails = m.cfg.Check, 0
	}
}

// describe is an ACME error as a sentence: the CA's problem type and
// detail (RFC 8555 §6.7), rate limits named as such.
func describe(err error) string {
	var ae *acme.Error
	if errors.As(err, &ae) {
		kind := strings.TrimPrefix(ae.ProblemType, "urn:ietf:params:acme:error:")
		if kind == "rateLimited" {
			return fmt.Sprintf("rate limited by the CA (HTTP %d): %s", ae.StatusCode, ae.Detail)
		}
		return fmt.Sprintf("the CA refused (%s, HTTP %d): %s", kind, ae.StatusCode, ae.Detail)
	}
	var ze *acme.AuthorizationError
	if errors.As(err, &ze) {
		return "validation failed: " + ze.Error()
	}
	return err.Error()
}

// claim reports whether this process may order now: always with a
// cache that is not a Claimer; else when its claim on the current window
// of this renewal stands (owner is the claim that stands, "" on error).
func (m *Manager) claim(ctx context.Context, leaf *x509.Certificate, now time.Time) (owner string, ok bool) {
	cl, isClaimer := m.cfg.Cache.(Claimer)
	if !isClaimer {
		return m.id, true
	}
	// The renewal is named by the certificate it replaces and the window
	// since it became due (the first certificate: by the window of now).
	key, since := m.certKey()+"@new", now.Unix()
	if leaf != nil {
		before := min(m.cfg.RenewBefore, leaf.NotAfter.Sub(leaf.NotBefore)/3)
		key = m.certKey() + "@" + leaf.SerialNumber.Text(16)
		since = int64(now.Sub(leaf.NotAfter.Add(-before)) / time.Second)
	}
	window := since / int64(max(m.cfg.ClaimWindow/time.Second, 1))
	owner, err := cl.Claim(ctx, fmt.Sprintf("%s#%d", key, window), m.id)
	if err != nil {
		m.cfg.Logger.Warn("acme: claiming the renewal", "err", err)
		return "", false
	}
	return owner, owner == m.id
}

// due reports whether the served certificate must be renewed: none, or
// within RenewBefore (at most a third of its lifetime) of its end.
func (m *Manager) due(now time.Time) bool {
	leaf := m.Leaf()
	if leaf == nil {
		return true
	}
	before := min(m.cfg.RenewBefore, leaf.NotAfter.Sub(leaf.NotBefore)/3)
	return !now.Before(leaf.NotAfter.Add(-before))
}

// load swaps in the cached certificate when it lasts longer than the one
// served (another node renewed, or a restart).
func (m *Manager) load(ctx context.Context) {
	b, err := m.cfg.Cache.Get(ctx, m.certKey())
	if err != nil {
		if !errors.Is(err, ErrCacheMiss) {
			m.cfg.Logger.Warn("acme: reading the cached certificate", "err", err)
		}
		return
	}
	c, err := parseBundle(b)
	if err != nil {
		m.cfg.Logger.Warn("acme: the cached certificate is unreadable; ordering a new one", "err", err)
		return
	}
	if cur := m.Leaf(); cur == nil || c.Leaf.NotAfter.After(cur.NotAfter) {
		m.cert.Store(c)
		m.cfg.Logger.Info("acme: certificate loaded from the cache", "serial", c.Leaf.SerialNumber.Text(16),
			"not_after", c.Leaf.NotAfter.UTC().Format(time.RFC3339))
	}
}

// parseBundle reads a private key and its chain (PEM).
func parseBundle(b []byte) (*tls.Certificate, error) {
	var keyPEM, certPEM bytes.Buffer
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if strings.Contains(blk.Type, "PRIVATE KEY") {
			pem.Encode(&keyPEM, blk)
		} else {
			pem.Encode(&certPEM, blk)
		}
	}
	c, err := tls.X509KeyPair(certPEM.Bytes(), keyPEM.Bytes())
	if err != nil {
		return nil, err
	}
	return &c, nil // Go 1.23+: Leaf is set
}

// account returns the ACME client with the account key from the cache
// (made and stored on first use), registered.
func (m *Manager) account(ctx context.Context) (*acme.Client, error) {
	if m.client != nil {
		return m.client, nil
	}
	var key crypto.Signer
	if b, err := m.cfg.Cache.Get(ctx, "account"); err == nil {
		blk, _ := pem.Decode(b)
		if blk == nil {
			return nil, errors.New("acmecert: the cached account key is not PEM")
		}
		k, err := x509.ParseECPrivateKey(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("acmecert: the cached account key: %w", err)
		}
		key = k
	} else if errors.Is(err, ErrCacheMiss) {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, err
		}
		der, _ := x509.MarshalECPrivateKey(k)
		if err := m.cfg.Cache.Put(ctx, "account", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})); err != nil {
			return nil, fmt.Errorf("acmecert: storing the account key: %w", err)
		}
		key = k
	} else {
		return nil, err
	}
	c := &acme.Client{Key: key, DirectoryURL: m.cfg.DirectoryURL, HTTPClient: m.cfg.HTTPClient, UserAgent: "envelopd"}
	acct := &acme.Account{}
	if m.cfg.Email != "" {
		acct.Contact = []string{"mailto:" + m.cfg.Email}
	}
	if _, err := c.Register(ctx, acct, acme.AcceptTOS); err != nil && !errors.Is(err, acme.ErrAccountAlreadyExists) {
		return nil, fmt.Errorf("registering the ACME account: %w", err)
	}
	m.client = c
	return c, nil
}

// obtain orders a certificate for every name (RFC 8555 §7.4), answers
// the challenges, stores the certificate in the cache and returns it.
func (m *Manager) obtain(ctx context.Context) (*tls.Certificate, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	c, err := m.account(ctx)
	if err != nil {
		m.client = nil
		return nil, err
	}
	order, err := c.AuthorizeOrder(ctx, acme.DomainIDs(m.cfg.Domains...))
	if err != nil {
		m.client = nil // a CA restarted (Pebble) forgets accounts: register again next time
		return nil, fmt.Errorf("new order: %w", err)
	}
	for _, u := range order.AuthzURLs {
		if err := m.authorize(ctx, c, u); err != nil {
			return nil, err
		}
	}
	if o, err := c.WaitOrder(ctx, order.URI); err != nil {
		return nil, fmt.Errorf("order: %w", err)
	} else if o.FinalizeURL != "" {
		order.FinalizeURL = o.FinalizeURL
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: m.cfg.Domains[0]}, DNSNames: m.cfg.Domains}, key)
	if err != nil {
		return nil, err
	}
	ders, _, err := c.CreateCertFromOrder(ctx, order, csr, true)
	if err != nil {
		return nil, fmt.Errorf("finalize: %w", err)
	}
	var bundle bytes.Buffer
	kder, _ := x509.MarshalECPrivateKey(key)
	pem.Encode(&bundle, &pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	for _, d := range ders {
		pem.Encode(&bundle, &pem.Block{Type: "CERTIFICATE", Bytes: d})
	}
	cert, err := parseBundle(bundle.Bytes())
	if err != nil {
		return nil, fmt.Errorf("the CA's certificate: %w", err)
	}
	if err := m.cfg.Cache.Put(ctx, m.certKey(), bundle.Bytes()); err != nil {
		// Served anyway; the next node or restart orders again.
		m.cfg.Logger.Error("acme: storing the certificate", "err", err)
	}
	return cert, nil
}

// authorize answers one authorization's challenge: TLS-ALPN-01 when the
// HTTPS listener serves, else HTTP-01.
func (m *Manager) authorize(ctx context.Context, c *acme.Client, url string) error {
	z, err := c.GetAuthorization(ctx, url)
	if err != nil {
		return fmt.Errorf("authorization: %w", err)
	}
	if z.Status == acme.StatusValid {
		return nil
	}
	name := z.Identifier.Value
	var chal *acme.Challenge
	for _, want := range []string{"tls-alpn-01", "http-01"} {
		if (want == "tls-alpn-01" && !m.cfg.TLSALPN) || (want == "http-01" && !m.cfg.HTTP01) {
			continue
		}
		for _, ch := range z.Challenges {
			if ch.Type == want {
				chal = ch
				break
			}
		}
		if chal != nil {
			break
		}
	}
	if chal == nil {
		return fmt.Errorf("authorization of %s: the CA offers no challenge envelopd can answer", name)
	}
	switch chal.Type {
	case "tls-alpn-01":
		cert, err := c.TLSALPN01ChallengeCert(chal.Token, name)
		if err != nil {
			return err
		}
		m.mu.Lock()
		m.alpn[strings.ToLower(name)] = &cert
		m.mu.Unlock()
		defer func() {
			m.mu.Lock()
			delete(m.alpn, strings.ToLower(name))
			m.mu.Unlock()
		}()
	case "http-01":
		path := c.HTTP01ChallengePath(chal.Token)
		v, err := c.HTTP01ChallengeResponse(chal.Token)
		if err != nil {
			return err
		}
		m.mu.Lock()
		m.tokens[path] = v
		m.mu.Unlock()
		if err := m.cfg.Cache.Put(ctx, "http-01:"+path, []byte(v)); err != nil {
			m.cfg.Logger.Warn("acme: storing the HTTP-01 answer for other nodes", "err", err)
		}
		defer func() {
			m.mu.Lock()
			delete(m.tokens, path)
			m.mu.Unlock()
			m.cfg.Cache.Delete(context.Background(), "http-01:"+path)
		}()
	}
	if _, err := c.Accept(ctx, chal); err != nil {
		return fmt.Errorf("%s challenge of %s: %w", chal.Type, name, err)
	}
	if _, err := c.WaitAuthorization(ctx, z.URI); err != nil {
		return fmt.Errorf("%s challenge of %s: %w", chal.Type, name, err)
	}
	return nil
}
