package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/envelopd/envelopd/api"
	"github.com/envelopd/envelopd/dkim"
	"github.com/envelopd/envelopd/mailout"
	"github.com/envelopd/envelopd/store"
)

// api: the HTTP API speed figures. It fills a store with N
// messages (or reuses one made by an earlier run with the same N), then
// measures over real HTTP on loopback, one request at a time: list
// messages and threads of an inbox (first page and a page ~90% deep,
// reached by its page token), the org-wide thread list, and get thread;
// then sends through the API with C concurrent clients (each message
// composed, DKIM-signed, checked, stored and queued durably; no delivery).
// It prints one JSON object.
//
//	envelopd-load api --messages 1000000 --db /tmp/api-1m.db
//
// The store: --inboxes inboxes (plain mode, one per recipient address),
// messages in threads of --thread-len (each replying to the one before),
// ~600-byte mails, received one second apart.

type latency struct {
	Requests int     `json:"requests"`
	MedianMS float64 `json:"median_ms"`
	P99MS    float64 `json:"p99_ms"`
	MaxMS    float64 `json:"max_ms"`
}

type apiBenchResult struct {
	Messages       int                 `json:"messages"`
	Inboxes        int                 `json:"inboxes"`
	PerInbox       int                 `json:"messages_per_inbox"`
	ThreadLen      int                 `json:"thread_len"`
	GenerateSecs   float64             `json:"generate_seconds,omitempty"`
	IndexSecs      float64             `json:"index_seconds,omitempty"`
	DBBytes        int64               `json:"db_bytes"`
	Reads          map[string]*latency `json:"reads"`
	SendClients    int                 `json:"send_clients"`
	SendMessages   int                 `json:"send_messages"`
	SendKey        string              `json:"send_dkim_key"`
	SendPerSec     float64             `json:"send_msg_per_sec"`
	SendLatency    *latency            `json:"send_latency"`
	GOMAXPROCS     int                 `json:"cpus"`
	GoalReadP99MS  float64             `json:"goal_read_p99_ms"`
	GoalSendPerSec float64             `json:"goal_send_msg_per_sec"`
}

func runAPIBench(ctx context.Context, e *env) int {
	fs := newFlags(e, "api")
	n := fs.Int("messages", 1000000, "messages in the store")
	inboxes := fs.Int("inboxes", 10, "inboxes the messages are spread over")
	threadLen := fs.Int("thread-len", 4, "messages per thread")
	db := fs.String("db", "", "store file (made if missing; reused when it holds --messages)")
	requests := fs.Int("requests", 300, "requests per read case")
	clients := fs.Int("clients", 10, "concurrent send clients")
	sends := fs.Int("sends", 5000, "messages sent through the API")
	keyType := fs.String("dkim", "rsa", "DKIM key of sent mail: rsa (2048) or ed25519")
	if err := fs.Parse(e.args); err != nil {
		return 2
	}
	if *db == "" || *n <= 0 || *inboxes <= 0 || *threadLen <= 0 || *clients <= 0 {
		fmt.Fprintln(e.stderr, "envelopd-load api: --db and positive --messages, --inboxes, --thread-len, --clients are needed")
		return 2
	}
	res, err := apiBench(ctx, e.stderr, *db, *n, *inboxes, *threadLen, *requests, *clients, *sends, *keyType)
	return finish(e, "api", res, err)
}

// finish ends the command cmd that measured res: res as indented
// JSON on stdout (exit 0), or err on stderr (exit 2).
func finish(e *env, cmd string, res any, err error) int {
	if err != nil {
		fmt.Fprintf(e.stderr, "envelopd-load %s: %v\n", cmd, err)
		return 2
	}
	printJSON(e.stdout, res)
	return 0
}

