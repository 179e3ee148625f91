package api_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/envelopd/envelopd/api"
	"github.com/envelopd/envelopd/dkim"
	"github.com/envelopd/envelopd/internal/pgtest"
	"github.com/envelopd/envelopd/mailout"
	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/store"
)

// fakeThrottle records failures and refuses when told to.
type fakeThrottle struct {
	mu     sync.Mutex
	fails  []string
	refuse bool
}

func (f *fakeThrottle) Allow(ip string, keyed bool) (time.Duration, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return 30 * time.Second, !f.refuse
}
func (f *fakeThrottle) Fail(ip, account string) (time.Duration, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fails = append(f.fails, ip+"/"+account)
	return 0, false
}
func (f *fakeThrottle) Succeed(string, string) {}

type env struct {
	t        testing.TB
	st       store.DB
	srv      *httptest.Server
	key      string
	throttle *fakeThrottle
	svc      *api.Service
}

// openStore opens a fresh store for one test: SQLite, or Postgres when
// the test runs on it (onPostgres); closed when the test ends.
func openStore(t testing.TB) store.DB {
	t.Helper()
	ctx := context.Background()
	var st store.DB
	var err error
	if onPostgres(t) {
		st, err = store.OpenPostgres(ctx, pgtest.Schema(t))
	} else {
		st, err = store.OpenSQLite(ctx, filepath.Join(t.TempDir(), "t.db"))
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func newEnv(t testing.TB, relay bool) *env {
	t.Helper()
	st := openStore(t)
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	signer := dkim.Signer{Domain: "shop.test", Selector: "s1", Key: priv}
	svc, err := api.NewService(api.Config{Store: st, Relay: relay, Domains: []string{"shop.test", "buyer.test"},
		Mailer: func(string) *mailout.Mailer { return &mailout.Mailer{Signers: []dkim.Signer{signer}} }})
	if err != nil {
		t.Fatal(err)
	}
	th := &fakeThrottle{}
	// The per-key rate is tested on its own (TestKeyRequestRate); the
	// benchmarks send as fast as they can.
	srv := httptest.NewServer(api.NewHandler(svc, api.HandlerOptions{Throttle: th, MaxBody: 1 << 20,
		Tenants: api.NewTenants(st, api.TenantLimits{RequestsPerSecond: 1e9, Burst: 1e9})}))
	t.Cleanup(srv.Close)
	e := &env{t: t, st: st, srv: srv, throttle: th, svc: svc}
	e.key = e.newKey(nil)
	return e
}

func (e *env) newKey(inboxes []string) string {
	key, k, err := api.NewKey(inboxes, "", time.Now())
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.st.CreateAPIKey(context.Background(), k); err != nil {
		e.t.Fatal(err)
	}
	return key
}

// messages lists the store's messages, waiting (at most 10 s) until there
// are want of them: on Postgres a listing (a cursor's) shows a committed
// message only once every transaction older than it has ended, and other
// tests' transactions run on the same server.
func (e *env) messages(f store.Filter, want int) []store.Message {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ms, err := e.st.Messages(context.Background(), f)
		if err != nil {
			e.t.Fatal(err)
		}
		if len(ms) >= want || time.Now().After(deadline) {
			return ms
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// do sends a request and decodes a JSON answer into out (when not nil).
func (e *env) do(key, method, path string, body any, out any) int {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, e.srv.URL+path, rd)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			e.t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, data, err)
		}
	}
	if resp.StatusCode == 500 {
		e.t.Errorf("%s %s: %d %s", method, path, resp.StatusCode, data)
	}
	return resp.StatusCode
}

func (e *env) createInbox(user, domain string) {
	e.t.Helper()
	if c := e.do(e.key, "POST", "/v0/inboxes", map[string]string{"username": user, "domain": domain}, nil); c != 200 {
		e.t.Fatalf("create inbox %s@%s: %d", user, domain, c)
	}
}

// ingest stores n received messages for rcpt, each its own thread.
func (e *env) ingest(n int, rcpt string) {
	e.t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 64)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			mid := fmt.Sprintf("m%05d@buyer.test", i)
			raw := fmt.Sprintf("From: b@buyer.test\r\nTo: %s\r\nSubject: hello %d\r\nMessage-ID: <%s>\r\n\r\nbody %d\r\n", rcpt, i, mid, i)
			_, err := e.st.Ingest(context.Background(), &store.Incoming{Direction: store.DirIn, Raw: []byte(raw), MessageID: mid,
				Sender: "b@buyer.test", Recipients: []string{rcpt}, Subject: fmt.Sprintf("hello %d", i), Status: store.StatusAccepted,
				ReceivedAt: time.Unix(1700000000+int64(i), 0)})
			errs <- err
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			e.t.Fatal(err)
		}
	}
}

