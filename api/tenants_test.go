package api_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/envelopd/envelopd/api"
)

// TestRevokedKeyWebhooks: the webhooks a key made are disabled when the
// key is revoked: nothing more is delivered to them, and the list shows
// their owner and state.
func TestRevokedKeyWebhooks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.createInbox("bob", "shop.test")
	hits := make(chan string, 10)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		hits <- string(b)
	}))
	defer recv.Close()
	bobKey := e.newKey([]string{"bob@shop.test"})
	var w webhookObj
	if c := e.do(bobKey, "POST", "/v0/webhooks", map[string]any{"url": recv.URL}, &w); c != 200 {
		t.Fatalf("create: %d", c)
	}
	id, _, _ := api.ParseKey(bobKey)
	if w.State != "enabled" || w.KeyID != id {
		t.Errorf("created: %+v", w)
	}
	if err := e.st.RevokeAPIKey(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	e.receive("after revocation", "bob@shop.test")
	if n, err := (&api.WebhookSender{Service: e.svc}).RunOnce(context.Background(), e.st); n != 0 || err != nil {
		t.Errorf("deliveries after revocation: %d %v", n, err)
	}
	var l struct {
		Webhooks []webhookObj `json:"webhooks"`
	}
	e.do(e.key, "GET", "/v0/webhooks", nil, &l)
	if len(l.Webhooks) != 1 || l.Webhooks[0].State != "disabled" || l.Webhooks[0].DisabledReason != "key_revoked" || l.Webhooks[0].KeyID != id {
		t.Errorf("list: %+v", l.Webhooks)
	}
	select {
	case h := <-hits:
		t.Errorf("delivered after revocation: %s", h)
	default:
	}
}

// TestWebhookLimits: a tenant's webhooks are bounded: event types (count
// and length), inbox ids, webhooks per key and per inbox.
func TestWebhookLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.createInbox("a", "shop.test")
	many := make([]string, 500)
	for i := range many {
		many[i] = fmt.Sprintf("message.x%d", i)
	}
	inboxes := make([]string, 11)
	for i := range inboxes {
		inboxes[i] = fmt.Sprintf("i%d@shop.test", i)
	}
	for _, tc := range []struct {
		name string
		body map[string]any
	}{
		{"500 event types", map[string]any{"url": "http://127.0.0.1:9/", "event_types": many}},
		{"17 event types", map[string]any{"url": "http://127.0.0.1:9/", "event_types": many[:17]}},
		{"a long event type", map[string]any{"url": "http://127.0.0.1:9/", "event_types": []string{"message." + strings.Repeat("x", 60)}}},
		{"11 inboxes", map[string]any{"url": "http://127.0.0.1:9/", "inbox_ids": inboxes}},
	} {
		var body map[string]any
		if c := e.do(e.key, "POST", "/v0/webhooks", tc.body, &body); c != 400 || body["name"] != "ValidationError" {
			t.Errorf("%s: %d %v, want 400", tc.name, c, body)
		}
	}
	// Duplicates count once.
	if c := e.do(e.key, "POST", "/v0/webhooks", map[string]any{"url": "http://127.0.0.1:9/", "event_types": []string{"message.received", "message.received"}}, nil); c != 200 {
		t.Errorf("duplicate event types: %d", c)
	}
	// 16 webhooks per inbox.
	for i := range 16 {
		c := e.do(e.key, "POST", "/v0/inboxes/a@shop.test/webhooks", map[string]any{"url": "http://127.0.0.1:9/"}, nil)
		if want := map[bool]int{true: 200, false: 400}[i < 16]; c != want {
			t.Fatalf("webhook %d of inbox a: %d, want %d", i+1, c, want)
		}
	}
	var body map[string]any
	if c := e.do(e.key, "POST", "/v0/inboxes/a@shop.test/webhooks", map[string]any{"url": "http://127.0.0.1:9/"}, &body); c != 400 || !strings.Contains(fmt.Sprint(body), "per inbox") {
		t.Errorf("17th webhook of an inbox: %d %v", c, body)
	}
	// 32 per key: 17 made, 15 more pass, the next does not.
	for i := range 15 {
		if c := e.do(e.key, "POST", "/v0/webhooks", map[string]any{"url": "http://127.0.0.1:9/", "event_types": []string{"message.sent"}}, nil); c != 200 {
			t.Fatalf("webhook %d of the key: %d", 18+i, c)
		}
	}
	if c := e.do(e.key, "POST", "/v0/webhooks", map[string]any{"url": "http://127.0.0.1:9/"}, &body); c != 400 || !strings.Contains(fmt.Sprint(body), "per API key") {
		t.Errorf("33rd webhook of a key: %d %v", c, body)
	}
}

