package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/envelopd/envelopd/api"
	"github.com/envelopd/envelopd/authguard"
	"github.com/envelopd/envelopd/dkim"
	"github.com/envelopd/envelopd/store"
)

// api-abuse: what strangers and one tenant can do to a valid key's
// latency (docs/security.md). One server (the API handler with the
// real authguard throttle, the per-key limits and the webhook sender,
// over HTTP on loopback) and, in the same run, three phases of the same
// valid client — sequential, paced at --rate, list requests then sends:
//
//   - idle: nothing else;
//   - strangers: --strangers clients, each from its own loopback address
//     (127.0.1.3, …), sending requests without a key or with a wrong one
//     at --stranger-rate each, for the whole phase;
//   - dead webhooks: one tenant (a key scoped to two inboxes) whose
//     --dead-webhooks webhooks point at a listener that accepts
//     connections and never answers (made in the first such phase, and
//     kept), its inboxes receiving mail at --tenant-mail a second during
//     the phase (--dead-webhooks 0: the same mail, no webhooks — a
//     control).
//
// The phases run in turn, --rounds times, each round taking its share of
// --requests and --sends, so that the noise of a shared machine falls on
// all three alike. It prints one JSON object: each phase's median and
// p99, and the p99 ratios against idle. Every loop is bounded by its
// phase.
//
// The strangers run in a process of their own by default, as an attack
// does: goroutines of the load generator inside the server's process
// would share its scheduler and locks, which no outside client can
// (--strangers-process=false runs them here, to profile them). What each
// phase cost in CPU is printed beside it: process_cpu_seconds is this
// process's (the server and the valid client, and the strangers when
// they run here), strangers_cpu_seconds the strangers process's. list_slowest names the
// slowest list requests of a phase by round and time into the phase.
// --profile DIR writes a CPU profile of each strangers phase
// (cpu.N.pprof) and the block and mutex profiles of all of them, the
// goroutines labelled role=server, strangers or webhooks.
//
//	envelopd-load api-abuse [--rounds 8] [--requests 800] [--sends 400] [--strangers 100]
//	    [--strangers-process=false] [--profile DIR]

type abusePhase struct {
	List *latency `json:"list_messages"`
	Send *latency `json:"send"`
	// ListSlowest are the slowest list requests of the phase.
	ListSlowest []slowSample `json:"list_slowest"`
	// ProcessCPU is this process's CPU over the phase's rounds;
	// StrangersCPU the strangers process's (--strangers-process).
	ProcessCPU   float64 `json:"process_cpu_seconds"`
	StrangersCPU float64 `json:"strangers_cpu_seconds,omitempty"`
	// Stranger and tenant traffic during the phase.
	StrangerSent     int64         `json:"stranger_requests_sent,omitempty"`
	StrangerRequests int64         `json:"stranger_requests,omitempty"`
	StrangerStatus   map[int]int64 `json:"stranger_status,omitempty"`
	TenantMail       int64         `json:"tenant_mail,omitempty"`
	DeadConnections  int64         `json:"dead_endpoint_connections,omitempty"`
}

// slowSample is one request of the valid client: in which round, how
// long into its phase it started, how long it took.
type slowSample struct {
	Round int     `json:"round"`
	AtMS  float64 `json:"at_ms"`
	MS    float64 `json:"ms"`
}

// phaseSamples are a phase's list requests and sends.
type phaseSamples struct {
	list, send []time.Duration
	slow       []slowSample
	cpu        time.Duration
}

func (p *phaseSamples) result() *abusePhase {
	slices.SortFunc(p.slow, func(a, b slowSample) int {
		switch {
		case a.MS > b.MS:
			return -1
		case a.MS < b.MS:
			return 1
		}
		return 0
	})
	return &abusePhase{List: percentiles(p.list), Send: percentiles(p.send), ListSlowest: p.slow[:min(8, len(p.slow))],
		ProcessCPU: p.cpu.Seconds()}
}

type abuseResult struct {
	Rate             float64     `json:"valid_client_rate_per_sec"`
	Rounds           int         `json:"rounds"`
	Strangers        int         `json:"strangers"`
	StrangersApart   bool        `json:"strangers_process"`
	StrangerRate     float64     `json:"stranger_rate_per_sec_each"`
	DeadWebhooks     int         `json:"dead_webhooks"`
	TenantMailRate   float64     `json:"tenant_mail_per_sec"`
	Idle             *abusePhase `json:"idle"`
	UnderStrangers   *abusePhase `json:"strangers_phase"`
	UnderDeadHooks   *abusePhase `json:"dead_webhooks_phase"`
	ListP99Strangers float64     `json:"list_p99_ratio_strangers"`
	SendP99Strangers float64     `json:"send_p99_ratio_strangers"`
	ListP99DeadHooks float64     `json:"list_p99_ratio_dead_webhooks"`
	SendP99DeadHooks float64     `json:"send_p99_ratio_dead_webhooks"`
	Goal             float64     `json:"goal_p99_ratio"`
}

