package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/envelopd/envelopd/dkim"
	"github.com/envelopd/envelopd/mailin"
	"github.com/envelopd/envelopd/mailin/imapview"
	"github.com/envelopd/envelopd/mailout"
)

// relayFlags are serve's relay-mode flags.
type relayFlags struct {
	on                  bool
	domains             multiFlag
	submission, imap    string
	imaps               string
	smarthost           string
	signLocal           bool
	arcSeal             bool
	dkimTXTOut          string
	submissionListening string
	imapListening       string
	imapsListening      string
	// Set by setup for the HTTP API: the relay (its local signers) and
	// the queue worker's wake channel.
	srv  *mailin.Relay
	wake chan struct{}
}

func (r *relayFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&r.on, "relay", false, "relay mode: every address at a --domain is a mailbox; other domains only via --smarthost for authenticated users")
	fs.Var(&r.domains, "domain", "local domain of relay mode (repeatable)")
	fs.StringVar(&r.submission, "submission", "", "relay mode: submission listen address (AUTH required, e.g. 127.0.0.1:5587)")
	fs.StringVar(&r.imap, "imap", "", "relay mode: serve the mailboxes over IMAP on this address (e.g. 127.0.0.1:1143)")
	fs.StringVar(&r.imaps, "imaps", "", "relay mode: serve the mailboxes over IMAP with implicit TLS (RFC 8314 §3.2) on this address (e.g. :993); certificate from --acme or --tls-cert")
	fs.StringVar(&r.smarthost, "smarthost", "", "relay mode: deliver mail for other domains through this smarthost (smtp://USER@HOST:587, password via --password-file)")
	fs.BoolVar(&r.signLocal, "sign-local", false, "relay mode: DKIM-sign mail submitted by local users with a per-domain key generated on first start")
	fs.BoolVar(&r.arcSeal, "arc-seal", false, "relay mode: ARC-seal (RFC 8617) the mail queued for other domains, with a per-domain RSA key generated on first start (selector envelopd-arc)")
	fs.StringVar(&r.dkimTXTOut, "dkim-txt-out", "", "relay mode with --sign-local: write the local domains' DKIM key records to this file (--dkim-txt format), for verifiers in other processes")
}