// TestWebhookIsolation: nine webhooks of one tenant whose endpoint
// accepts and never answers do not delay another inbox's delivery: it is
// made while they are still hanging, and they hold only the tenant's
// share of the sender's slots (PerOwner, here 4).
func TestWebhookIsolation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.createInbox("slow", "shop.test")
	e.createInbox("other", "shop.test")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var mu sync.Mutex
	var conns []net.Conn
	accepted := make(chan struct{}, 100)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			accepted <- struct{}{}
		}
	}()
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	}()
	good := make(chan struct{}, 10)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { good <- struct{}{} }))
	defer recv.Close()
	slowKey := e.newKey([]string{"slow@shop.test"})
	for range 9 {
		if c := e.do(slowKey, "POST", "/v0/webhooks", map[string]any{"url": "http://" + ln.Addr().String() + "/"}, nil); c != 200 {
			t.Fatalf("create: %d", c)
		}
	}
	if c := e.do(e.key, "POST", "/v0/inboxes/other@shop.test/webhooks", map[string]any{"url": recv.URL}, nil); c != 200 {
		t.Fatalf("create: %d", c)
	}
	for i := range 3 {
		e.receive(fmt.Sprintf("slow %d", i), "slow@shop.test")
	}
	e.receive("other", "other@shop.test")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	// The hanging endpoints would hold their deliveries for a minute.
	go func() {
		done <- (&api.WebhookSender{Service: e.svc, Client: &http.Client{Timeout: time.Minute}, PerOwner: 4}).Run(ctx)
	}()
	defer func() { cancel(); <-done }()
	timeout := time.After(20 * time.Second)
	for range 4 {
		select {
		case <-accepted:
		case <-timeout:
			t.Fatal("the hanging endpoint was not tried by four webhooks")
		}
	}
	select {
	case <-good:
	case <-timeout:
		t.Fatal("the other inbox's delivery was not made while the hanging endpoint held its deliveries")
	}
	// Four in flight for the tenant, one per endpoint: its other
	// webhooks and events wait their turn.
	select {
	case <-accepted:
		t.Error("the tenant got more than its share of deliveries in flight")
	default:
	}
}

// tenantServer serves e's service with tenant limits l.
func (e *env) tenantServer(l api.TenantLimits) *env {
	srv := httptest.NewServer(api.NewHandler(e.svc, api.HandlerOptions{Tenants: api.NewTenants(e.st, l)}))
	e.t.Cleanup(srv.Close)
	c := *e
	c.srv = srv
	return &c
}

// TestRevokedKeyClosesWebsocket: an open websocket is closed (1008)
// within a second of its key's revocation; a new event is not sent.
func TestRevokedKeyClosesWebsocket(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.createInbox("a", "shop.test")
	key := e.newKey(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := e.subscribe(t, ctx, key, "", map[string]any{"event_types": []string{"message.received"}})
	id, _, _ := api.ParseKey(key)
	if err := e.st.RevokeAPIKey(ctx, id); err != nil {
		t.Fatal(err)
	}
	e.receive("after revocation", "a@shop.test")
	for {
		_, b, err := c.Read(ctx)
		if err != nil {
			if websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
				t.Errorf("closed with %v, want 1008 policy violation", err)
			}
			return
		}
		if strings.Contains(string(b), "after revocation") {
			// Sent before the watch saw the revocation (at most a
			// second): allowed, but the stream must still end.
			continue
		}
	}
}

