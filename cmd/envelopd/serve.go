package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/envelopd/envelopd/authdns"
	"github.com/envelopd/envelopd/authguard"
	"github.com/envelopd/envelopd/dkim"
	"github.com/envelopd/envelopd/internal/secretfile"
	"github.com/envelopd/envelopd/mailin"
	"github.com/envelopd/envelopd/mailin/metrics"
	"github.com/envelopd/envelopd/parse"
	"github.com/envelopd/envelopd/payments"
	"github.com/envelopd/envelopd/payments/rail"
	"github.com/envelopd/envelopd/runner"
	"github.com/envelopd/envelopd/senderauth"
	"github.com/envelopd/envelopd/store"
)

const (
	defaultDB         = "envelopd.db"
	defaultDNSTimeout = 5 * time.Second
	defaultDNSTTL     = 5 * time.Minute
)

// ingestFlags are the flags serve and poll share: the store, DKIM, parse
// mode, hand-off targets, courtesy OOPS, outbound delivery and metrics.
type ingestFlags struct {
	db, dkimTXT                  string
	lenient, oops, debug         bool
	execCmd, webhook, webhookKey string
	handoffTimeout               time.Duration
	handoffVerified              bool
	// rails are the --rail/--rail-file/--wallet/--token/--confirmations
	// flags (package payments/rail); payments configures the runner from
	// them. No rail: every payment is unverified and no runner starts.
	rails             *rail.Flags
	payments          payments.Config
	metrics, hostname string
	out               outboundFlags
	// Secrets and the --exec environment.
	execEnv           multiFlag
	execEnviron       []string // built by prepareSecrets
	webhookSecretFile string
	// Courtesy OOPS limits and sender.
	oopsPerHour, oopsPerThread int
	oopsFrom                   string
	limits                     parse.Limits
	// Sender authentication (SPF, DMARC, ARC).
	senderAuth   bool
	dns          string
	dmarcEnforce bool
	arcTrust     multiFlag
}

func (f *ingestFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.db, "db", defaultDB, "SQLite database file, or a postgres:// URL (several nodes on one database)")
	fs.StringVar(&f.dkimTXT, "dkim-txt", "", "static DKIM key file (name TXT-value lines); real DNS when empty")
	fs.BoolVar(&f.lenient, "lenient", false, "accept Re: prefixes and any-case keywords (reference implementation mode)")
	fs.BoolVar(&f.oops, "oops", true, "queue courtesy OOPS replies for unknown_type, dkim_failed, duplicate_proof, amount_mismatch, missing_field")
	fs.IntVar(&f.oopsPerHour, "oops-rate-per-hour", store.DefaultOOPSPerRecipientHour, "at most this many courtesy OOPS to one address per hour (0: no limit)")
	fs.IntVar(&f.oopsPerThread, "oops-per-thread", store.DefaultOOPSPerThreadCode, "at most this many courtesy OOPS per thread and error code (0: no limit)")
	fs.StringVar(&f.oopsFrom, "oops-from", "", "courtesy OOPS sender when the first recipient is not at a signing domain (default postmaster@ the first signing domain)")
	fs.StringVar(&f.execCmd, "exec", "", "run this shell command per accepted message, message JSON on stdin")
	fs.StringVar(&f.webhook, "webhook", "", "POST each accepted message's JSON to this URL")
	fs.StringVar(&f.webhookKey, "webhook-secret", "", "HMAC-SHA256 key for the Envelopd-Signature header")
	f.rails = rail.RegisterFlags(fs)
	fs.DurationVar(&f.payments.Deadline, "payment-deadline", time.Hour, "a payment whose transaction is not on the chain this long after its mail arrived is not_found")
	fs.BoolVar(&f.handoffVerified, "handoff-verified", false, "hand a message carrying a payment (PAY, prepaid ORDER, OFFER, ACCEPT) to --exec/--webhook only once its payment is verified on the chain; a rejected one is not handed over (docs/payments.md)")
	fs.DurationVar(&f.handoffTimeout, "handoff-timeout", time.Minute, "bound on one --exec/--webhook delivery; a delivery cut off by a crash is retried after twice this (at least 5 min by default)")
	fs.StringVar(&f.metrics, "metrics", "", "serve Prometheus metrics on this address (e.g. 127.0.0.1:9125)")
	fs.StringVar(&f.hostname, "hostname", "localhost", "this host's name (SMTP greeting, Authentication-Results)")
	fs.BoolVar(&f.debug, "debug", false, "log every message")
	fs.Var(&f.execEnv, "exec-env", "pass this variable of envelopd's environment to --exec (repeatable); the command otherwise gets only PATH, HOME, USER, LOGNAME, LANG, LANGUAGE, LC_*, TZ, TMPDIR and envelopd's ENVELOPD_DB, ENVELOPD_MESSAGE_ID, ENVELOPD_EVENT_ID, ENVELOPD_ATTEMPT")
	fs.StringVar(&f.webhookSecretFile, "webhook-secret-file", "", "file whose first line is the --webhook-secret (mode 0600 or stricter)")
	fs.BoolVar(&f.senderAuth, "sender-auth", true, "check SPF, DMARC and ARC on every inbound mail and record the sender verdict (authenticated_as)")
	fs.StringVar(&f.dns, "dns", os.Getenv("ENVELOPD_DNS"), "DNS server (host[:port]) for SPF, DMARC, ARC and DKIM lookups (default $ENVELOPD_DNS, else /etc/resolv.conf's first nameserver; with --dkim-txt and no --dns, the key file's TXT records only)")
	fs.BoolVar(&f.dmarcEnforce, "dmarc-enforce", false, "apply the From domain's DMARC policy: p=reject → 550 5.7.1 (polled mail: quarantined), p=quarantine → quarantined, a DNS temperror where it may reject → 451 4.7.1; off: recorded only")
	fs.Var(&f.arcTrust, "arc-trust", "trust this ARC sealer (AS d= domain; repeatable): its passing chain stands in for DKIM broken by forwarding")
	f.out.register(fs)
	registerLimits(fs, &f.limits)
}

