package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
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
//     (127.0.0.2, …), sending requests without a key or with a wrong one
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
//	envelopd-load api-abuse [--rounds 4] [--requests 400] [--sends 100] [--strangers 100]

type abusePhase struct {
	List *latency `json:"list_messages"`
	Send *latency `json:"send"`
	// Stranger and tenant traffic during the phase.
	StrangerRequests int64         `json:"stranger_requests,omitempty"`
	StrangerStatus   map[int]int64 `json:"stranger_status,omitempty"`
	TenantMail       int64         `json:"tenant_mail,omitempty"`
	DeadConnections  int64         `json:"dead_endpoint_connections,omitempty"`
}

type abuseResult struct {
	Rate             float64     `json:"valid_client_rate_per_sec"`
	Rounds           int         `json:"rounds"`
	Strangers        int         `json:"strangers"`
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
	fs := flag.NewFlagSet("api-abuse", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	requests := fs.Int("requests", 400, "list requests of the valid client per phase")
	sends := fs.Int("sends", 100, "sends of the valid client per phase")
	rate := fs.Float64("rate", 50, "valid client requests a second (within the per-key limit)")
	strangers := fs.Int("strangers", 100, "unauthenticated clients, each from its own loopback address")
	strangerRate := fs.Float64("stranger-rate", 50, "requests a second of each unauthenticated client")
	dead := fs.Int("dead-webhooks", 20, "webhooks of one tenant pointing at an endpoint that never answers")
	tenantMail := fs.Float64("tenant-mail", 20, "mails a second the tenant's inboxes receive in the dead-webhooks phase")
	dir := fs.String("dir", "", "directory of the store (default: a temporary one)")
	rounds := fs.Int("rounds", 4, "rounds of the three phases in turn (the samples of a phase are split over them)")
	if err := fs.Parse(e.args); err != nil {
		return 2
	}
	if *rounds <= 0 || *requests < *rounds || *sends < *rounds || *rate <= 0 || *strangers < 0 || *dead < 0 {
		fmt.Fprintln(e.stderr, "envelopd-load api-abuse: positive --rounds, --rate, and --requests, --sends of at least --rounds needed")
		return 2
	}
	res, err := apiAbuse(ctx, e.stderr, *dir, *requests, *sends, *rate, *strangers, *strangerRate, *dead, *tenantMail, *rounds)
	if err != nil {
		fmt.Fprintln(e.stderr, "envelopd-load api-abuse:", err)
		return 2
	}
	printJSON(e.stdout, res)
	return 0
}

func apiAbuse(ctx context.Context, log io.Writer, dir string, requests, sends int, rate float64, strangers int, strangerRate float64,
	dead int, tenantMail float64, rounds int) (*abuseResult, error) {
	dir, cleanup, err := workDir(dir, "envelopd-abuse-")
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
	go srv.Serve(ln)
	defer srv.Close()
	base := "http://" + ln.Addr().String()
	sctx, stopSender := context.WithCancel(ctx)
	senderDone := make(chan struct{})
	go func() {
		(&api.WebhookSender{Service: svc}).Run(sctx)
		close(senderDone)
	}()
	defer func() { stopSender(); <-senderDone }()

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	do := func(method, path string, body []byte) (time.Duration, error) {
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(body)
		}
		req, _ := http.NewRequestWithContext(ctx, method, base+path, rd)
		req.Header.Set("Authorization", "Bearer "+key)
		t := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		d := time.Since(t)
		if resp.StatusCode != 200 {
			return 0, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, b)
		}
		return d, nil
	}
	sent := 0
	// One phase's samples of the valid client: n list requests, then m
	// sends, paced at rate.
	measure := func(n, m int, list, send *[]time.Duration) error {
		tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
		defer tick.Stop()
		path := "/v0/inboxes/" + benchInbox(1) + "/messages?limit=20"
		for range n {
			<-tick.C
			d, err := do("GET", path, nil)
			if err != nil {
				return err
			}
			*list = append(*list, d)
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
			*send = append(*send, d)
		}
		return nil
	}

	// Strangers: started and stopped around their phase.
	var reqs atomic.Int64
	var smu sync.Mutex
	status := map[int]int64{}
	startStrangers := func() func() {
		actx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for i := range strangers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				src := &net.TCPAddr{IP: net.IPv4(127, 0, byte(1+(i+1)/250), byte(2+(i+1)%250))}
				c := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: src}).DialContext, MaxIdleConnsPerHost: 1}}
				defer c.CloseIdleConnections()
				tick := time.NewTicker(time.Duration(float64(time.Second) / strangerRate))
				defer tick.Stop()
				for n := 0; ; n++ {
					select {
					case <-actx.Done():
						return
					case <-tick.C:
					}
					req, _ := http.NewRequestWithContext(actx, "GET", base+"/v0/inboxes", nil)
					if n%2 == 1 {
						req.Header.Set("Authorization", fmt.Sprintf("Bearer ek_%012x_%s", n, strings.Repeat("A", 43)))
					}
					resp, err := c.Do(req)
					if err != nil {
						continue
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					reqs.Add(1)
					smu.Lock()
					status[resp.StatusCode]++
					smu.Unlock()
				}
			}()
		}
		return func() { stop(); wg.Wait() }
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
	var warm []time.Duration
	if err := measure(requests/rounds, sends/rounds, &warm, &warm); err != nil {
		return nil, err
	}
	var idleL, idleS, strL, strS, tenL, tenS []time.Duration
	for r := range rounds {
		if err := measure(requests/rounds, sends/rounds, &idleL, &idleS); err != nil {
			return nil, err
		}
		stop := startStrangers()
		err := measure(requests/rounds, sends/rounds, &strL, &strS)
		stop()
		if err != nil {
			return nil, err
		}
		if tenantMail > 0 {
			stop, err := startTenant()
			if err != nil {
				return nil, err
			}
			err = measure(requests/rounds, sends/rounds, &tenL, &tenS)
			if serr := stop(); err == nil {
				err = serr
			}
			if err != nil {
				return nil, err
			}
		}
		fmt.Fprintf(log, "envelopd-load api-abuse: round %d of %d done\n", r+1, rounds)
	}
	res := &abuseResult{Rate: rate, Rounds: rounds, Strangers: strangers, StrangerRate: strangerRate, DeadWebhooks: dead, TenantMailRate: tenantMail, Goal: 2}
	res.Idle = &abusePhase{List: percentiles(idleL), Send: percentiles(idleS)}
	res.UnderStrangers = &abusePhase{List: percentiles(strL), Send: percentiles(strS), StrangerRequests: reqs.Load(), StrangerStatus: status}
	res.ListP99Strangers = res.UnderStrangers.List.P99MS / res.Idle.List.P99MS
	res.SendP99Strangers = res.UnderStrangers.Send.P99MS / res.Idle.Send.P99MS
	if tenantMail > 0 {
		res.UnderDeadHooks = &abusePhase{List: percentiles(tenL), Send: percentiles(tenS), TenantMail: mail.Load(), DeadConnections: conns.Load()}
		res.ListP99DeadHooks = res.UnderDeadHooks.List.P99MS / res.Idle.List.P99MS
		res.SendP99DeadHooks = res.UnderDeadHooks.Send.P99MS / res.Idle.Send.P99MS
	}
	for _, p := range []struct {
		name string
		p    *abusePhase
	}{{"idle", res.Idle}, {"strangers", res.UnderStrangers}, {"dead webhooks", res.UnderDeadHooks}} {
		if p.p != nil {
			fmt.Fprintf(log, "envelopd-load api-abuse: %s: list median %.2f p99 %.2f ms, send median %.2f p99 %.2f ms\n",
				p.name, p.p.List.MedianMS, p.p.List.P99MS, p.p.Send.MedianMS, p.p.Send.P99MS)
		}
	}
	return res, nil
}