func runAPIAbuse(ctx context.Context, e *env) int {
	fs := newFlags(e, "api-abuse")
	requests := fs.Int("requests", 800, "list requests of the valid client per phase")
	sends := fs.Int("sends", 400, "sends of the valid client per phase")
	rate := fs.Float64("rate", 50, "valid client requests a second (within the per-key limit)")
	strangers := fs.Int("strangers", 100, "unauthenticated clients, each from its own loopback address")
	strangerRate := fs.Float64("stranger-rate", 50, "requests a second of each unauthenticated client")
	dead := fs.Int("dead-webhooks", 20, "webhooks of one tenant pointing at an endpoint that never answers")
	tenantMail := fs.Float64("tenant-mail", 20, "mails a second the tenant's inboxes receive in the dead-webhooks phase")
	dir := fs.String("dir", "", "directory of the store (default: a temporary one)")
	rounds := fs.Int("rounds", 8, "rounds of the three phases in turn (the samples of a phase are split over them)")
	apart := fs.Bool("strangers-process", true, "run the strangers in a process of their own and report its CPU (false: in this process, beside the server)")
	profile := fs.String("profile", "", "directory to write CPU, block and mutex profiles of the strangers phases to")
	if err := fs.Parse(e.args); err != nil {
		return 2
	}
	if *rounds <= 0 || *requests < *rounds || *sends < *rounds || *rate <= 0 || *strangers < 0 || *dead < 0 {
		fmt.Fprintln(e.stderr, "envelopd-load api-abuse: positive --rounds, --rate, and --requests, --sends of at least --rounds needed")
		return 2
	}
	o := abuseOptions{dir: *dir, requests: *requests, sends: *sends, rate: *rate, strangers: *strangers, strangerRate: *strangerRate,
		dead: *dead, tenantMail: *tenantMail, rounds: *rounds, apart: *apart, profile: *profile}
	res, err := apiAbuse(ctx, e.stderr, o)
	return finish(e, "api-abuse", res, err)
}

type abuseOptions struct {
	dir             string
	requests, sends int
	rate            float64
	strangers       int
	strangerRate    float64
	dead            int
	tenantMail      float64
	rounds          int
	apart           bool   // the strangers in a process of their own
	profile         string // directory of the profiles, or ""
}