// senderChecks builds the one resolver of sender authentication and the
// DKIM verifier over it (or over --dkim-txt): nil checker when
// --sender-auth=false.
func (f *ingestFlags) senderChecks() (*senderauth.Checker, *dkim.Verifier, error) {
	var static *dkim.StaticResolver
	if f.dkimTXT != "" {
		var err error
		if static, err = dkim.LoadStaticResolver(f.dkimTXT); err != nil {
			return nil, nil, err
		}
	}
	var res senderauth.Resolver
	if f.dns == "" && static != nil {
		res = senderauth.TXTTable{Table: static} // offline: the key file only
	} else {
		c, err := authdns.New(authdns.Config{Server: f.dns, Timeout: defaultDNSTimeout})
		if err != nil {
			return nil, nil, fmt.Errorf("--dns: %w", err)
		}
		res = c
	}
	verifier := &dkim.Verifier{Resolver: res}
	if static != nil {
		verifier = &dkim.Verifier{Resolver: static}
	}
	if !f.senderAuth {
		if len(f.arcTrust) > 0 || f.dmarcEnforce {
			return nil, nil, errors.New("--arc-trust and --dmarc-enforce need --sender-auth")
		}
		return nil, verifier, nil
	}
	var trust []string
	for _, d := range f.arcTrust {
		trust = append(trust, strings.ToLower(strings.TrimSuffix(strings.TrimSpace(d), ".")))
	}
	return &senderauth.Checker{Resolver: res, TrustedSealers: trust}, verifier, nil
}

// prepareSecrets reads the --webhook-secret-file and builds the --exec
// environment: a clean one (mailin.ExecEnv), never envelopd's own, which
// holds its passwords, plus the database path.
func (f *ingestFlags) prepareSecrets() error {
	if f.webhookSecretFile != "" {
		if f.webhookKey != "" {
			return errors.New("give --webhook-secret or --webhook-secret-file, not both")
		}
		k, err := readSecretLine(f.webhookSecretFile)
		if err != nil {
			return fmt.Errorf("--webhook-secret-file: %w", err)
		}
		f.webhookKey = k
	}
	if len(f.execEnv) > 0 && f.execCmd == "" {
		return errors.New("--exec-env needs --exec")
	}
	if f.execCmd == "" {
		return nil
	}
	var db string
	if store.IsPostgresDSN(f.db) {
		// The agent gets the URL without its password (like every
		// secret, it is not passed on): it authenticates with its own
		// ~/.pgpass or PGPASSWORD.
		db = dsnWithoutPassword(f.db)
	} else {
		var err error
		if db, err = filepath.Abs(f.db); err != nil {
			return err
		}
	}
	var err error
	f.execEnviron, err = mailin.ExecEnv(os.Environ(), f.execEnv, []string{"ENVELOPD_DB=" + db})
	return err
}

