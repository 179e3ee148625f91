package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/envelopd/envelopd/api"
	"github.com/envelopd/envelopd/authguard"
	"github.com/envelopd/envelopd/store"
)

// guarded is a handler of e's service behind a real authguard throttle on
// a frozen clock; slept records every delay the guard asked for.
type guarded struct {
	h     http.Handler
	mu    sync.Mutex
	slept []time.Duration
}

func (e *env) guarded(p authguard.Policy, keys api.KeyStore) *guarded {
	g := &guarded{}
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	th := authguard.NewThrottle(p)
	th.Now = func() time.Time { return now }
	guard := &authguard.Guard{Throttle: th, Sleep: func(_ context.Context, d time.Duration) error {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.slept = append(g.slept, d)
		return nil
	}}
	g.h = api.NewHandler(e.svc, api.HandlerOptions{Keys: keys, Tenants: api.NewTenants(e.st, api.TenantLimits{RefusalDelay: -1}), Throttle: authguard.KeyThrottle{Guard: guard, Service: "http", Mechanism: "bearer"}})
	return g
}

// get answers GET path with key from addr.
func (g *guarded) get(addr, key, path string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("GET", path, nil)
	r.RemoteAddr = addr
	if key != "" {
		r.Header.Set("Authorization", "Bearer "+key)
	}
	w := httptest.NewRecorder()
	g.h.ServeHTTP(w, r)
	return w
}

// TestStrangersDoNotSlowValidKeys: requests without a key, from many
// addresses, count against their addresses only; a valid key from any
// address (one of theirs included) is never made to wait.
func TestStrangersDoNotSlowValidKeys(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	g := e.guarded(authguard.Policy{}, nil)
	for i := range 30 {
		if w := g.get(fmt.Sprintf("198.51.100.%d:4000", i), "", "/v0/inboxes"); w.Code != 401 {
			t.Fatalf("keyless request %d: %d", i, w.Code)
		}
	}
	for i := range 20 {
		if w := g.get(fmt.Sprintf("203.0.113.%d:4000", i%3), e.key, "/v0/inboxes"); w.Code != 200 {
			t.Fatalf("valid key %d: %d %s", i, w.Code, w.Body)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.slept) != 0 {
		t.Errorf("valid keys waited %v", g.slept)
	}
}

// TestUnauthenticatedBudget: past the global budget of failures, requests
// without a key are refused at once (429) whatever their address, while
// a valid key goes on as before.
func TestUnauthenticatedBudget(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	g := e.guarded(authguard.Policy{GlobalFailures: 10}, nil)
	codes := map[int]int{}
	for i := range 25 {
		codes[g.get(fmt.Sprintf("198.51.100.%d:4000", i), "", "/v0/inboxes").Code]++
	}
	if codes[401] != 9 || codes[429] != 16 {
		t.Errorf("keyless answers %v, want 9×401 then 16×429 (the tenth spends the budget)", codes)
	}
	if w := g.get("198.51.100.200:4000", e.key, "/v0/inboxes"); w.Code != 200 {
		t.Errorf("valid key during the flood: %d", w.Code)
	}
}

// TestConcurrentGuessesCounted: wrong keys sent at once from one address
// are all counted: past the lockout threshold they are answered 429.
func TestConcurrentGuessesCounted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	// Every lookup waits until all 30 are in flight.
	b := &barrier{KeyStore: e.st, n: 30, all: make(chan struct{})}
	g := e.guarded(authguard.Policy{LockoutAfter: 6}, b)
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			key := fmt.Sprintf("ek_%012x_%s", i, strings.Repeat("A", 43))
			c := g.get("192.0.2.7:5000", key, "/v0/inboxes").Code
			mu.Lock()
			codes[c]++
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	if codes[401] != 5 || codes[429] != 25 {
		t.Errorf("answers %v, want 5×401 and 25×429", codes)
	}
	if w := g.get("192.0.2.7:5001", e.key, "/v0/inboxes"); w.Code != 429 || w.Header().Get("Retry-After") == "" {
		t.Errorf("locked-out address: %d Retry-After %q", w.Code, w.Header().Get("Retry-After"))
	}
	if w := g.get("192.0.2.8:5000", e.key, "/v0/inboxes"); w.Code != 200 {
		t.Errorf("another address: %d", w.Code)
	}
}

// barrier is a KeyStore whose lookups wait until n of them are in flight
// (or 5 s have passed).
type barrier struct {
	api.KeyStore
	mu  sync.Mutex
	n   int
	all chan struct{}
}

func (b *barrier) APIKeyByID(ctx context.Context, id string) (store.APIKey, error) {
	b.mu.Lock()
	if b.n--; b.n == 0 {
		close(b.all)
	}
	b.mu.Unlock()
	select {
	case <-b.all:
	case <-time.After(5 * time.Second):
	}
	return b.KeyStore.APIKeyByID(ctx, id)
}