func TestAuth(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	revoked := e.newKey(nil)
	id, _, _ := api.ParseKey(revoked)
	if err := e.st.RevokeAPIKey(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	wrongSecret := e.key[:len(e.key)-4] + "AAAA"
	for _, tc := range []struct {
		name, key string
		want      int
	}{
		{"none", "", 401},
		{"malformed", "hello", 401},
		{"unknown id", "ek_000000000000_" + strings.Repeat("A", 43), 401},
		{"wrong secret", wrongSecret, 401},
		{"revoked", revoked, 401},
		{"good", e.key, 200},
	} {
		var body map[string]any
		if got := e.do(tc.key, "GET", "/v0/inboxes", nil, &body); got != tc.want {
			t.Errorf("%s: status %d, want %d (%v)", tc.name, got, tc.want, body)
		}
		if tc.want == 401 && body["name"] != "UnauthorizedError" {
			t.Errorf("%s: body %v", tc.name, body)
		}
	}
	e.throttle.mu.Lock()
	fails := len(e.throttle.fails)
	e.throttle.refuse = true
	e.throttle.mu.Unlock()
	if fails != 5 {
		t.Errorf("throttle saw %d failures, want 5", fails)
	}
	req, _ := http.NewRequest("GET", e.srv.URL+"/v0/inboxes", nil)
	req.Header.Set("Authorization", "Bearer "+e.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "30" {
		t.Errorf("throttled: %d Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

func TestScopedKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.createInbox("a", "shop.test")
	e.createInbox("b", "shop.test")
	e.ingest(3, "b@shop.test")
	scoped := e.newKey([]string{"a@shop.test"})
	var l struct {
		Count   int `json:"count"`
		Inboxes []struct {
			InboxID string `json:"inbox_id"`
		} `json:"inboxes"`
	}
	e.do(scoped, "GET", "/v0/inboxes", nil, &l)
	if l.Count != 1 || l.Inboxes[0].InboxID != "a@shop.test" {
		t.Errorf("scoped list: %+v", l)
	}
	for _, p := range []string{"/v0/inboxes/b@shop.test", "/v0/inboxes/b@shop.test/messages", "/v0/inboxes/b@shop.test/threads",
		"/v0/inboxes/b@shop.test/messages/" + url.PathEscape("<m00001@buyer.test>"), "/v0/inboxes/nobody@shop.test"} {
		var body map[string]any
		if got := e.do(scoped, "GET", p, nil, &body); got != 404 || body["name"] != "NotFoundError" {
			t.Errorf("GET %s with a scoped key: %d %v, want 404", p, got, body)
		}
	}
	var th struct {
		Count int `json:"count"`
	}
	e.do(scoped, "GET", "/v0/threads", nil, &th)
	if th.Count != 0 {
		t.Errorf("org-wide threads with a scoped key: %d, want 0", th.Count)
	}
	e.do(e.key, "GET", "/v0/threads", nil, &th)
	if th.Count != 3 {
		t.Errorf("org-wide threads: %d, want 3", th.Count)
	}
	if got := e.do(scoped, "POST", "/v0/inboxes/b@shop.test/messages/send", map[string]any{"to": "x@y.test", "subject": "hi", "text": "x"}, nil); got != 404 {
		t.Errorf("send from another inbox with a scoped key: %d, want 404", got)
	}
}

// TestPaging walks thousands of messages and threads page by page, both
// ways: every message exactly once, in order.
func TestPaging(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	const n = 2500
	e.ingest(n, "shop@shop.test")
	for _, asc := range []bool{false, true} {
		seen := map[string]bool{}
		var last int64 = -1
		tok, pages := "", 0
		for {
			q := url.Values{"limit": {"300"}, "ascending": {fmt.Sprint(asc)}}
			if tok != "" {
				q.Set("page_token", tok)
			}
			var l struct {
				Count         int    `json:"count"`
				NextPageToken string `json:"next_page_token"`
				Messages      []struct {
					MessageID string         `json:"message_id"`
					Envelopay map[string]any `json:"envelopay"`
				} `json:"messages"`
			}
			if c := e.do(e.key, "GET", "/v0/inboxes/shop@shop.test/messages?"+q.Encode(), nil, &l); c != 200 {
				t.Fatalf("page %d: %d", pages, c)
			}
			pages++
			if l.Count != len(l.Messages) {
				t.Fatalf("count %d, %d messages", l.Count, len(l.Messages))
			}
			for _, m := range l.Messages {
				if seen[m.MessageID] {
					t.Fatalf("%s twice", m.MessageID)
				}
				seen[m.MessageID] = true
				id := int64(m.Envelopay["id"].(float64))
				if last >= 0 && (asc && id <= last || !asc && id >= last) {
					t.Fatalf("ascending=%v: id %d after %d", asc, id, last)
				}
				last = id
			}
			if l.NextPageToken == "" {
				break
			}
			tok = l.NextPageToken
		}
		if len(seen) != n || pages != (n+299)/300 {
			t.Errorf("ascending=%v: %d messages in %d pages, want %d in %d", asc, len(seen), pages, n, (n+299)/300)
		}
	}
	seen := map[string]bool{}
	tok := ""
	for {
		p := "/v0/inboxes/shop@shop.test/threads?limit=700"
		if tok != "" {
			p += "&page_token=" + tok
		}
		var l struct {
			NextPageToken string `json:"next_page_token"`
			Threads       []struct {
				ThreadID     string `json:"thread_id"`
				MessageCount int    `json:"message_count"`
			} `json:"threads"`
		}
		e.do(e.key, "GET", p, nil, &l)
		for _, th := range l.Threads {
			if seen[th.ThreadID] || th.MessageCount != 1 {
				t.Fatalf("thread %s: twice or %d messages", th.ThreadID, th.MessageCount)
			}
			seen[th.ThreadID] = true
		}
		if l.NextPageToken == "" {
			break
		}
		tok = l.NextPageToken
	}
	if len(seen) != n {
		t.Errorf("%d threads, want %d", len(seen), n)
	}
	// before/after bound received_at: messages 100..199.
	var l struct {
		Count int `json:"count"`
	}
	q := url.Values{"after": {time.Unix(1700000100, 0).UTC().Format(time.RFC3339)}, "before": {time.Unix(1700000200, 0).UTC().Format(time.RFC3339)}, "limit": {"1000"}}
	e.do(e.key, "GET", "/v0/inboxes/shop@shop.test/messages?"+q.Encode(), nil, &l)
	if l.Count != 100 {
		t.Errorf("after/before: %d messages, want 100", l.Count)
	}
}

func TestValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.createInbox("shop", "shop.test")
	e.ingest(1, "shop@shop.test")
	mid := url.PathEscape("<m00000@buyer.test>")
	big := `{"to":"a@b.test","text":"` + strings.Repeat("x", 2<<20) + `"}`
	for _, tc := range []struct {
		name, method, path string
		body               any
		want               int
		wantName           string
	}{
		{"bad json", "POST", "/v0/inboxes", `{"username":`, 400, "ValidationError"},
		{"not an object", "POST", "/v0/inboxes", `[1]`, 400, "ValidationError"},
		{"wrong type", "POST", "/v0/inboxes/shop@shop.test/messages/send", `{"to":5}`, 400, "ValidationError"},
		{"wrong type text", "POST", "/v0/inboxes/shop@shop.test/messages/send", `{"to":"a@b.test","text":[1]}`, 400, "ValidationError"},
		{"no recipient", "POST", "/v0/inboxes/shop@shop.test/messages/send", `{"subject":"x"}`, 400, "ValidationError"},
		{"bad address", "POST", "/v0/inboxes/shop@shop.test/messages/send", `{"to":"not an address"}`, 400, "ValidationError"},
		{"reserved header", "POST", "/v0/inboxes/shop@shop.test/messages/send", `{"to":"a@b.test","headers":{"From":"x@y.test"}}`, 400, "ValidationError"},
		{"too large", "POST", "/v0/inboxes/shop@shop.test/messages/send", big, 413, "PayloadTooLargeError"},
		{"bad username", "POST", "/v0/inboxes", `{"username":"a b"}`, 400, "ValidationError"},
		{"limit 0", "GET", "/v0/inboxes/shop@shop.test/messages?limit=0", nil, 400, "ValidationError"},
		{"limit word", "GET", "/v0/inboxes/shop@shop.test/messages?limit=ten", nil, 400, "ValidationError"},
		{"bad token", "GET", "/v0/inboxes/shop@shop.test/messages?page_token=!!!", nil, 400, "ValidationError"},
		{"forged token", "GET", "/v0/inboxes/shop@shop.test/messages?page_token=eyJpIjotNX0", nil, 400, "ValidationError"},
		{"bad before", "GET", "/v0/inboxes/shop@shop.test/threads?before=yesterday", nil, 400, "ValidationError"},
		{"bad labels", "GET", "/v0/inboxes/shop@shop.test/messages?labels=%5B1%5D", nil, 400, "ValidationError"},
		{"unknown message", "GET", "/v0/inboxes/shop@shop.test/messages/" + url.PathEscape("<nope@x>"), nil, 404, "NotFoundError"},
		{"unknown thread", "GET", "/v0/threads/t_0000", nil, 404, "NotFoundError"},
		{"unknown inbox", "GET", "/v0/inboxes/zz@shop.test/threads", nil, 404, "NotFoundError"},
		{"unknown attachment", "GET", "/v0/inboxes/shop@shop.test/messages/" + mid + "/attachments/att_1_9", nil, 404, "NotFoundError"},
		{"reserved label", "PATCH", "/v0/inboxes/shop@shop.test/messages/" + mid, `{"add_labels":["sent"]}`, 400, "ValidationError"},
		{"existing inbox", "POST", "/v0/inboxes", `{"username":"shop"}`, 409, "AlreadyExistsError"},
		{"foreign domain", "POST", "/v0/inboxes", `{"username":"x","domain":"Bad_domain"}`, 400, "ValidationError"},
		{"not implemented", "GET", "/v0/domains", nil, 501, "NotImplementedError"},
		{"search without q", "GET", "/v0/inboxes/shop@shop.test/messages/search", nil, 400, "ValidationError"},
		{"not implemented: sign-up", "POST", "/v0/agent/sign-up", `{}`, 501, "NotImplementedError"},
		{"bad download", "GET", "/v0/download/abc.def", nil, 404, "NotFoundError"},
	} {
		var body map[string]any
		got := e.do(e.key, tc.method, tc.path, tc.body, &body)
		if got != tc.want || body["name"] != tc.wantName {
			t.Errorf("%s: %d %v, want %d %s", tc.name, got, body, tc.want, tc.wantName)
		}
	}
	// client_id makes create idempotent.
	var a, b map[string]any
	e.do(e.key, "POST", "/v0/inboxes", `{"username":"agent","client_id":"c1"}`, &a)
	if c := e.do(e.key, "POST", "/v0/inboxes", `{"username":"agent","client_id":"c1"}`, &b); c != 200 || a["inbox_id"] != b["inbox_id"] || a["created_at"] != b["created_at"] {
		t.Errorf("client_id repeat: %d %v %v", c, a, b)
	}
	// Labels: add, filter, remove.
	var upd map[string]any
	if c := e.do(e.key, "PATCH", "/v0/inboxes/shop@shop.test/messages/"+mid, `{"add_labels":["paid","vip"]}`, &upd); c != 200 {
		t.Fatalf("labels: %d %v", c, upd)
	}
	var l struct {
		Count int `json:"count"`
	}
	e.do(e.key, "GET", "/v0/inboxes/shop@shop.test/messages?labels="+url.QueryEscape(`["paid","received","accepted"]`), nil, &l)
	if l.Count != 1 {
		t.Errorf("label filter: %d, want 1", l.Count)
	}
	e.do(e.key, "GET", "/v0/inboxes/shop@shop.test/messages?labels=sent", nil, &l)
	if l.Count != 0 {
		t.Errorf("label sent: %d, want 0", l.Count)
	}
	// Delete hides the message from the inbox; the stored row stays.
	if c := e.do(e.key, "DELETE", "/v0/inboxes/shop@shop.test/messages/"+mid, nil, nil); c != 204 {
		t.Errorf("delete: %d", c)
	}
	if c := e.do(e.key, "GET", "/v0/inboxes/shop@shop.test/messages/"+mid, nil, nil); c != 404 {
		t.Errorf("deleted message: %d, want 404", c)
	}
	if ms := e.messages(store.Filter{}, 1); len(ms) != 1 {
		t.Errorf("stored messages after delete: %d, want 1", len(ms))
	}
}

// TestSendAndReply: send queues durably, signs, stores the copy in its
// thread; an invalid Envelopay message is refused with its codes unless
// forced; a reply is threaded.
func TestSendAndReply(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.createInbox("shop", "shop.test")
	ctx := context.Background()
	var sent struct {
		MessageID string `json:"message_id"`
		ThreadID  string `json:"thread_id"`
		QueueID   int64  `json:"queue_id"`
		Message   string `json:"message"`
	}
	if c := e.do(e.key, "POST", "/v0/inboxes/shop@shop.test/messages/send",
		map[string]any{"to": []string{"buyer@buyer.test"}, "subject": "METHODS", "labels": []string{"quoted"}, "text": `{"v":"0.2.0","type":"methods","id":"met_1","rails":[{"chain":"solana","token":"SOL","wallet":"6dL6n77jJFWq4bu3cQp57H8rMUPEXu7uYN1XApPxpUif","price":"500000000"}]}`, "headers": map[string]string{"X-Agent": "t"}}, &sent); c != 200 {
		t.Fatalf("send: %d %s", c, sent.Message)
	}
	q, err := e.st.Queue(ctx, store.QueuePending)
	if err != nil || len(q) != 1 || q[0].ID != sent.QueueID || q[0].Recipients[0].Rcpt != "buyer@buyer.test" {
		t.Fatalf("queue: %+v %v", q, err)
	}
	var th struct {
		MessageCount int `json:"message_count"`
		Messages     []struct {
			MessageID string            `json:"message_id"`
			Labels    []string          `json:"labels"`
			Headers   map[string]string `json:"headers"`
			Envelopay struct {
				Type   string `json:"type"`
				Status string `json:"status"`
			} `json:"envelopay"`
		} `json:"messages"`
	}
	if c := e.do(e.key, "GET", "/v0/inboxes/shop@shop.test/threads/"+sent.ThreadID, nil, &th); c != 200 {
		t.Fatalf("thread: %d", c)
	}
	if th.MessageCount != 1 || th.Messages[0].MessageID != sent.MessageID || th.Messages[0].Labels[0] != "sent" || !slices.Contains(th.Messages[0].Labels, "quoted") ||
		th.Messages[0].Envelopay.Type != "methods" || th.Messages[0].Headers["X-Agent"] != "t" || th.Messages[0].Headers["Dkim-Signature"] == "" {
		t.Errorf("thread after send: %+v", th)
	}
	// The raw bytes: exactly the queued (signed) ones.
	var raw struct {
		DownloadURL string `json:"download_url"`
		Size        int    `json:"size"`
	}
	e.do(e.key, "GET", "/v0/inboxes/shop@shop.test/messages/"+url.PathEscape(sent.MessageID)+"/raw", nil, &raw)
	resp, err := http.Get(raw.DownloadURL)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	due, _ := e.st.ClaimDue(ctx, time.Now().Add(time.Hour), time.Minute, 10)
	if len(due) != 1 || !bytes.Equal(got, due[0].Raw) || raw.Size != len(got) || !bytes.HasPrefix(got, []byte("DKIM-Signature:")) {
		t.Errorf("raw download: %d bytes, size %d, queued %d", len(got), raw.Size, len(due))
	}
	// An invalid Envelopay message: 400 naming the codes; force sends it.
	var verr struct {
		Name   string `json:"name"`
		Errors []struct {
			Code string `json:"code"`
		} `json:"errors"`
	}
	bad := map[string]any{"to": "buyer@buyer.test", "subject": "FULFILL", "text": `{"v":"0.2.0","type":"fulfill","id":"ful_1","order_ref":"ord_nope","result":{"summary":"x"}}`}
	if c := e.do(e.key, "POST", "/v0/inboxes/shop@shop.test/messages/send", bad, &verr); c != 400 || verr.Name != "ValidationError" || len(verr.Errors) == 0 || verr.Errors[0].Code != "unknown_ref" {
		t.Errorf("invalid outbound: %d %+v", c, verr)
	}
	bad["force"] = true
	if c := e.do(e.key, "POST", "/v0/inboxes/shop@shop.test/messages/send", bad, nil); c != 200 {
		t.Errorf("forced: %d", c)
	}
	// Reply to a received message: threaded, addressed to its sender.
	e.ingest(1, "shop@shop.test")
	var rep struct {
		MessageID string `json:"message_id"`
		ThreadID  string `json:"thread_id"`
	}
	orig := url.PathEscape("<m00000@BUYER.test>") // Message-ID domains are case-insensitive
	if c := e.do(e.key, "POST", "/v0/inboxes/shop@shop.test/messages/"+orig+"/reply", map[string]any{"text": "thanks"}, &rep); c != 200 {
		t.Fatalf("reply: %d", c)
	}
	var m struct {
		ThreadID  string   `json:"thread_id"`
		InReplyTo string   `json:"in_reply_to"`
		To        []string `json:"to"`
		Subject   string   `json:"subject"`
		Text      string   `json:"text"`
	}
	e.do(e.key, "GET", "/v0/inboxes/shop@shop.test/messages/"+url.PathEscape(rep.MessageID), nil, &m)
	var o struct {
		ThreadID string `json:"thread_id"`
	}
	e.do(e.key, "GET", "/v0/inboxes/shop@shop.test/messages/"+orig, nil, &o)
	if m.ThreadID != o.ThreadID || rep.ThreadID != o.ThreadID || m.InReplyTo != "<m00000@buyer.test>" ||
		len(m.To) != 1 || m.To[0] != "b@buyer.test" || m.Subject != "Re: hello 0" || strings.TrimSpace(m.Text) != "thanks" {
		t.Errorf("reply: %+v (original thread %s, answer %+v)", m, o.ThreadID, rep)
	}
	// Forward attaches the original.
	var fw struct {
		MessageID string `json:"message_id"`
	}
	if c := e.do(e.key, "POST", "/v0/inboxes/shop@shop.test/messages/"+orig+"/forward", map[string]any{"to": "c@else.test"}, &fw); c != 200 {
		t.Fatalf("forward: %d", c)
	}
	var fm struct {
		Subject     string `json:"subject"`
		Attachments []struct {
			AttachmentID string `json:"attachment_id"`
			ContentType  string `json:"content_type"`
		} `json:"attachments"`
	}
	e.do(e.key, "GET", "/v0/inboxes/shop@shop.test/messages/"+url.PathEscape(fw.MessageID), nil, &fm)
	if fm.Subject != "Fwd: hello 0" || len(fm.Attachments) != 1 || fm.Attachments[0].ContentType != "message/rfc822" {
		t.Fatalf("forwarded: %+v", fm)
	}
	var att struct {
		DownloadURL string `json:"download_url"`
		Size        int    `json:"size"`
	}
	e.do(e.key, "GET", "/v0/inboxes/shop@shop.test/messages/"+url.PathEscape(fw.MessageID)+"/attachments/"+fm.Attachments[0].AttachmentID, nil, &att)
	resp, err = http.Get(att.DownloadURL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(body, []byte("Message-ID: <m00000@buyer.test>")) || att.Size != len(body) {
		t.Errorf("attachment download: %d bytes (size %d): %.80q", len(body), att.Size, body)
	}
}

// TestThreadsUpdateDelete: thread labels and delete (a view change: the
// stored messages stay), org-wide and per inbox.
func TestThreadsUpdateDelete(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.ingest(3, "shop@shop.test")
	var l struct {
		Threads []struct {
			ThreadID string `json:"thread_id"`
		} `json:"threads"`
	}
	e.do(e.key, "GET", "/v0/inboxes/shop@shop.test/threads", nil, &l)
	if len(l.Threads) != 3 {
		t.Fatalf("%d threads", len(l.Threads))
	}
	tid := l.Threads[0].ThreadID
	var upd struct {
		Labels []string `json:"labels"`
	}
	if c := e.do(e.key, "PATCH", "/v0/threads/"+tid, `{"add_labels":"todo"}`, &upd); c != 200 || !slices.Contains(upd.Labels, "todo") {
		t.Errorf("thread labels: %d %v", c, upd)
	}
	var f struct {
		Count int `json:"count"`
	}
	e.do(e.key, "GET", "/v0/threads?labels=todo", nil, &f)
	if f.Count != 1 {
		t.Errorf("threads labelled todo: %d, want 1", f.Count)
	}
	if c := e.do(e.key, "DELETE", "/v0/inboxes/shop@shop.test/threads/"+tid, nil, nil); c != 204 {
		t.Errorf("delete thread: %d", c)
	}
	if c := e.do(e.key, "GET", "/v0/threads/"+tid, nil, nil); c != 404 {
		t.Errorf("deleted thread: %d, want 404", c)
	}
	if c := e.do(e.key, "DELETE", "/v0/threads/"+tid, nil, nil); c != 404 {
		t.Errorf("deleting twice: %d, want 404", c)
	}
	e.do(e.key, "GET", "/v0/threads", nil, &f)
	if f.Count != 2 {
		t.Errorf("threads after delete: %d, want 2", f.Count)
	}
	if c := e.do(e.key, "DELETE", "/v0/inboxes/shop@shop.test", nil, nil); c != 204 {
		t.Errorf("delete inbox: %d", c)
	}
	if c := e.do(e.key, "GET", "/v0/inboxes/shop@shop.test", nil, nil); c != 404 {
		t.Errorf("deleted inbox: %d, want 404", c)
	}
	if ms := e.messages(store.Filter{}, 3); len(ms) != 3 {
		t.Errorf("stored messages: %d, want 3", len(ms))
	}
}

// TestRelayLocal: in relay mode an inbox is a mailbox at a local domain.
func TestRelayLocal(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	var body map[string]any
	if c := e.do(e.key, "POST", "/v0/inboxes", `{"username":"x","domain":"elsewhere.test"}`, &body); c != 400 {
		t.Errorf("foreign domain in relay mode: %d %v", c, body)
	}
	e.createInbox("shop", "")
	mbs, err := e.st.ListMailboxes(context.Background())
	if err != nil || len(mbs) != 1 || mbs[0].Address != "shop@shop.test" {
		t.Errorf("mailboxes: %+v %v", mbs, err)
	}
	// A mailbox made by `envelopd mailbox add` is an inbox too.
	if err := e.st.SetMailboxPassword(context.Background(), "agent@buyer.test", "x"); err != nil {
		t.Fatal(err)
	}
	if c := e.do(e.key, "GET", "/v0/inboxes/agent@buyer.test", nil, nil); c != 200 {
		t.Errorf("mailbox as inbox: %d", c)
	}
	var sent struct {
		ThreadID string `json:"thread_id"`
	}
	e.do(e.key, "POST", "/v0/inboxes/shop@shop.test/messages/send", `{"to":"b@buyer.test","subject":"hi","text":"x"}`, &sent)
	ms := e.messages(store.Filter{Mailbox: "shop@shop.test"}, 1)
	if len(ms) != 1 || ms[0].Direction != store.DirOut || ms[0].ThreadID != sent.ThreadID {
		t.Errorf("sent copy in the mailbox: %+v", ms)
	}
}

// TestListFilters: the web inbox's extension filters on message and
// thread lists (type, sender, error, q), answered by the store's
// queries (q: the FTS5 index over subject and note).
func TestListFilters(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.createInbox("shop", "shop.test")
	put := func(i int, sender, typ, subject, note, errs string) {
		mid := fmt.Sprintf("f%d@buyer.test", i)
		raw := fmt.Sprintf("From: %s\r\nTo: shop@shop.test\r\nSubject: %s\r\nMessage-ID: <%s>\r\n\r\nx\r\n", sender, subject, mid)
		in := &store.Incoming{Direction: store.DirIn, Raw: []byte(raw), MessageID: mid, Sender: sender,
			Recipients: []string{"shop@shop.test"}, Subject: subject, Type: typ, Status: store.StatusAccepted,
			ReceivedAt: time.Unix(1700000000+int64(i), 0)}
		if note != "" {
			in.Result = json.RawMessage(fmt.Sprintf(`{"type":%q,"note":%q}`, typ, note))
		}
		if errs != "" {
			in.Errors = append(in.Errors, protocolsProblem(errs))
			in.Status = store.StatusQuarantined
		}
		if _, err := e.st.Ingest(context.Background(), in); err != nil {
			t.Fatal(err)
		}
	}
	put(1, "a@buyer.test", "which", "WHICH | what do you sell", "what do you sell", "")
	put(2, "b@buyer.test", "order", "ORDER | two crêpes", "two crêpes please", "")
	put(3, "a@buyer.test", "accept", "ACCEPT | paid", "30 USDC sent", "amount_mismatch")
	put(4, "c@buyer.test", "", "plain hello", "", "")
	// A replayed proof: stored accepted, then made duplicate in the same
	// transaction (an UPDATE: the tags follow it).
	for i, eid := range []string{"pay_1", "pay_2"} {
		mid := fmt.Sprintf("p%d@buyer.test", i)
		raw := fmt.Sprintf("From: d@buyer.test\r\nTo: shop@shop.test\r\nSubject: PAY\r\nMessage-ID: <%s>\r\n\r\nx\r\n", mid)
		if _, err := e.st.Ingest(context.Background(), &store.Incoming{Direction: store.DirIn, Raw: []byte(raw), MessageID: mid,
			Sender: "d@buyer.test", Recipients: []string{"shop@shop.test"}, Subject: "PAY " + eid, Type: "pay", EnvelopayID: eid,
			ProofFingerprint: "proof-1", Status: store.StatusAccepted, ReceivedAt: time.Unix(1700000100+int64(i), 0)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		query string
		want  []string // subjects, newest first
	}{
		{"type=order", []string{"ORDER | two crêpes"}},
		{"type=ORDER", []string{"ORDER | two crêpes"}},
		{"sender=a@buyer.test", []string{"ACCEPT | paid", "WHICH | what do you sell"}},
		{"error=amount_mismatch", []string{"ACCEPT | paid"}},
		{"error=amount", nil},
		{"q=crepes", []string{"ORDER | two crêpes"}},
		{"q=USDC", []string{"ACCEPT | paid"}},
		{"q=sel", []string{"WHICH | what do you sell"}},
		{"q=hello+plain", []string{"plain hello"}},
		{"q=" + url.QueryEscape(`"sell" (*`), []string{"WHICH | what do you sell"}},
		{"q=" + url.QueryEscape(`***`), []string{"PAY pay_2", "PAY pay_1", "plain hello", "ACCEPT | paid", "ORDER | two crêpes", "WHICH | what do you sell"}},
		{"q=nothing", nil},
		{"labels=quarantined&sender=a@buyer.test", []string{"ACCEPT | paid"}},
		{"labels=duplicate", []string{"PAY pay_2"}},
		{"error=duplicate_proof", []string{"PAY pay_2"}},
		{"type=pay&labels=accepted", []string{"PAY pay_1"}},
		{"sender=d@buyer.test&labels=accepted&labels=received", []string{"PAY pay_1"}},
	} {
		for _, kind := range []string{"messages", "threads"} {
			var l struct {
				Messages []struct {
					Subject string `json:"subject"`
				} `json:"messages"`
				Threads []struct {
					Subject string `json:"subject"`
				} `json:"threads"`
			}
			if c := e.do(e.key, "GET", "/v0/inboxes/shop@shop.test/"+kind+"?"+tc.query, nil, &l); c != 200 {
				t.Fatalf("%s?%s: %d", kind, tc.query, c)
			}
			var got []string
			for _, m := range l.Messages {
				got = append(got, m.Subject)
			}
			for _, m := range l.Threads {
				got = append(got, m.Subject)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("%s?%s: %q, want %q", kind, tc.query, got, tc.want)
			}
		}
	}
	// A common value (over the store's rare-tag limit) is found by walking
	// the inbox, a rare one from its tag: both give the same pages.
	e.ingest(2100, "shop@shop.test") // from b@buyer.test, the newest
	subjects := func(query string) []string {
		var l struct {
			Messages []struct {
				Subject string `json:"subject"`
			} `json:"messages"`
		}
		e.do(e.key, "GET", "/v0/inboxes/shop@shop.test/messages?"+query, nil, &l)
		var got []string
		for _, m := range l.Messages {
			got = append(got, m.Subject)
		}
		return got
	}
	newest := subjects("limit=3")
	if len(newest) != 3 || !strings.HasPrefix(newest[0], "hello ") {
		t.Fatalf("newest: %q", newest)
	}
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"sender=b@buyer.test&limit=3", newest},
		{"labels=accepted&labels=received&limit=2", newest[:2]},
		{"labels=duplicate", []string{"PAY pay_2"}},
		{"type=pay", []string{"PAY pay_2", "PAY pay_1"}},
		{"labels=accepted&type=pay", []string{"PAY pay_1"}},
	} {
		if got := subjects(tc.query); !slices.Equal(got, tc.want) {
			t.Errorf("messages?%s: %q, want %q", tc.query, got, tc.want)
		}
	}
	if c := e.do(e.key, "GET", "/v0/inboxes/shop@shop.test/messages?q="+strings.Repeat("x", 201), nil, nil); c != 400 {
		t.Errorf("q of 201 characters: %d, want 400", c)
	}
}

func protocolsProblem(code string) protocols.Problem {
	return protocols.New(protocols.Code(code), "", "test")
}