// handoffs builds the hand-off workers the flags ask for (exec, webhook).
func (f *ingestFlags) handoffs(st mailin.HandoffStore, log *slog.Logger) []*mailin.Handoff {
	var hs []*mailin.Handoff
	h := func(target string, d mailin.DeliverFunc) *mailin.Handoff {
		lease := time.Duration(0) // the default, unless the timeout is set lower
		if f.handoffTimeout < time.Minute {
			lease = 2 * f.handoffTimeout
		}
		ho := &mailin.Handoff{Store: st, Target: target, Deliver: d, DeliverTimeout: f.handoffTimeout, Lease: lease, Logger: log}
		if store.IsPostgresDSN(f.db) {
			// Postgres: wake on new mail from any node (NOTIFY) rather
			// than poll the shared database. (SQLite keeps its poll: a
			// claim released unattempted still counts an attempt, and
			// waking sooner makes `poll --once` meet that more often.)
			ho.Changed = st.MessagesChanged
		}
		return ho
	}
	if f.execCmd != "" {
		hs = append(hs, h("exec", mailin.ExecDeliver(f.execCmd, f.handoffTimeout, f.execEnviron)))
	}
	if f.webhook != "" {
		client := &http.Client{Timeout: f.handoffTimeout}
		hs = append(hs, h("webhook", mailin.WebhookDeliver(client, f.webhook, f.webhookKey)))
	}
	return hs
}

// runtime is what serve and poll build from ingestFlags.
type runtime struct {
	reg      *prometheus.Registry
	jobs     *runner.Metrics // every worker's claims and outcomes
	oops     *mailin.OOPSWorker
	store    store.DB
	pipeline *mailin.Pipeline
	log      *slog.Logger
	workers  []func(ctx context.Context) error
	closers  []func()
}

func (f *ingestFlags) build(ctx context.Context, e *env) (*runtime, error) {
	log := newLogger(e.stderr, f.debug)
	if err := f.prepareSecrets(); err != nil {
		return nil, err
	}
	st, err := store.Open(ctx, f.db)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", dbName(f.db), err)
	}
	rt := &runtime{store: st, log: log, jobs: &runner.Metrics{}}
	f.checkDatabase(ctx, st, log)
	rt.closers = append(rt.closers, func() {
		// The group commit figures, for tuning (mean batch = writes/commits).
		stats := st.Stats()
		log.Info("store closed", "commits", stats.Commits, "writes", stats.Writes)
		st.Close()
	})
	checker, verifier, err := f.senderChecks()
	if err != nil {
		rt.close()
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "envelopd_store_commits_total",
		Help: "Store transactions committed (one fsync each).",
	}, func() float64 { return float64(st.Stats().Commits) }))
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "envelopd_store_writes_total",
		Help: "Store writes (ingests, enqueues, …) committed; writes/commits is the mean group commit size.",
	}, func() float64 { return float64(st.Stats().Writes) }))
	reg.MustRegister(jobsCollector{rt.jobs})
	p := &mailin.Pipeline{
		Store:      st,
		Verifier:   verifier,
		Lenient:    f.lenient,
		Limits:     f.limits,
		Keys:       aicpKeySource(st),
		AuthServID: f.hostname,
		Sender:     checker,
		Logger:     log,
		Metrics:    metrics.NewMetrics(reg),
		// Held hand-offs are released by the payments runner: without
		// a rail, every payment stays unverified and its hand-off held.
		HandoffVerified: f.handoffVerified,
	}
	p.DMARCEnforce = f.dmarcEnforce
	rt.pipeline = p
	// The courtesy OOPS the ingests (any node's, on Postgres) record as
	// owed are composed, signed and queued here, woken by each commit.
	rt.oops = &mailin.OOPSWorker{Pipeline: p, Store: st, Metrics: rt.jobs}
	rt.workers = append(rt.workers, rt.oops.Run)
	if err := f.openRails(ctx, log); err != nil {
		rt.close()
		return nil, err
	}
	if len(f.payments.Rails) > 0 {
		cfg := f.payments
		cfg.Logger, cfg.Metrics = log, rt.jobs
		cfg.OnRejected = func(ctx context.Context, pay store.Payment) {
			// The courtesy OOPS for a rejected payment, by the
			// ingest's rules (none when --oops=false).
			if _, err := p.PaymentOOPS(ctx, st, pay); err != nil {
				log.Warn("payment OOPS", "payment", pay.ID, "err", err)
			}
		}
		r := payments.New(st, cfg)
		p.PaymentChains = r.Serves
		rt.workers = append(rt.workers, r.Run)
	}
	rt.reg = reg
	for _, h := range f.handoffs(st, log) {
		p.Handoff = append(p.Handoff, h.Target)
		h.Metrics = rt.jobs
		rt.workers = append(rt.workers, h.Run)
	}
	if err := f.out.setup(ctx, rt, f.oops, reg); err != nil {
		rt.close()
		return nil, err
	}
	if f.oopsPerHour < 0 || f.oopsPerThread < 0 {
		rt.close()
		return nil, fmt.Errorf("--oops-rate-per-hour and --oops-per-thread must not be negative")
	}
	p.OOPSLimits = store.OOPSLimits{PerRecipientHour: noLimit(f.oopsPerHour), PerThreadCode: noLimit(f.oopsPerThread)}
	p.OOPSFrom = strings.ToLower(strings.TrimSpace(f.oopsFrom))
	if f.metrics != "" {
		ln, err := net.Listen("tcp", f.metrics)
		if err != nil {
			rt.close()
			return nil, fmt.Errorf("metrics: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go hs.Serve(ln)
		rt.closers = append(rt.closers, func() { hs.Close() })
		log.Info("metrics", "addr", ln.Addr().String())
	}
	return rt, nil
}

// jobsCollector exports the workers' counters (runner.Metrics) as
// envelopd_worker_jobs_total{worker, outcome}.
type jobsCollector struct{ m *runner.Metrics }

var jobsDesc = prometheus.NewDesc("envelopd_worker_jobs_total",
	"Jobs of the background workers (queue, handoff_TARGET, webhooks, payments, oops) by outcome: claimed, succeeded, retried, dropped, released.",
	[]string{"worker", "outcome"}, nil)

func (c jobsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- jobsDesc }

func (c jobsCollector) Collect(ch chan<- prometheus.Metric) {
	for _, n := range c.m.Snapshot() {
		ch <- prometheus.MustNewConstMetric(jobsDesc, prometheus.CounterValue, float64(n.Value), n.Worker, n.Outcome)
	}
}

// start runs the background workers until ctx ends; the returned wait
// function blocks until they have stopped.
func (rt *runtime) start(ctx context.Context) (wait func()) {
	var wg sync.WaitGroup
	for _, w := range rt.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w(ctx); err != nil && !errors.Is(err, context.Canceled) {
				rt.log.Error("worker stopped", "err", err)
			}
		}()
	}
	return wg.Wait
}

