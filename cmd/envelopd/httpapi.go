package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/envelopd/envelopd/acmecert"
	"github.com/envelopd/envelopd/api"
	"github.com/envelopd/envelopd/dkim"
	"github.com/envelopd/envelopd/mailout"
	"github.com/envelopd/envelopd/mcp"
	"github.com/envelopd/envelopd/payments/rail"
	"github.com/envelopd/envelopd/store"
	"github.com/envelopd/envelopd/web"
)

// httpFlags are serve's HTTP API flags.
type httpFlags struct {
	addr    string
	maxBody int64
	// retention of the event log and the Idempotency-Key records.
	eventRetention, idemRetention time.Duration
	// throttle counts failed API keys: serve sets the process's shared
	// authguard (authguard.KeyThrottle); nil: none.
	throttle api.AuthThrottle
	mcpSign  mcpSignFlags // keys of /mcp's sign tools
	// explorers are the --explorer CHAIN=URL additions to web.Explorers.
	explorers explorerFlag
	tenant    api.TenantLimits
	webhooks  store.WebhookLimits
	// https serves the same over TLS (the ACME certificate, or
	// --tls-cert's), with the MTA-STS policies of the managed domains.
	https string
	acme  *acmecert.Manager
	tls   *tls.Config
}

// explorerFlag is --explorer CHAIN=URL, repeatable.
type explorerFlag map[string]string

func (e explorerFlag) String() string { return fmt.Sprint(map[string]string(e)) }

func (e explorerFlag) Set(v string) error {
	chain, u, ok := strings.Cut(v, "=")
	chain = strings.ToLower(strings.TrimSpace(chain))
	if !ok || chain == "" || u == "" {
		return fmt.Errorf("want CHAIN=URL, got %q", v)
	}
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "https" && p.Scheme != "http") || p.Host == "" {
		return fmt.Errorf("%s: want an http(s) URL with {tx} where the transaction goes, got %q", chain, u)
	}
	if !strings.Contains(u, "{tx}") {
		u += "{tx}"
	}
	e[chain] = u
	return nil
}

func (h *httpFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&h.addr, "http", "", "serve the AgentMail-compatible HTTP API under /v0 and the web inbox at / on this address (e.g. 127.0.0.1:8025); keys: envelopd apikey create")
	fs.Int64Var(&h.maxBody, "http-max-body", api.DefaultMaxBody, "largest HTTP API request body (larger → 413)")
	fs.DurationVar(&h.eventRetention, "event-retention", store.DefaultEventRetention, "how long the API's event log (websocket, webhooks) keeps an event already delivered (0: forever)")
	fs.DurationVar(&h.idemRetention, "idempotency-retention", store.DefaultIdempotencyRetention, "how long an Idempotency-Key is remembered (0: forever)")
	h.mcpSign.register(fs, "mcp-")
	h.explorers = explorerFlag{}
	fs.Var(h.explorers, "explorer", "`CHAIN=URL`: the block explorer the web inbox links a payment's transaction to ({tx} is the hash; appended when absent); built in for ethereum, sepolia, base, base-sepolia, polygon, arbitrum, optimism, solana, solana-devnet (repeatable)")
	d, w := api.DefaultTenantLimits, store.DefaultWebhookLimits
	fs.Float64Var(&h.tenant.RequestsPerSecond, "http-key-rate", d.RequestsPerSecond, "requests a second one API key may make (API, websocket, /mcp together; over it → 429)")
	fs.IntVar(&h.tenant.Burst, "http-key-burst", d.Burst, "requests one API key may make at once above --http-key-rate")
	fs.IntVar(&h.tenant.Websockets, "http-key-websockets", d.Websockets, "websockets one API key may hold open")
	fs.IntVar(&h.webhooks.PerKey, "webhooks-per-key", w.PerKey, "webhooks one API key may own")
	fs.IntVar(&h.webhooks.PerInbox, "webhooks-per-inbox", w.PerInbox, "webhooks that may name one inbox")
	fs.StringVar(&h.https, "https", "", "serve the API, MCP and web inbox over HTTPS on this address too (e.g. :443; certificate from --acme or --tls-cert), and the MTA-STS policy of managed domains at https://mta-sts.DOMAIN/.well-known/mta-sts.txt")
}