func apiAbuse(ctx context.Context, log io.Writer, o abuseOptions) (*abuseResult, error) {
	requests, sends, rate, strangers, strangerRate := o.requests, o.sends, o.rate, o.strangers, o.strangerRate
	dead, tenantMail, rounds := o.dead, o.tenantMail, o.rounds
	dir, cleanup, err := workDir(o.dir, "envelopd-abuse-")
	if err != nil {
		return nil, err
	}
	defer cleanup()
	st, err := store.Open(ctx, filepath.Join(dir, "abuse.db"))
	if err != nil {
		return nil, err
	}
	defer st.Close()
	if err := fill(ctx, st, 0, 2000, 4, 4, log); err != nil {
		return nil, err
	}
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	svc, key, err := benchService(ctx, st, dkim.Signer{Domain: "shop.test", Selector: "bench", Key: priv})
	if err != nil {
		return nil, err
	}
	if _, err := st.SyncInboxes(ctx, 0); err != nil {
		return nil, err
	}
	guard := authguard.New(0, slog.New(slog.DiscardHandler), nil)
	h := api.NewHandler(svc, api.HandlerOptions{Throttle: authguard.KeyThrottle{Guard: guard, Service: "http", Mechanism: "bearer"}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	pprof.Do(ctx, pprof.Labels("role", "server"), func(context.Context) { go srv.Serve(ln) })
	defer srv.Close()
	base := "http://" + ln.Addr().String()
	sctx, stopSender := context.WithCancel(ctx)
	senderDone := make(chan struct{})
	pprof.Do(ctx, pprof.Labels("role", "webhooks"), func(context.Context) {
		go func() {
			(&api.WebhookSender{Service: svc}).Run(sctx)
			close(senderDone)
		}()
	})
	defer func() { stopSender(); <-senderDone }()

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	do := func(method, path string, body []byte) (time.Duration, error) {
		d, _, err := apiCall(ctx, client, key, method, base, path, body)
		return d, err
	}
	sent := 0
	// One phase's samples of the valid client in round r: n list
	// requests, then m sends, paced at rate; ps.cpu counts this process's
	// CPU meanwhile.
	measure := func(r, n, m int, ps *phaseSamples) error {
		tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
		defer tick.Stop()
		path := "/v0/inboxes/" + benchInbox(1) + "/messages?limit=20"
		t0, cpu0 := time.Now(), rusageCPU(syscall.RUSAGE_SELF)
		defer func() { ps.cpu += rusageCPU(syscall.RUSAGE_SELF) - cpu0 }()
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		for range n {
			<-tick.C
			at := time.Since(t0)
			d, err := do("GET", path, nil)
			if err != nil {
				return err
			}
			ps.list = append(ps.list, d)
			ps.slow = append(ps.slow, slowSample{Round: r, AtMS: ms(at), MS: ms(d)})
		}
		for range m {
			<-tick.C
			sent++
			body, _ := json.Marshal(map[string]any{"to": []string{fmt.Sprintf("customer%d@buyer.test", sent)},
				"subject": fmt.Sprintf("Invoice %d", sent), "text": "Invoice: 3 items, total 42.00."})
			d, err := do("POST", "/v0/inboxes/"+benchInbox(0)+"/messages/send", body)
			if err != nil {
				return err
			}
			ps.send = append(ps.send, d)
		}
		return nil
	}

	// Strangers: started and stopped around their phase, here or in a
	// process of their own.
	var (
		strCPU   time.Duration
		strCount strangerCounts
		local    *strangerClients
		proc     *strangerProcess
	)
	if o.apart {
		proc, err = startStrangerProcess(ctx, base, strangers, strangerRate)
		if err != nil {
			return nil, err
		}
		defer proc.close()
	} else {
		local = newStrangers(base, strangers, strangerRate)
	}
	startStrangers := func() (func() error, error) {
		if local != nil {
			var stop func()
			pprof.Do(ctx, pprof.Labels("role", "strangers"), func(ctx context.Context) { stop = local.start(ctx) })
			return func() error {
				stop()
				strCount = local.counts()
				return nil
			}, nil
		}
		c0, err := proc.cpu()
		if err != nil {
			return nil, err
		}
		if err := proc.start(); err != nil {
			return nil, err
		}
		return func() error {
			c, err := proc.stop()
			if err != nil {
				return err
			}
			strCount = c
			c1, err := proc.cpu()
			strCPU += c1 - c0
			return err
		}, nil
	}

	// The tenant: a key scoped to two inboxes, its webhooks pointing at
	// a listener that accepts and never answers, enabled and its inboxes
	// receiving mail during its phase only.
	dl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	var conns atomic.Int64
	var cmu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := dl.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			cmu.Lock()
			held = append(held, c)
			cmu.Unlock()
		}
	}()
	defer func() {
		dl.Close()
		cmu.Lock()
		for _, c := range held {
			c.Close()
		}
		cmu.Unlock()
	}()
	tenantInboxes := []string{benchInbox(2), benchInbox(3)}
	_, tk, err := api.NewKey(tenantInboxes, "tenant", time.Now())
	if err != nil {
		return nil, err
	}
	if err := st.CreateAPIKey(ctx, tk); err != nil {
		return nil, err
	}
	// The webhooks are made at the start of the first tenant phase and
	// stay: a dead tenant lives on the server (its endpoints backed off
	// ever longer), as it would.
	hooked := false
	makeHooks := func() error {
		if hooked {
			return nil
		}
		hooked = true
		for i := range dead {
			if _, err := svc.CreateWebhook(ctx, &api.Principal{KeyID: tk.ID, Inboxes: tenantInboxes}, tenantInboxes[i%2],
				api.CreateWebhookRequest{URL: fmt.Sprintf("http://%s/hook%d", dl.Addr(), i)}); err != nil {
				return err
			}
		}
		return nil
	}
	var mail atomic.Int64
	startTenant := func() (func() error, error) {
		if err := makeHooks(); err != nil {
			return nil, err
		}
		mctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			tick := time.NewTicker(time.Duration(float64(time.Second) / tenantMail))
			defer tick.Stop()
			for {
				select {
				case <-mctx.Done():
					done <- nil
					return
				case <-tick.C:
				}
				i := mail.Add(1)
				rcpt := tenantInboxes[i%2]
				mid := fmt.Sprintf("tenant%d@buyer.test", i)
				raw := fmt.Sprintf("From: b@buyer.test\r\nTo: %s\r\nSubject: t %d\r\nMessage-ID: <%s>\r\n\r\nbody\r\n", rcpt, i, mid)
				if _, err := st.Ingest(mctx, &store.Incoming{Direction: store.DirIn, Raw: []byte(raw), MessageID: mid, Sender: "b@buyer.test",
					Recipients: []string{rcpt}, Subject: fmt.Sprintf("t %d", i), Status: store.StatusAccepted, ReceivedAt: time.Now()}); err != nil && mctx.Err() == nil {
					done <- err
					return
				}
			}
		}()
		return func() error {
			stop()
			return <-done
		}, nil
	}

	// Warm up, then rounds of the three phases in turn: the machine's
	// noise falls on all three alike.
	if err := measure(0, requests/rounds, sends/rounds, &phaseSamples{}); err != nil {
		return nil, err
	}
	// during measures round r of a phase between start and the stop it
	// returns.
	during := func(r int, start func() (func() error, error), ps *phaseSamples) error {
		stop, err := start()
		if err != nil {
			return err
		}
		err = measure(r, requests/rounds, sends/rounds, ps)
		if serr := stop(); err == nil {
			err = serr
		}
		return err
	}
	var idle, str, ten phaseSamples
	prof := &abuseProfiler{dir: o.profile}
	for r := range rounds {
		if err := measure(r+1, requests/rounds, sends/rounds, &idle); err != nil {
			return nil, err
		}
		if err := prof.start(r + 1); err != nil {
			return nil, err
		}
		err := during(r+1, startStrangers, &str)
		prof.stop()
		if err != nil {
			return nil, err
		}
		if tenantMail > 0 {
			if err := during(r+1, startTenant, &ten); err != nil {
				return nil, err
			}
		}
		fmt.Fprintf(log, "envelopd-load api-abuse: round %d of %d done\n", r+1, rounds)
	}
	if err := prof.finish(); err != nil {
		return nil, err
	}
	res := &abuseResult{Rate: rate, Rounds: rounds, Strangers: strangers, StrangersApart: o.apart, StrangerRate: strangerRate, DeadWebhooks: dead,
		TenantMailRate: tenantMail, Goal: 2}
	res.Idle = idle.result()
	res.UnderStrangers = str.result()
	res.UnderStrangers.StrangerSent, res.UnderStrangers.StrangerRequests, res.UnderStrangers.StrangerStatus = strCount.Sent, strCount.Requests, strCount.Status
	res.UnderStrangers.StrangersCPU = strCPU.Seconds()
	res.ListP99Strangers = res.UnderStrangers.List.P99MS / res.Idle.List.P99MS
	res.SendP99Strangers = res.UnderStrangers.Send.P99MS / res.Idle.Send.P99MS
	if tenantMail > 0 {
		res.UnderDeadHooks = ten.result()
		res.UnderDeadHooks.TenantMail, res.UnderDeadHooks.DeadConnections = mail.Load(), conns.Load()
		res.ListP99DeadHooks = res.UnderDeadHooks.List.P99MS / res.Idle.List.P99MS
		res.SendP99DeadHooks = res.UnderDeadHooks.Send.P99MS / res.Idle.Send.P99MS
	}
	for _, p := range []struct {
		name string
		p    *abusePhase
	}{{"idle", res.Idle}, {"strangers", res.UnderStrangers}, {"dead webhooks", res.UnderDeadHooks}} {
		if p.p != nil {
			apart := ""
			if o.apart && p.p == res.UnderStrangers {
				apart = fmt.Sprintf(", %.2f s in the strangers' process", p.p.StrangersCPU)
			}
			fmt.Fprintf(log, "envelopd-load api-abuse: %s: list median %.2f p99 %.2f ms, send median %.2f p99 %.2f ms; CPU %.2f s here%s\n",
				p.name, p.p.List.MedianMS, p.p.List.P99MS, p.p.Send.MedianMS, p.p.Send.P99MS, p.p.ProcessCPU, apart)
		}
	}
	return res, nil
}

// abuseProfiler writes the profiles of --profile: a CPU profile of each
// strangers phase, and the block and mutex profiles of all of them
// (recorded during those phases only). A zero dir writes nothing.
type abuseProfiler struct {
	dir string
	f   *os.File
}

func (p *abuseProfiler) start(round int) error {
	if p.dir == "" {
		return nil
	}
	f, err := os.Create(filepath.Join(p.dir, fmt.Sprintf("cpu.%d.pprof", round)))
	if err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return err
	}
	p.f = f
	runtime.SetBlockProfileRate(1)
	runtime.SetMutexProfileFraction(1)
	return nil
}

func (p *abuseProfiler) stop() {
	if p.f == nil {
		return
	}
	pprof.StopCPUProfile()
	p.f.Close()
	p.f = nil
	runtime.SetBlockProfileRate(0)
	runtime.SetMutexProfileFraction(0)
}

func (p *abuseProfiler) finish() error {
	if p.dir == "" {
		return nil
	}
	for _, n := range []string{"block", "mutex"} {
		f, err := os.Create(filepath.Join(p.dir, n+".pprof"))
		if err != nil {
			return err
		}
		err = pprof.Lookup(n).WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}