func (rt *runtime) close() {
	for i := len(rt.closers) - 1; i >= 0; i-- {
		rt.closers[i]()
	}
}

// aicpKeySource reads AICP keys from the store, cached for a few seconds.
func aicpKeySource(st store.StateStore) func(ctx context.Context) map[string][]byte {
	var mu sync.Mutex
	var cached map[string][]byte
	var at time.Time
	return func(ctx context.Context) map[string][]byte {
		mu.Lock()
		defer mu.Unlock()
		if cached != nil && time.Since(at) < 5*time.Second {
			return cached
		}
		keys, err := st.Keys(ctx, "aicp")
		if err != nil {
			return cached
		}
		m := make(map[string][]byte, len(keys))
		for h, k := range keys {
			if raw, err := parseAICPKey(k); err == nil {
				m[h] = raw
			}
		}
		cached, at = m, time.Now()
		return cached
	}
}

func runServe(ctx context.Context, e *env) int {
	fs := newFlags(e, "serve")
	var f ingestFlags
	f.register(fs)
	var cfg mailin.SMTPConfig
	var tlsCert, tlsKey, authFile string
	var acceptDomains multiFlag
	fs.StringVar(&cfg.Addr, "smtp", "127.0.0.1:2525", "SMTP listen address")
	fs.Int64Var(&cfg.MaxMessageBytes, "max-message-bytes", 25<<20, "largest message accepted (larger → 552)")
	fs.IntVar(&cfg.MaxRecipients, "max-recipients", 100, "recipients per message (more → 452)")
	fs.IntVar(&cfg.MaxConnections, "max-connections", 100, "concurrent SMTP connections (more → 421)")
	fs.Int64Var(&cfg.MaxInFlightBytes, "max-in-flight-bytes", mailin.DefaultMaxInFlightBytes, "message bytes received or analysed at once, all sessions (at least --max-message-bytes); past it DATA waits, then 451 4.3.2")
	fs.DurationVar(&cfg.InFlightWait, "in-flight-wait", mailin.DefaultInFlightWait, "how long DATA waits for room in --max-in-flight-bytes before 451 4.3.2 (negative: no wait)")
	fs.Float64Var(&cfg.MaxConnRate, "max-conn-rate", 0, "new connections per second per client IP, burst twice that (more → 421); 0: no limit")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile to this file until shutdown")
	fs.DurationVar(&cfg.ReadTimeout, "read-timeout", 5*time.Minute, "SMTP read timeout")
	fs.DurationVar(&cfg.WriteTimeout, "write-timeout", time.Minute, "SMTP write timeout")
	fs.StringVar(&tlsCert, "tls-cert", "", "certificate PEM for STARTTLS")
	fs.StringVar(&tlsKey, "tls-key", "", "key PEM for STARTTLS")
	fs.StringVar(&authFile, "auth-file", "", "AUTH PLAIN/LOGIN users, one user:password per line (mode 0600 or stricter)")
	fs.Var(&acceptDomains, "accept-domain", "accept mail for this domain without AUTH (repeatable)")
	var abuse abuseFlags
	abuse.register(fs, &cfg)
	var relay relayFlags
	relay.register(fs)
	var httpAPI httpFlags
	httpAPI.register(fs)
	var acmeF acmeFlags
	acmeF.register(fs)
	if err := fs.Parse(e.args); err != nil {
		return 2
	}
	cfg.Hostname = f.hostname
	cfg.AcceptDomains = acceptDomains
	if tlsKey != "" {
		// The private key: the group or others may not read it.
		if err := secretfile.Check(tlsKey); err != nil {
			fmt.Fprintf(e.stderr, "envelopd serve: --tls-key: %v\n", err)
			return 2
		}
	}
	if tlsCert != "" || tlsKey != "" {
		cert, err := tls.LoadX509KeyPair(tlsCert, tlsKey)
		if err != nil {
			fmt.Fprintf(e.stderr, "envelopd serve: TLS: %v\n", err)
			return 2
		}
		cfg.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	if authFile != "" {
		users, err := readUsers(authFile)
		if err != nil {
			fmt.Fprintf(e.stderr, "envelopd serve: %v\n", err)
			return 2
		}
		cfg.Users = users
	}
	if *cpuprofile != "" {
		pf, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintf(e.stderr, "envelopd serve: %v\n", err)
			return 2
		}
		pprof.StartCPUProfile(pf)
		defer func() {
			pprof.StopCPUProfile()
			pf.Close()
		}()
	}
	f.out.relay = relay.on
	rt, err := f.build(ctx, e)
	if err != nil {
		fmt.Fprintf(e.stderr, "envelopd serve: %v\n", err)
		return 2
	}
	defer rt.close()
	recordHostname(ctx, rt, f.hostname) // domain.go
	acm, err := acmeF.manager(rt, httpAPI.https != "", httpAPI.addr != "")
	if err != nil {
		fmt.Fprintf(e.stderr, "envelopd serve: %v\n", err)
		return 2
	}
	if acm != nil {
		if cfg.TLS != nil {
			fmt.Fprintln(e.stderr, "envelopd serve: give --acme or --tls-cert/--tls-key, not both")
			return 2
		}
		// STARTTLS (SMTP, relay submission) with the ACME certificate,
		// swapped in place on renewal.
		cfg.TLS = &tls.Config{GetCertificate: acm.GetCertificate, MinVersion: tls.VersionTLS12}
	}
	httpAPI.acme = acm
	httpAPI.tls = cfg.TLS
	cfg.Logger = rt.log
	cfg.Auth = abuse.guard(rt)
	// Failed API keys count toward the same per-IP throttle.
	httpAPI.throttle = authguard.KeyThrottle{Guard: cfg.Auth, Service: "http", Mechanism: "bearer"}
	stopRelay, err := relay.setup(ctx, rt, &f, &cfg)
	if err != nil {
		fmt.Fprintf(e.stderr, "envelopd serve: %v\n", err)
		return 2
	}
	defer stopRelay()
	stopHTTP, err := httpAPI.start(ctx, rt, &f, &relay, acceptDomains)
	if err != nil {
		fmt.Fprintf(e.stderr, "envelopd serve: %v\n", err)
		return 2
	}
	defer stopHTTP()
	if err := checkOOPS(rt.pipeline, rt.log); err != nil {
		fmt.Fprintf(e.stderr, "envelopd serve: %v\n", err)
		return 2
	}
	srv, err := mailin.NewSMTPServer(cfg, rt.pipeline)
	if err != nil {
		fmt.Fprintf(e.stderr, "envelopd serve: %v\n", err)
		return 2
	}
	wctx, stopWorkers := context.WithCancel(context.Background())
	wait := rt.start(wctx)
	rt.log.Info("envelopd serving", "smtp", srv.Addr().String(), "db", dbName(f.db))
	if e.ready != nil {
		e.ready(srv.Addr().String())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve() }()
	code := 0
	select {
	case <-ctx.Done():
		rt.log.Info("shutting down")
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		srv.Shutdown(sctx)
		cancel()
	case err := <-errc:
		if err != nil {
			rt.log.Error("smtp server", "err", err)
			code = 1
		}
	}
	stopWorkers()
	wait()
	if rt.oops != nil {
		// The SMTP server has stopped: the courtesy OOPS owed to mail it
		// accepted are queued before serve exits (bounded; what is left
		// stays owed, for the next start).
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if _, err := rt.oops.RunOnce(dctx); err != nil && dctx.Err() == nil {
			rt.log.Error("courtesy OOPS", "err", err)
		}
		cancel()
	}
	return code
}