// start serves the API when --http is set, and returns the function that
// stops it.
func (h *httpFlags) start(ctx context.Context, rt *runtime, f *ingestFlags, relay *relayFlags, accept []string) (func(), error) {
	if h.addr == "" && h.https == "" {
		return func() {}, nil
	}
	if h.https != "" && h.tls == nil {
		return nil, errors.New("--https needs a certificate: --acme or --tls-cert/--tls-key")
	}
	base, err := f.out.signers()
	if err != nil {
		return nil, err
	}
	var domains []string
	add := func(d string) {
		d = strings.ToLower(strings.TrimSuffix(d, "."))
		if d != "" && !slices.Contains(domains, d) {
			domains = append(domains, d)
		}
	}
	if relay.on {
		for _, d := range relay.domains {
			add(d)
		}
	} else {
		for _, d := range accept {
			add(d)
		}
		for _, s := range base {
			add(s.Domain)
		}
		add(f.hostname)
	}
	mailer := func(domain string) *mailout.Mailer {
		var ss []dkim.Signer
		if relay.srv != nil {
			ss = append(ss, relay.srv.Signers[domain]...)
		}
		ss = append(ss, base...)
		return &mailout.Mailer{Signers: ss}
	}
	var wake func()
	if relay.wake != nil {
		wake = func() {
			select {
			case relay.wake <- struct{}{}:
			default:
			}
		}
	}
	chains, err := h.chains(f)
	if err != nil {
		return nil, err
	}
	dsvc, err := domainService(rt, f, mailer)
	if err != nil {
		return nil, err
	}
	svc, err := api.NewService(api.Config{Store: rt.store, Relay: relay.on, Domains: domains, DomainService: dsvc, Mailer: mailer, Wake: wake, Logger: rt.log,
		WebhookLimits: h.webhooks, Chains: chains, EventRetention: h.eventRetention, IdempotencyRetention: h.idemRetention})
	if err != nil {
		return nil, err
	}
	rt.workers = append(rt.workers, func(ctx context.Context) error { return svc.Run(ctx, time.Second) })
	// Webhooks of the API (api/webhooks.go), from their durable log.
	rt.workers = append(rt.workers, (&api.WebhookSender{Service: svc, Metrics: rt.jobs}).Run)
	// One key's request rate, websockets and revocation watch, whichever
	// front end it uses.
	tenants := api.NewTenants(rt.store, h.tenant)
	var hd http.Handler = api.NewHandler(svc, api.HandlerOptions{Throttle: h.throttle, Tenants: tenants, MaxBody: h.maxBody, Logger: rt.log})
	// The MCP server's streamable HTTP transport at /mcp, same keys.
	mcfg := mcp.Config{Service: svc, ChainTip: rt.store.ChainTip, Version: mcpVersion(), Logger: rt.log}
	if err := h.mcpSign.load(&mcfg); err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewHTTPHandler(mcfg, mcp.HTTPOptions{Keys: rt.store, Throttle: h.throttle, Tenants: tenants, MaxBody: h.maxBody}))
	// The web inbox at /, over the same API; /v0 is the API.
	mux.Handle("/", web.Mount(hd))
	hd = mux
	var stops []func()
	stop := func() {
		for _, f := range stops {
			f()
		}
	}
	serveOn := func(name, addr string, handler http.Handler, tc *tls.Config) (net.Listener, error) {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if tc != nil {
			ln = tls.NewListener(ln, tc)
		}
		srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 2 * time.Minute,
			WriteTimeout: 2 * time.Minute, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				rt.log.Error(name, "err", err)
			}
		}()
		stops = append(stops, func() {
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			srv.Shutdown(sctx)
		})
		return ln, nil
	}
	if h.https != "" {
		tc := h.tls.Clone()
		if h.acme != nil {
			tc = h.acme.TLSConfig() // also answers TLS-ALPN-01
		}
		ln, err := serveOn("https", h.https, mtaSTS(dsvc, hd), tc)
		if err != nil {
			return nil, err
		}
		rt.log.Info("https", "addr", ln.Addr().String())
	}
	if h.addr == "" {
		return stop, nil
	}
	plain := hd
	if h.acme != nil {
		plain = h.acme.HTTPHandler(hd) // HTTP-01
	}
	ln, err := serveOn("http api", h.addr, plain, nil)
	if err != nil {
		stop()
		return nil, err
	}
	rt.log.Info("http api", "addr", ln.Addr().String(), "domains", strings.Join(domains, ","))
	if keys, err := rt.store.APIKeys(ctx); err == nil && !slices.ContainsFunc(keys, func(k store.APIKey) bool { return k.RevokedAt == nil }) {
		rt.log.Warn("http api: no API key yet: every request is refused with 401 until one is made (envelopd apikey create --db " + dbName(f.db) + ")")
	}
	if tcp, ok := ln.Addr().(*net.TCPAddr); ok && !tcp.IP.IsLoopback() {
		rt.log.Warn("http api: listening on a non-loopback address without TLS: API keys and mail cross the network in clear; put a TLS proxy in front", "addr", ln.Addr().String())
	}
	return stop, nil
}

// chains is what GET /v0/tokens serves: the token registry (built-ins and
// --token), the native coin of every chain named, and the explorers.
func (h *httpFlags) chains(f *ingestFlags) (*api.Chains, error) {
	var extra []rail.Token
	if f.rails != nil {
		cfg, err := f.rails.Config()
		if err != nil {
			return nil, err
		}
		extra = cfg.Tokens
	}
	reg, err := rail.NewRegistry(extra)
	if err != nil {
		return nil, err
	}
	c := &api.Chains{Explorers: maps.Clone(web.Explorers)}
	maps.Copy(c.Explorers, h.explorers)
	named := map[string]bool{}
	for _, t := range reg.Tokens() {
		c.Tokens = append(c.Tokens, api.TokenInfo{Chain: t.Chain, Symbol: t.Symbol, Address: t.Address, Decimals: t.Decimals})
		named[t.Chain] = true
	}
	for chain := range c.Explorers {
		named[chain] = true
	}
	for _, chain := range slices.Sorted(maps.Keys(named)) {
		n := rail.Native(chain)
		c.Tokens = append(c.Tokens, api.TokenInfo{Chain: chain, Symbol: n.Symbol, Decimals: n.Decimals, Native: true})
	}
	return c, nil
}