// TestWebsocketsPerKey: one key may hold only so many websockets; another
// key is not affected, and a closed one frees its place.
func TestWebsocketsPerKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false).tenantServer(api.TenantLimits{Websockets: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c1 := e.subscribe(t, ctx, e.key, "", map[string]any{})
	e.subscribe(t, ctx, e.key, "", map[string]any{})
	if _, resp, err := e.dial(ctx, e.key, ""); err == nil || resp == nil || resp.StatusCode != 429 {
		t.Errorf("third websocket of a key: %v %v, want 429", resp, err)
	}
	e.subscribe(t, ctx, e.newKey(nil), "", map[string]any{})
	c1.Close(websocket.StatusNormalClosure, "")
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, resp, err := e.dial(ctx, e.key, "")
		if err == nil {
			c.CloseNow()
			break
		}
		if resp == nil || resp.StatusCode != 429 || time.Now().After(deadline) {
			t.Fatalf("after a close: %v %v", resp, err)
		}
		time.Sleep(5 * time.Millisecond) // the server sees the close
	}
}

// TestKeyRequestRate: a key past its bucket gets 429 with Retry-After;
// another key goes on.
func TestKeyRequestRate(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false).tenantServer(api.TenantLimits{RequestsPerSecond: 0.001, Burst: 5})
	for i := range 5 {
		if c := e.do(e.key, "GET", "/v0/inboxes", nil, nil); c != 200 {
			t.Fatalf("request %d: %d", i+1, c)
		}
	}
	var body map[string]any
	if c := e.do(e.key, "GET", "/v0/inboxes", nil, &body); c != 429 || body["name"] != "RateLimitError" {
		t.Errorf("sixth request: %d %v", c, body)
	}
	if c := e.do(e.newKey(nil), "GET", "/v0/inboxes", nil, nil); c != 200 {
		t.Errorf("another key: %d", c)
	}
}

// TestWebhookGiveUp: an event older than GiveUp is dropped without being
// posted again (a backlog behind a backed-off endpoint drains at once).
func TestWebhookGiveUp(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.createInbox("a", "shop.test")
	hits := make(chan struct{}, 10)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits <- struct{}{} }))
	defer recv.Close()
	if c := e.do(e.key, "POST", "/v0/inboxes/a@shop.test/webhooks", map[string]any{"url": recv.URL}, nil); c != 200 {
		t.Fatalf("create: %d", c)
	}
	e.receive("old", "a@shop.test")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if n, err := e.runOnce(ctx, &api.WebhookSender{Service: e.svc, GiveUp: time.Nanosecond}); n != 1 || err != nil {
		t.Fatalf("run: %d %v", n, err)
	}
	ds, err := e.st.WebhookDeliveries(ctx)
	if err != nil || len(ds) != 1 || ds[0].State != "dropped" {
		t.Errorf("deliveries: %+v %v", ds, err)
	}
	select {
	case <-hits:
		t.Error("an event past GiveUp was posted")
	default:
	}
}

// TestRevokedKeyDownloadURL: a download URL works as long as the key it
// was made for: revoking the key ends it (it would otherwise last an
// hour).
func TestRevokedKeyDownloadURL(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.createInbox("a", "shop.test")
	e.receive("download me", "a@shop.test")
	key := e.newKey(nil)
	var l struct {
		Messages []struct {
			MessageID string `json:"message_id"`
		} `json:"messages"`
	}
	e.do(key, "GET", "/v0/inboxes/a@shop.test/messages", nil, &l)
	if len(l.Messages) != 1 {
		t.Fatalf("messages: %+v", l)
	}
	var raw struct {
		DownloadURL string `json:"download_url"`
	}
	if c := e.do(key, "GET", "/v0/inboxes/a@shop.test/messages/"+url.PathEscape(l.Messages[0].MessageID)+"/raw", nil, &raw); c != 200 {
		t.Fatalf("raw: %d", c)
	}
	get := func() int {
		resp, err := http.Get(raw.DownloadURL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if c := get(); c != 200 {
		t.Fatalf("download: %d", c)
	}
	id, _, _ := api.ParseKey(key)
	if err := e.st.RevokeAPIKey(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	if c := get(); c != 404 {
		t.Errorf("download after revocation: %d, want 404", c)
	}
}
