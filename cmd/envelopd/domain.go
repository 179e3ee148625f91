package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/envelopd/envelopd/authdns"
	"github.com/envelopd/envelopd/dkim"
	"github.com/envelopd/envelopd/domain"
	"github.com/envelopd/envelopd/mailin"
	"github.com/envelopd/envelopd/mailout"
	"github.com/envelopd/envelopd/store"
)

const domainUsage = `usage:
  envelopd domain add DOMAIN [--hostname MX-HOST] [--dkim-config FILE | --dkim-key KEY --dkim-selector S]... [--spf REC] [--dmarc-report ADDR] [--dmarc-policy none|quarantine|reject] [--tls-report ADDR] [--mta-sts-mode testing|enforce] [--json]
  envelopd domain list [--json]
  envelopd domain check DOMAIN [--json] [--dns ADDR] [--authoritative ADDR] [--hostname MX-HOST]
  envelopd domain zone DOMAIN [--hostname MX-HOST]
  envelopd domain delete DOMAIN
(each with --db FILE|postgres://…)
`

// SettingHostname is where serve records its --hostname, so that
// `domain add` knows the MX target without being told.
const settingHostname = "hostname"

// domainDKIM returns the DKIM keys that sign for d among signers, as
// records.
func domainDKIM(d string, signers []dkim.Signer) ([]domain.DKIMKey, error) {
	var out []domain.DKIMKey
	for _, s := range signers {
		if !strings.EqualFold(strings.TrimSuffix(s.Domain, "."), d) {
			continue
		}
		txt, err := dkim.TXTRecord(d, s.Selector, s.Key.Public())
		if err != nil {
			return nil, err
		}
		_, v, _ := strings.Cut(txt, " ")
		out = append(out, domain.DKIMKey{Selector: s.Selector, TXT: v})
	}
	return out, nil
}

// domainChecker is the check's resolver: authdns at --dns, without a
// cache (a check after fixing a record must not see the old answer);
// auth, when set, the authoritative server asked for "propagating".
func domainChecker(dns, auth string) (domain.Checker, error) {
	r, err := authdns.New(authdns.Config{Server: dns, Timeout: defaultDNSTimeout, MaxEntries: -1})
	if err != nil {
		return domain.Checker{}, fmt.Errorf("--dns: %w", err)
	}
	c := domain.Checker{Resolver: r}
	if auth != "" {
		a, err := authdns.New(authdns.Config{Server: auth, Timeout: defaultDNSTimeout, MaxEntries: -1})
		if err != nil {
			return c, fmt.Errorf("--authoritative: %w", err)
		}
		c.Authoritative = a
	}
	return c, nil
}