// setup wires relay mode into rt and cfg: the Router of the SMTP server,
// the submission and IMAP servers, and the queue worker that delivers
// local recipients into their mailboxes. It returns a function that stops
// the servers it started.
func (r *relayFlags) setup(ctx context.Context, rt *runtime, f *ingestFlags, cfg *mailin.SMTPConfig) (func(), error) {
	if !r.on {
		if len(r.domains) > 0 || r.submission != "" || r.imap != "" || r.imaps != "" || r.smarthost != "" || r.signLocal || r.arcSeal {
			return nil, errors.New("--domain, --submission, --imap, --imaps, --smarthost, --sign-local and --arc-seal need --relay")
		}
		return func() {}, nil
	}
	if len(r.domains) == 0 {
		return nil, errors.New("--relay needs at least one --domain")
	}
	if f.out.smtpURL != "" {
		return nil, errors.New("in relay mode the outbound queue goes through --smarthost, not --smtp-url")
	}
	for i, d := range r.domains {
		r.domains[i] = strings.ToLower(strings.TrimSuffix(d, "."))
	}
	p := rt.pipeline
	local := dkim.NewStaticResolver()
	var signers map[string][]dkim.Signer
	if r.signLocal {
		var err error
		if signers, err = mailin.LocalSigners(ctx, rt.store, r.domains, local); err != nil {
			return nil, fmt.Errorf("local DKIM keys: %w", err)
		}
	}
	var sealers map[string][]dkim.Signer
	if r.arcSeal {
		var err error
		if sealers, err = mailin.LocalARCSigners(ctx, rt.store, r.domains, local); err != nil {
			return nil, fmt.Errorf("local ARC keys: %w", err)
		}
	}
	if r.signLocal {
		if r.dkimTXTOut != "" {
			all := map[string][]dkim.Signer{}
			for d, s := range signers {
				all[d] = append(all[d], s...)
			}
			for d, s := range sealers {
				all[d] = append(all[d], s...)
			}
			if err := writeKeyTable(r.dkimTXTOut, all); err != nil {
				return nil, err
			}
		}
	} else if r.dkimTXTOut != "" {
		return nil, errors.New("--dkim-txt-out needs --sign-local")
	}
	if p.Verifier != nil {
		p.Verifier = &dkim.Verifier{Resolver: mailin.LocalFirst{Local: local, Next: p.Verifier.Resolver}, MaxSignatures: p.Verifier.MaxSignatures}
	}
	wake := make(chan struct{}, 1)
	relay := &mailin.Relay{Domains: r.domains, Pipeline: p, Store: rt.store, Signers: signers,
		ARCSealers: sealers, AuthServID: f.hostname,
		Smarthost: r.smarthost != "", Wake: wake, Logger: rt.log}
	r.srv, r.wake = relay, wake
	if p.OOPS != nil && r.signLocal {
		p.OOPS = relay.OOPS
	}
	if p.OOPS != nil {
		// The relay's domains are ours: its OOPS may come from them.
		for _, d := range r.domains {
			if !slices.Contains(p.OOPSDomains, d) {
				p.OOPSDomains = append(p.OOPSDomains, d)
			}
		}
	}
	var next mailout.Sender
	if r.smarthost != "" {
		sub, err := newSubmitter(r.smarthost, f.out.passwordFile, &f.out.oauth)
		if err != nil {
			return nil, err
		}
		next = sub
	}
	w := &mailout.Worker{Store: rt.store, Sender: relay.Sender(next), Wake: wake, Interval: time.Second, Metrics: rt.jobs, Logger: rt.log}
	// Mail queued by another worker (the courtesy OOPS) wakes it too.
	rt.workers = append(rt.workers, mailout.WakeOnQueue(rt.store, wake))
	rt.workers = append(rt.workers, w.Run)
	cfg.Router = relay

	var stops []func()
	stop := func() {
		for _, s := range stops {
			s()
		}
	}
	if r.submission != "" {
		scfg := *cfg
		scfg.Addr = r.submission
		scfg.Router = relay.Submission()
		scfg.Service = "submission"
		srv, err := mailin.NewSMTPServer(scfg, p)
		if err != nil {
			return nil, fmt.Errorf("submission: %w", err)
		}
		go srv.Serve()
		r.submissionListening = srv.Addr().String()
		stops = append(stops, func() {
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			srv.Shutdown(sctx)
		})
	}
	for _, l := range []struct {
		addr string
		tls  bool
	}{{r.imap, false}, {r.imaps, true}} {
		if l.addr == "" {
			continue
		}
		if l.tls && cfg.TLS == nil {
			stop()
			return nil, errors.New("--imaps needs a certificate: --acme or --tls-cert/--tls-key")
		}
		ln, err := net.Listen("tcp", l.addr)
		if err != nil {
			stop()
			return nil, fmt.Errorf("imap: %w", err)
		}
		if l.tls {
			// The STARTTLS certificate (an ACME one is swapped in place).
			ln = tls.NewListener(ln, cfg.TLS.Clone())
			r.imapsListening = ln.Addr().String()
		} else {
			r.imapListening = ln.Addr().String()
		}
		iv := imapview.New(imapview.Options{Store: rt.store, Authenticate: relay.Authenticate, Hostname: p.AuthServID, Logger: rt.log,
			Guard: cfg.Auth, MaxConnections: cfg.MaxConnections, MaxConnectionsPerIP: cfg.MaxConnectionsPerIP,
			MaxIdleCommands: cfg.MaxIdleCommands})
		go iv.Serve(ln)
		stops = append(stops, func() { iv.Close() })
	}
	rt.log.Info("relay mode", "domains", strings.Join(r.domains, ","), "submission", r.submissionListening,
		"imap", r.imapListening, "imaps", r.imapsListening, "smarthost", r.smarthost != "", "sign_local", r.signLocal)
	return stop, nil
}

// writeKeyTable writes the local signing keys' records, one
// "name TXT-value" line each (the --dkim-txt format), sorted by domain.
func writeKeyTable(path string, signers map[string][]dkim.Signer) error {
	var lines []string
	for _, ss := range signers {
		for _, s := range ss {
			rec, err := dkim.TXTRecord(s.Domain, s.Selector, s.Key.Public())
			if err != nil {
				return err
			}
			lines = append(lines, rec)
		}
	}
	sort.Strings(lines)
	return os.WriteFile(path, []byte("# envelopd relay: local DKIM keys\n"+strings.Join(lines, "\n")+"\n"), 0o644)
}