// apiCall makes one request of the API at base with the key: method,
// path and body (none when nil). It returns how long the exchange took
// (the answer read whole) and the answer's body; a status other than 200
// is an error quoting it.
func apiCall(ctx context.Context, client *http.Client, key, method, base, path string, body []byte) (time.Duration, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	t := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	d := time.Since(t)
	if err != nil {
		return 0, nil, err
	}
	if resp.StatusCode != 200 {
		return 0, nil, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	return d, b, nil
}

func printJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// benchService is the API service of the benchmarks over st, sending
// for shop.test signed by signer, and an unscoped key of it.
func benchService(ctx context.Context, st store.DB, signer dkim.Signer) (*api.Service, string, error) {
	svc, err := api.NewService(api.Config{Store: st, Domains: []string{"shop.test"}, Logger: slog.New(slog.DiscardHandler),
		Mailer: func(string) *mailout.Mailer { return &mailout.Mailer{Signers: []dkim.Signer{signer}} }})
	if err != nil {
		return nil, "", err
	}
	key, k, err := api.NewKey(nil, "bench", time.Now())
	if err != nil {
		return nil, "", err
	}
	return svc, key, st.CreateAPIKey(ctx, k)
}

func benchInbox(i int) string { return fmt.Sprintf("agent%02d@shop.test", i) }

// fill stores messages [have, n) and indexes them.
func fill(ctx context.Context, st store.DB, have, n, inboxes, threadLen int, log io.Writer) error {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var next atomic.Int64
	next.Store(int64(have))
	var done atomic.Int64
	errc := make(chan error, 64)
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < 64; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				thread := i / threadLen
				rcpt := benchInbox(thread % inboxes)
				mid := fmt.Sprintf("b%07d@buyer.test", i)
				var irt []string
				hdr := ""
				if i%threadLen != 0 {
					prev := fmt.Sprintf("b%07d@buyer.test", i-1)
					irt = []string{prev}
					hdr = "In-Reply-To: <" + prev + ">\r\nReferences: <" + prev + ">\r\n"
				}
				subj := fmt.Sprintf("Order %d", thread)
				raw := fmt.Sprintf("From: Buyer <buyer%d@buyer.test>\r\nTo: %s\r\nSubject: %s\r\nDate: %s\r\nMessage-ID: <%s>\r\n%s"+
					"MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n"+
					"Hello,\r\n\r\nthis is message %d of thread %d. Please find the details of the order below and\r\n"+
					"confirm when convenient. Quantity: %d. Reference: %08x.\r\n\r\nRegards,\r\nBuyer\r\n",
					thread%1000, rcpt, subj, base.Add(time.Duration(i)*time.Second).Format(time.RFC1123Z), mid, hdr, i, thread, i%17+1, i*2654435761)
				_, err := st.Ingest(ctx, &store.Incoming{Direction: store.DirIn, Raw: []byte(raw), MessageID: mid, InReplyTo: irt, References: irt,
					Sender: fmt.Sprintf("buyer%d@buyer.test", thread%1000), Recipients: []string{rcpt}, Subject: subj,
					Status: store.StatusAccepted, ReceivedAt: base.Add(time.Duration(i) * time.Second)})
				if err != nil {
					errc <- err
					return
				}
				if d := done.Add(1); d%100000 == 0 {
					fmt.Fprintf(log, "envelopd-load api: %d stored (%.0f msg/s)\n", have+int(d), float64(d)/time.Since(start).Seconds())
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return err
	}
	return ctx.Err()
}

func percentiles(ds []time.Duration) *latency {
	slices.Sort(ds)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	p := func(q float64) time.Duration {
		i := int(q*float64(len(ds)-1) + 0.5)
		return ds[i]
	}
	return &latency{Requests: len(ds), MedianMS: ms(p(0.5)), P99MS: ms(p(0.99)), MaxMS: ms(ds[len(ds)-1])}
}

func apiBench(ctx context.Context, log io.Writer, db string, n, inboxes, threadLen, requests, clients, sends int, keyType string) (*apiBenchResult, error) {
	st, err := store.Open(ctx, db)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	res := &apiBenchResult{Messages: n, Inboxes: inboxes, PerInbox: n / inboxes, ThreadLen: threadLen, Reads: map[string]*latency{},
		GOMAXPROCS: runtime.NumCPU(), GoalReadP99MS: 10, GoalSendPerSec: 1000}
	var have int
	if ms, err := st.Messages(ctx, store.Filter{Limit: 1, Direction: store.DirIn, Newest: true}); err == nil && len(ms) > 0 {
		// The newest row is one of the last 64 stored (64 writers); storing
		// a message again changes nothing (redelivery).
		fmt.Sscanf(ms[0].MessageID, "b%07d@buyer.test", &have)
		have = max(0, have+1-64)
		if have+64 >= n {
			have = n
		}
	}
	if have < n {
		fmt.Fprintf(log, "envelopd-load api: storing messages %d..%d in %s\n", have, n, db)
		t := time.Now()
		if err := fill(ctx, st, have, n, inboxes, threadLen, log); err != nil {
			return nil, err
		}
		res.GenerateSecs = time.Since(t).Seconds()
	}
	t := time.Now()
	if _, err := st.SyncInboxes(ctx, 0); err != nil {
		return nil, err
	}
	res.IndexSecs = time.Since(t).Seconds()
	if fi, err := os.Stat(db); err == nil {
		res.DBBytes = fi.Size()
	}

	var signer dkim.Signer
	switch keyType {
	case "rsa":
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			return nil, err
		}
		signer = dkim.Signer{Domain: "shop.test", Selector: "bench", Key: k}
		res.SendKey = "rsa-2048"
	case "ed25519":
		_, k, _ := ed25519.GenerateKey(rand.Reader)
		signer = dkim.Signer{Domain: "shop.test", Selector: "bench", Key: k}
		res.SendKey = "ed25519"
	default:
		return nil, fmt.Errorf("--dkim %q: want rsa or ed25519", keyType)
	}
	svc, key, err := benchService(ctx, st, signer)
	if err != nil {
		return nil, err
	}
	// The engine's speed, not the per-key rate policy, is measured.
	srv := httptest.NewServer(api.NewHandler(svc, api.HandlerOptions{Tenants: api.NewTenants(st, api.TenantLimits{RequestsPerSecond: 1e9, Burst: 1e9})}))
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients * 2}}
	get := func(path string, out any) (time.Duration, error) {
		d, b, err := apiCall(ctx, client, key, "GET", srv.URL, path, nil)
		if err != nil || out == nil {
			return d, err
		}
		return d, json.Unmarshal(b, out)
	}

	inbox := "/v0/inboxes/" + benchInbox(inboxes/2)
	deep := func(kind string, total int) (string, error) {
		tok := ""
		for walked := 0; walked < total*9/10; walked += 1000 {
			var l struct {
				NextPageToken string `json:"next_page_token"`
			}
			p := inbox + "/" + kind + "?limit=1000"
			if tok != "" {
				p += "&page_token=" + url.QueryEscape(tok)
			}
			if _, err := get(p, &l); err != nil {
				return "", err
			}
			if l.NextPageToken == "" {
				break
			}
			tok = l.NextPageToken
		}
		return tok, nil
	}
	deepMsgs, err := deep("messages", n/inboxes)
	if err != nil {
		return nil, err
	}
	deepThreads, err := deep("threads", n/inboxes/threadLen)
	if err != nil {
		return nil, err
	}
	var first struct {
		Threads []struct {
			ThreadID string `json:"thread_id"`
		} `json:"threads"`
	}
	if _, err := get(inbox+"/threads?limit=50", &first); err != nil || len(first.Threads) == 0 {
		return nil, fmt.Errorf("first threads: %v", err)
	}
	cases := []struct{ name, path string }{
		{"list_messages_first_page", inbox + "/messages?limit=50"},
		{"list_messages_deep_page", inbox + "/messages?limit=50&page_token=" + url.QueryEscape(deepMsgs)},
		{"list_threads_first_page", inbox + "/threads?limit=50"},
		{"list_threads_deep_page", inbox + "/threads?limit=50&page_token=" + url.QueryEscape(deepThreads)},
		{"list_threads_org_wide", "/v0/threads?limit=50"},
		{"get_thread", inbox + "/threads/" + first.Threads[len(first.Threads)/2].ThreadID},
		// Search: one thread's words (rare), and a word in every subject.
		{"search_messages_rare", inbox + "/messages/search?limit=50&q=" + url.QueryEscape(fmt.Sprintf("order %d", (n/threadLen)/2))},
		{"search_messages_common", inbox + "/messages/search?limit=50&q=order"},
		{"search_threads_org_wide", "/v0/threads/search?limit=50&q=order"},
	}
	for _, c := range cases {
		for i := 0; i < 20; i++ { // warm up
			if _, err := get(c.path, nil); err != nil {
				return nil, err
			}
		}
		ds := make([]time.Duration, 0, requests)
		for i := 0; i < requests; i++ {
			d, err := get(c.path, nil)
			if err != nil {
				return nil, err
			}
			ds = append(ds, d)
		}
		res.Reads[c.name] = percentiles(ds)
		fmt.Fprintf(log, "envelopd-load api: %s median %.2f ms p99 %.2f ms\n", c.name, res.Reads[c.name].MedianMS, res.Reads[c.name].P99MS)
	}

	// Sends: clients concurrent, each message queued durably.
	res.SendClients, res.SendMessages = clients, sends
	var next atomic.Int64
	lat := make([]time.Duration, sends)
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	from := benchInbox(0)
	start := time.Now()
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= sends {
					return
				}
				body, _ := json.Marshal(map[string]any{"to": []string{fmt.Sprintf("customer%d@buyer.test", i%500)},
					"subject": fmt.Sprintf("Invoice %d", i), "text": fmt.Sprintf("Invoice %d: 3 items, total 42.00.\nThank you.", i)})
				req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v0/inboxes/"+from+"/messages/send", bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+key)
				t := time.Now()
				resp, err := client.Do(req)
				if err == nil {
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						err = fmt.Errorf("send: %d %s", resp.StatusCode, b)
					}
				}
				lat[i] = time.Since(t)
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return nil, firstErr
	}
	res.SendPerSec = float64(sends) / elapsed.Seconds()
	res.SendLatency = percentiles(lat)
	q, err := st.Queue(ctx, store.QueuePending)
	if err != nil {
		return nil, err
	}
	if len(q) < sends {
		return nil, errors.New("fewer messages queued than sent")
	}
	fmt.Fprintf(log, "envelopd-load api: send %.0f msg/s with %d clients\n", res.SendPerSec, clients)
	return res, nil
}