// runDomain manages domains: exit 0 done (check: every record right), 1
// check found a record not right, 2 usage, bad input or I/O error.
func runDomain(ctx context.Context, e *env) int {
	if len(e.args) == 0 {
		fmt.Fprint(e.stderr, domainUsage)
		return 2
	}
	verb := e.args[0]
	if verb == "help" || verb == "-h" || verb == "--help" {
		fmt.Fprint(e.stdout, domainUsage)
		return 0
	}
	fs := newFlags(e, "domain "+verb)
	db := fs.String("db", defaultDB, "SQLite database file, or a postgres:// URL")
	hostname := fs.String("hostname", "", "the MX target: the host name envelopd answers SMTP on (default: serve's --hostname, recorded in the store)")
	asJSON := fs.Bool("json", false, "print JSON (check: one object per record)")
	dns := fs.String("dns", os.Getenv("ENVELOPD_DNS"), "DNS server (host[:port]) the check asks (default $ENVELOPD_DNS, else /etc/resolv.conf's first nameserver)")
	auth := fs.String("authoritative", "", "check: also ask this authoritative server (host[:port]); a record right there but not through --dns is propagating")
	var out outboundFlags
	fs.Var(&out.dkimKeys, "dkim-key", "add: DKIM private key PEM envelopd signs with (repeatable, paired with --dkim-selector)")
	fs.Var(&out.dkimSels, "dkim-selector", "add: DKIM selector of the --dkim-key at the same position")
	fs.StringVar(&out.dkimConfig, "dkim-config", "", "add: "+dkimConfigUsage+" (its lines for DOMAIN)")
	var cfg domain.Config
	fs.StringVar(&cfg.SPF, "spf", "", "add: the SPF record (default \"v=spf1 mx ~all\"; add your smarthost's include:)")
	fs.StringVar(&cfg.DMARCReport, "dmarc-report", "", "add: DMARC aggregate-report address (default dmarc-reports@DOMAIN)")
	fs.StringVar(&cfg.DMARCPolicy, "dmarc-policy", "", "add: DMARC p= (none, quarantine, reject; default none)")
	fs.StringVar(&cfg.TLSReport, "tls-report", "", "add: TLS-RPT report address (default tls-reports@DOMAIN)")
	fs.StringVar(&cfg.STSMode, "mta-sts-mode", "", "add: MTA-STS policy mode (testing, enforce; default testing)")
	args, err := parseArgs(fs, e.args[1:])
	if err != nil {
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintf(e.stderr, "envelopd domain %s: %v\n", verb, err)
		return 2
	}
	wantArgs := 1
	if verb == "list" {
		wantArgs = 0
	}
	if len(args) != wantArgs {
		fmt.Fprint(e.stderr, domainUsage)
		return 2
	}
	var st store.DB
	var ok bool
	if verb == "add" {
		st, ok = openStore(ctx, e, *db)
	} else {
		st, ok = openExistingStore(ctx, e, "domain "+verb, *db)
	}
	if !ok {
		return 2
	}
	defer st.Close()
	svc := &domain.Service{Store: st}
	switch verb {
	case "add":
		d, err := domain.Normalize(args[0])
		if err != nil {
			return fail(err)
		}
		out.dkimDomain = d
		signers, err := out.signers()
		if err != nil {
			return fail(err)
		}
		if signers, err = localSigners(ctx, st, d, signers); err != nil {
			return fail(err)
		}
		if cfg.DKIM, err = domainDKIM(d, signers); err != nil {
			return fail(err)
		}
		cfg.Hostname = *hostname
		if cfg.Hostname == "" {
			cfg.Hostname, _, _ = st.Setting(ctx, settingHostname)
		}
		got, err := svc.Add(ctx, d, cfg, "")
		if err != nil {
			return fail(err)
		}
		if len(got.Config.DKIM) == 0 {
			fmt.Fprintf(e.stderr, "envelopd domain add: no DKIM key signs for %s: make one (envelopd dkim keygen --domain %s --selector S --out KEY.pem), give it to serve and to domain add (--dkim-key, --dkim-selector)\n", d, d)
		}
		if *asJSON {
			return writeJSONLines(e, "domain add", []domain.Domain{got})
		}
		fmt.Fprintf(e.stdout, "%s added; publish these records (envelopd domain zone %s), then run envelopd domain check %s\n\n", d, d, d)
		fmt.Fprint(e.stdout, domain.Zone(got.Name, got.Config))
		return 0
	case "list":
		ds, err := svc.List(ctx)
		if err != nil {
			return fail(err)
		}
		return writeList(e, "domain list", *asJSON, ds, "DOMAIN\tSTATUS\tMX\tCHECKED", func(w io.Writer, d domain.Domain) {
			checked := "never"
			if d.CheckedAt != nil {
				checked = d.CheckedAt.Format(time.RFC3339)
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", d.Name, d.Status, d.Config.Hostname, checked)
		})
	case "check":
		if svc.Checker, err = domainChecker(*dns, *auth); err != nil {
			return fail(err)
		}
		var got domain.Domain
		if *hostname != "" {
			// Another MX target: checked, not stored (a move being planned).
			if got, err = svc.Get(ctx, args[0]); err == nil {
				got.Config.Hostname = strings.ToLower(strings.TrimSuffix(*hostname, "."))
				got.Records, _ = svc.Checker.Check(ctx, domain.Records(got.Name, got.Config))
			}
		} else {
			got, err = svc.Check(ctx, args[0])
		}
		if err != nil {
			return fail(err)
		}
		if *asJSON {
			if rc := writeJSONLines(e, "domain check", got.Records); rc != 0 {
				return rc
			}
		} else {
			printCheck(e, got)
		}
		for _, r := range got.Records {
			if r.State != domain.StateOK {
				return 1
			}
		}
		return 0
	case "zone":
		got, err := svc.Get(ctx, args[0])
		if err != nil {
			return fail(err)
		}
		if *hostname != "" {
			got.Config.Hostname = strings.ToLower(strings.TrimSuffix(*hostname, "."))
		}
		fmt.Fprint(e.stdout, domain.Zone(got.Name, got.Config))
		return 0
	case "delete":
		if err := svc.Delete(ctx, args[0]); err != nil {
			return fail(err)
		}
		return 0
	default:
		fmt.Fprintf(e.stderr, "envelopd domain: unknown subcommand %q\n%s", verb, domainUsage)
		return 2
	}
}

func printCheck(e *env, d domain.Domain) {
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "%s: %s\n", d.Name, d.Status)
	for _, r := range d.Records {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.State, r.Type, r.Name, r.Kind)
		switch r.State {
		case domain.StateOK:
		case domain.StateMissing:
			fmt.Fprintf(tw, "\t\twant: %s\n", r.Want)
		default:
			fmt.Fprintf(tw, "\t\twant: %s\n\t\tgot:  %s\n", r.Want, r.Got)
		}
		if r.Detail != "" {
			fmt.Fprintf(tw, "\t\t(%s)\n", r.Detail)
		}
	}
	tw.Flush()
}

