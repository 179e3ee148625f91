package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/envelopd/envelopd/acmecert"
)

// acmeFlags are serve's ACME flags (RFC 8555 certificates for STARTTLS
// and the HTTPS listener; acmecert).
type acmeFlags struct {
	domains                    multiFlag
	email, dir, caFile, cache  string
	renewBefore, check, backof time.Duration
	claimWindow                time.Duration
}

func (a *acmeFlags) register(fs *flag.FlagSet) {
	fs.Var(&a.domains, "acme", "obtain and renew a certificate for this name with ACME (repeatable: one certificate for all; e.g. the --hostname and mta-sts.DOMAIN); used for STARTTLS and --https")
	fs.StringVar(&a.email, "acme-email", "", "ACME account contact address")
	fs.StringVar(&a.dir, "acme-dir", acmecert.LetsEncrypt, "ACME directory URL")
	fs.StringVar(&a.caFile, "acme-ca", "", "PEM CA certificates to trust for the ACME directory (test CAs such as Pebble)")
	fs.StringVar(&a.cache, "acme-cache", "", "keep the ACME account and certificate in this directory (default: in the store, shared by every node)")
	fs.DurationVar(&a.renewBefore, "acme-renew-before", 30*24*time.Hour, "renew this long before the certificate ends (at most a third of its lifetime)")
	fs.DurationVar(&a.check, "acme-check", time.Minute, "how often the cached certificate is re-read and its end checked")
	fs.DurationVar(&a.backof, "acme-backoff", time.Minute, "first wait after a failed order (doubling, at most 1 h)")
	fs.DurationVar(&a.claimWindow, "acme-claim-window", 10*time.Minute, "with the certificate in the store: one node claims a renewal for this long; the others load what it stores")
}

// manager returns the ACME manager (nil without --acme); the loop is
// added to rt's workers. https and http say which listeners answer
// challenges.
func (a *acmeFlags) manager(rt *runtime, https, plain bool) (*acmecert.Manager, error) {
	if len(a.domains) == 0 {
		if a.cache != "" || a.caFile != "" || a.email != "" {
			return nil, errors.New("--acme-email, --acme-ca and --acme-cache need --acme")
		}
		return nil, nil
	}
	cfg := acmecert.Config{Domains: append([]string(nil), a.domains...), Email: a.email, DirectoryURL: a.dir,
		RenewBefore: a.renewBefore, Check: a.check, Backoff: a.backof, ClaimWindow: a.claimWindow, TLSALPN: https, HTTP01: plain, Logger: rt.log}
	if a.cache != "" {
		c, err := acmecert.OpenDirCache(a.cache)
		if err != nil {
			return nil, fmt.Errorf("--acme-cache: %w", err)
		}
		cfg.Cache = c
	} else {
		cfg.Cache = acmecert.StoreCache{Store: rt.store}
	}
	if a.caFile != "" {
		b, err := os.ReadFile(a.caFile)
		if err != nil {
			return nil, fmt.Errorf("--acme-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("--acme-ca %s: no PEM certificate", a.caFile)
		}
		cfg.HTTPClient = &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	}
	m, err := acmecert.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("--acme: %w", err)
	}
	rt.workers = append(rt.workers, m.Run)
	return m, nil
}