// openRails opens the rails the flags name (refusing a node on the wrong
// chain) and puts them, with our wallets, in f.payments.
func (f *ingestFlags) openRails(ctx context.Context, log *slog.Logger) error {
	if f.rails == nil {
		return nil
	}
	if f.payments.Deadline < 0 {
		return errors.New("--payment-deadline must not be negative")
	}
	cfg, err := f.rails.Config()
	if err != nil {
		return err
	}
	set, err := rail.Open(ctx, cfg, log)
	if err != nil {
		return err
	}
	f.payments.Rails, f.payments.Wallets = map[string]rail.Rail{}, map[string][]string{}
	for _, chain := range set.Chains() {
		r, _ := set.Rail(chain)
		f.payments.Rails[chain] = r
		f.payments.Wallets[chain] = set.Wallets(chain)
	}
	if len(f.payments.Rails) > 0 {
		log.Info("payments are checked on the chain", "chains", set.Chains())
	}
	return nil
}

// checkDatabase warns at start when the database cannot be
// written — mail is then refused with 451 until it can, which a server
// must survive (TestInteropReadOnlyDB), so it is a warning, not an exit —
// and when the database file is readable by group or others (it holds
// mailbox password hashes and relay DKIM private keys; envelopd creates it
// 0600, an older one may be 0644).
func (f *ingestFlags) checkDatabase(ctx context.Context, st store.DB, log *slog.Logger) {
	if err := st.CheckWritable(ctx); err != nil {
		log.Warn("database is not writable: every mail will be refused with 451 until it is", "db", dbName(f.db), "err", err)
	}
	if cs, err := st.ProofCollisions(ctx); err == nil && len(cs) > 0 {
		log.Warn(fmt.Sprintf("%d stored messages name the transaction of an earlier message's proof (found when proofs were identified by transaction); they are kept as stored: envelopd payments collisions lists them", len(cs)),
			"db", dbName(f.db))
	}
	if store.IsPostgresDSN(f.db) {
		return
	}
	if fi, err := os.Stat(f.db); err == nil && fi.Mode().Perm()&0o077 != 0 {
		log.Warn(fmt.Sprintf("database permissions %04o are too open: it holds password hashes and DKIM keys (chmod 600 %s and its -wal, -shm files)", fi.Mode().Perm(), f.db),
			"db", f.db)
	}
}

// noLimit maps a flag's 0 ("no limit") to the store's negative value.
func noLimit(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// checkOOPS refuses an --oops-from that is not at a signing domain (an
// OOPS is sent only from a domain the operator signs for) and
// warns when courtesy OOPS are on but no domain can send them.
func checkOOPS(p *mailin.Pipeline, log *slog.Logger) error {
	if p.OOPS != nil && len(p.OOPSDomains) == 0 {
		log.Warn("courtesy OOPS are on but no signing domain is configured (--dkim-domain, --dkim-config, relay --domain): none will be sent")
	}
	if p.OOPSFrom == "" {
		return nil
	}
	at := strings.LastIndexByte(p.OOPSFrom, '@')
	if at <= 0 || !slices.Contains(p.OOPSDomains, p.OOPSFrom[at+1:]) {
		return fmt.Errorf("--oops-from %s is not at a signing domain (%s)", p.OOPSFrom, strings.Join(p.OOPSDomains, ", "))
	}
	return nil
}
