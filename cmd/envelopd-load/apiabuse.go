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
	"os"
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
// valid client — sequential, paced at --rate, --requests list requests
// then --sends sends:
//
//   - idle: nothing else;
//   - strangers: --strangers clients, each from its own loopback address
//     (127.0.0.2, …), sending requests without a key or with a wrong one
//     at --stranger-rate each, for the whole phase;
//   - dead webhooks: one tenant (a key scoped to two inboxes) with
//     --dead-webhooks webhooks pointing at a listener that accepts
//     connections and never answers, its inboxes receiving mail at
//     --tenant-mail a second, for the whole phase.
//
// It prints one JSON object: each phase's median and p99, and the p99
// ratios against idle. Every loop is bounded by its phase.
//
//	envelopd-load api-abuse [--requests 400] [--sends 100] [--strangers 100]

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
	if err := fs.Parse(e.args); err != nil {
		return 2
	}
	if *requests <= 0 || *sends <= 0 || *rate <= 0 || *strangers < 0 || *dead < 0 {
		fmt.Fprintln(e.stderr, "envelopd-load api-abuse: positive --requests, --sends, --rate needed")
		return 2
	}
	res, err := apiAbuse(ctx, e.stderr, *dir, *requests, *sends, *rate, *strangers, *strangerRate, *dead, *tenantMail)
	if err != nil {
		fmt.Fprintln(e.stderr, "envelopd-load api-abuse:", err)
		return 2
	}
	printJSON(e.stdout, res)
	return 0
}

func apiAbuse(ctx context.Context, log io.Writer, dir string, requests, sends int, rate float64, strangers int, strangerRate float64,
	dead int, tenantMail float64) (*abuseResult, error) {
	if dir == "" {
		d, err := os.MkdirTemp("", "envelopd-abuse-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
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
	phase := func(name string) (*abusePhase, error) {
		tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
		defer tick.Stop()
		list := make([]time.Duration, 0, requests)
		path := "/v0/inboxes/" + benchInbox(1) + "/messages?limit=20"
		for range requests {
			<-tick.C
			d, err := do("GET", path, nil)
			if err != nil {
				return nil, err
			}
			list = append(list, d)
		}
		send := make([]time.Duration, 0, sends)
		for range sends {
			<-tick.C
			sent++
			body, _ := json.Marshal(map[string]any{"to": []string{fmt.Sprintf("customer%d@buyer.test", sent)},
				"subject": fmt.Sprintf("Invoice %d", sent), "text": "Invoice: 3 items, total 42.00."})
			d, err := do("POST", "/v0/inboxes/"+benchInbox(0)+"/messages/send", body)
			if err != nil {
				return nil, err
			}
			send = append(send, d)
		}
		p := &abusePhase{List: percentiles(list), Send: percentiles(send)}
		fmt.Fprintf(log, "envelopd-load api-abuse: %s: list p99 %.2f ms, send p99 %.2f ms\n", name, p.List.P99MS, p.Send.P99MS)
		return p, nil
	}
	res := &abuseResult{Rate: rate, Strangers: strangers, StrangerRate: strangerRate, DeadWebhooks: dead, TenantMailRate: tenantMail, Goal: 2}
	// Warm up, then idle.
	if _, err := phase("warm-up"); err != nil {
		return nil, err
	}
	if res.Idle, err = phase("idle"); err != nil {
		return nil, err
	}

	// Strangers.
	var reqs atomic.Int64
	var smu sync.Mutex
	status := map[int]int64{}
	actx, stopStrangers := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := range strangers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src := &net.TCPAddr{IP: net.IPv4(127, 0, byte(1+(i+1)/250), byte(2+(i+1)%250))}
			c := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: src}).DialContext, MaxIdleConnsPerHost: 1}}
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
	res.UnderStrangers, err = phase("strangers")
	stopStrangers()
	wg.Wait()
	if err != nil {
		return nil, err
	}
	res.UnderStrangers.StrangerRequests, res.UnderStrangers.StrangerStatus = reqs.Load(), status

	// One tenant's dead webhooks.
	if tenantMail > 0 {
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
		p := &api.Principal{KeyID: tk.ID, Inboxes: tenantInboxes}
		for i := range dead {
			if _, err := svc.CreateWebhook(ctx, p, tenantInboxes[i%2], api.CreateWebhookRequest{URL: fmt.Sprintf("http://%s/hook%d", dl.Addr(), i)}); err != nil {
				return nil, err
			}
		}
		mctx, stopMail := context.WithCancel(ctx)
		var mail atomic.Int64
		mailDone := make(chan error, 1)
		go func() {
			tick := time.NewTicker(time.Duration(float64(time.Second) / tenantMail))
			defer tick.Stop()
			for i := 0; ; i++ {
				select {
				case <-mctx.Done():
					mailDone <- nil
					return
				case <-tick.C:
				}
				rcpt := tenantInboxes[i%2]
				mid := fmt.Sprintf("tenant%d@buyer.test", i)
				raw := fmt.Sprintf("From: b@buyer.test\r\nTo: %s\r\nSubject: t %d\r\nMessage-ID: <%s>\r\n\r\nbody\r\n", rcpt, i, mid)
				if _, err := st.Ingest(mctx, &store.Incoming{Direction: store.DirIn, Raw: []byte(raw), MessageID: mid, Sender: "b@buyer.test",
					Recipients: []string{rcpt}, Subject: fmt.Sprintf("t %d", i), Status: store.StatusAccepted, ReceivedAt: time.Now()}); err != nil && mctx.Err() == nil {
					mailDone <- err
					return
				}
				mail.Add(1)
			}
		}()
		res.UnderDeadHooks, err = phase("dead webhooks")
		stopMail()
		if merr := <-mailDone; err == nil {
			err = merr
		}
		if err != nil {
			return nil, err
		}
		res.UnderDeadHooks.TenantMail, res.UnderDeadHooks.DeadConnections = mail.Load(), conns.Load()
		res.ListP99DeadHooks = res.UnderDeadHooks.List.P99MS / res.Idle.List.P99MS
		res.SendP99DeadHooks = res.UnderDeadHooks.Send.P99MS / res.Idle.Send.P99MS
	}
	res.ListP99Strangers = res.UnderStrangers.List.P99MS / res.Idle.List.P99MS
	res.SendP99Strangers = res.UnderStrangers.Send.P99MS / res.Idle.Send.P99MS
	return res, nil
}