// TestNoExistenceLeakThroughClientID: a client_id used for an inbox or a
// webhook a scoped key may not see answers that key 404, naming nothing.
func TestNoExistenceLeakThroughClientID(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	if c := e.do(e.key, "POST", "/v0/inboxes", map[string]string{"username": "bob", "domain": "shop.test", "client_id": "cid-bob"}, nil); c != 200 {
		t.Fatalf("create bob: %d", c)
	}
	e.createInbox("alice", "shop.test")
	if c := e.do(e.key, "POST", "/v0/webhooks", map[string]any{"url": "http://127.0.0.1:9/", "inbox_ids": []string{"bob@shop.test"}, "client_id": "wh-bob"}, nil); c != 200 {
		t.Fatalf("create bob's webhook: %d", c)
	}
	scoped := e.newKey([]string{"alice@shop.test"})
	for _, tc := range []struct {
		path string
		body map[string]any
	}{
		{"/v0/inboxes", map[string]any{"username": "alice", "domain": "shop.test", "client_id": "cid-bob"}},
		{"/v0/webhooks", map[string]any{"url": "http://127.0.0.1:9/", "client_id": "wh-bob"}},
		{"/v0/inboxes/alice@shop.test/webhooks", map[string]any{"url": "http://127.0.0.1:9/", "client_id": "wh-bob"}},
	} {
		var body map[string]any
		c := e.do(scoped, "POST", tc.path, tc.body, &body)
		if c != 404 || body["name"] != "NotFoundError" || strings.Contains(fmt.Sprint(body), "bob@") {
			t.Errorf("POST %s %v: %d %v, want a 404 naming nothing", tc.path, tc.body, c, body)
		}
	}
	// The unscoped key, which may see bob, is told which inbox it is.
	var body map[string]any
	if c := e.do(e.key, "POST", "/v0/inboxes", map[string]any{"username": "alice", "domain": "shop.test", "client_id": "cid-bob"}, &body); c != 409 || !strings.Contains(fmt.Sprint(body), "bob@shop.test") {
		t.Errorf("unscoped: %d %v, want 409 naming bob", c, body)
	}
}

// TestStructuralHeadersRefused: MIME structure and trace fields in a
// send's headers are refused (400) — one would turn the body into an
// attachment — whatever their case; X- fields pass.
func TestStructuralHeadersRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.createInbox("a", "shop.test")
	for _, h := range []string{"Content-Disposition", "content-id", "Content-Description", "Content-Type",
		"Content-Transfer-Encoding", "MIME-Version", "Content-Language", "Resent-From", "ARC-Seal", "Received"} {
		var body map[string]any
		c := e.do(e.key, "POST", "/v0/inboxes/a@shop.test/messages/send", map[string]any{"to": "x@buyer.test", "subject": "hi", "text": "x",
			"headers": map[string]string{h: "attachment; filename=evil.exe"}}, &body)
		if c != 400 || body["name"] != "ValidationError" {
			t.Errorf("headers %s: %d %v, want 400", h, c, body)
		}
	}
	if c := e.do(e.key, "POST", "/v0/inboxes/a@shop.test/messages/send", map[string]any{"to": "x@buyer.test", "subject": "hi", "text": "x",
		"headers": map[string]string{"X-Trace": "1"}}, nil); c != 200 {
		t.Errorf("X- header: %d, want 200", c)
	}
}

// TestFailedKeyAnswerHeld: the answer to a wrong key is held, the
// failure counted before it (here locking the address out at once) and
// the answer (429: this failure locked it out) written when the hold or
// the request ends, while a valid key from another address is served at
// once.
func TestFailedKeyAnswerHeld(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	th := authguard.NewThrottle(authguard.Policy{LockoutAfter: 1})
	tenants := api.NewTenants(e.st, api.TenantLimits{RefusalDelay: time.Hour})
	h := api.NewHandler(e.svc, api.HandlerOptions{Tenants: tenants,
		Throttle: authguard.KeyThrottle{Guard: &authguard.Guard{Throttle: th}, Service: "http", Mechanism: "bearer"}})
	ctx, cancel := context.WithCancel(context.Background())
	r := httptest.NewRequestWithContext(ctx, "GET", "/v0/inboxes", nil)
	r.RemoteAddr = "198.51.100.9:4000"
	r.Header.Set("Authorization", "Bearer ek_000000000001_"+strings.Repeat("A", 43))
	w := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		h.ServeHTTP(w, r)
		close(done)
	}()
	for tenants.Held() == 0 {
		select {
		case <-done:
			t.Fatalf("wrong key answered at once: %d", w.Code)
		case <-time.After(time.Millisecond):
		}
	}
	if th.LockedFor("198.51.100.9") == 0 {
		t.Fatal("the failure was not counted before its answer")
	}
	v := httptest.NewRequest("GET", "/v0/inboxes", nil)
	v.RemoteAddr = "198.51.100.10:4000"
	v.Header.Set("Authorization", "Bearer "+e.key)
	vw := httptest.NewRecorder()
	h.ServeHTTP(vw, v)
	if vw.Code != 200 {
		t.Errorf("valid key while a failure is held: %d %s", vw.Code, vw.Body)
	}
	select {
	case <-done:
		t.Fatal("the held answer ended by itself")
	default:
	}
	cancel()
	<-done
	if w.Code != 429 || tenants.Held() != 0 {
		t.Errorf("held answer: %d, %d still held; want 429, 0", w.Code, tenants.Held())
	}
}