// recordHostname keeps serve's --hostname in the store, where `domain
// add` and the API's domain create find the MX target (not "localhost",
// the default: no MX points there).
func recordHostname(ctx context.Context, rt *runtime, hostname string) {
	if hostname == "" || hostname == "localhost" {
		return
	}
	if err := rt.store.SetSetting(ctx, settingHostname, hostname); err != nil {
		rt.log.Warn("cannot record --hostname in the store", "err", err)
	}
}

// localSigners adds the key relay mode generated for d (--sign-local,
// kept in the store) to signers.
func localSigners(ctx context.Context, st store.StateStore, d string, signers []dkim.Signer) ([]dkim.Signer, error) {
	keys, err := st.Keys(ctx, mailin.LocalKeyProtocol)
	if err != nil {
		return nil, err
	}
	if pemKey, ok := keys[d]; ok {
		k, err := dkim.ParseKey([]byte(pemKey))
		if err != nil {
			return nil, fmt.Errorf("the stored DKIM key of %s: %w", d, err)
		}
		signers = append(signers, dkim.Signer{Domain: d, Selector: mailin.LocalSelector, Key: k})
	}
	return signers, nil
}

// domainService is serve's domain service (the API's /v0/domains): the
// check asks --dns; a domain created over the API gets serve's
// --hostname as MX target and the DKIM keys serve signs its mail with.
func domainService(rt *runtime, f *ingestFlags, mailer func(string) *mailout.Mailer) (*domain.Service, error) {
	c, err := domainChecker(f.dns, "")
	if err != nil {
		return nil, err
	}
	svc := &domain.Service{Store: rt.store, Checker: c,
		Keys: func(ctx context.Context, d string) ([]domain.DKIMKey, error) {
			return domainDKIM(d, mailer(d).Signers)
		}}
	if f.hostname != "localhost" {
		svc.Hostname = f.hostname
	}
	return svc, nil
}

// mtaSTS serves the MTA-STS policy of a managed domain D at
// https://mta-sts.D/.well-known/mta-sts.txt (RFC 8461 §3.3: HTTPS only,
// text/plain; another host name or path goes to next).
func mtaSTS(svc *domain.Service, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := strings.ToLower(r.Host)
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		d, ok := strings.CutPrefix(strings.TrimSuffix(host, "."), "mta-sts.")
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		if r.URL.Path != "/.well-known/mta-sts.txt" || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
			http.NotFound(w, r)
			return
		}
		p, err := svc.Policy(r.Context(), d)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Cache-Control", "max-age=3600")
		w.Write([]byte(p))
	})
}
