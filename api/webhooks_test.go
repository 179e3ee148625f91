package api_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/envelopd/envelopd/api"
)

type webhookObj struct {
	WebhookID  string   `json:"webhook_id"`
	URL        string   `json:"url"`
	EventTypes []string `json:"event_types"`
	InboxIDs   []string `json:"inbox_ids"`
	Secret     string   `json:"secret"`
	Enabled    bool     `json:"enabled"`
	ClientID   string   `json:"client_id"`
	Name       string   `json:"name"`
	// Owner and state.
	KeyID          string `json:"key_id"`
	State          string `json:"state"`
	DisabledReason string `json:"disabled_reason"`
}

func TestWebhookCRUD(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.createInbox("a", "shop.test")
	e.createInbox("b", "shop.test")
	var w webhookObj
	if c := e.do(e.key, "POST", "/v0/webhooks", `{"url":"https://agent.test/hook","event_types":["message.received"],"inbox_ids":["A@shop.test"],"client_id":"c1"}`, &w); c != 200 {
		t.Fatalf("create: %d %+v", c, w)
	}
	if !strings.HasPrefix(w.Secret, "whsec_") || !w.Enabled || w.InboxIDs[0] != "a@shop.test" || w.ClientID != "c1" {
		t.Errorf("created: %+v", w)
	}
	if _, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(w.Secret, "whsec_")); err != nil {
		t.Errorf("secret %q: %v", w.Secret, err)
	}
	var again webhookObj
	e.do(e.key, "POST", "/v0/webhooks", `{"url":"https://agent.test/hook","event_types":["message.received"],"client_id":"c1"}`, &again)
	if again.WebhookID != w.WebhookID || again.Secret != w.Secret {
		t.Errorf("client_id repeat: %+v (the same webhook and secret)", again)
	}
	// get and list return the signing secret to a key that may manage the
	// webhook (AgentMail's "Verifying webhooks" fetches it so).
	var got webhookObj
	if c := e.do(e.key, "GET", "/v0/webhooks/"+w.WebhookID, nil, &got); c != 200 || got.Secret != w.Secret || got.URL != w.URL {
		t.Errorf("get: %d %+v", c, got)
	}
	var list struct{ Webhooks []webhookObj }
	if c := e.do(e.key, "GET", "/v0/webhooks", nil, &list); c != 200 || len(list.Webhooks) != 1 || list.Webhooks[0].Secret != w.Secret {
		t.Errorf("list: %d %+v", c, list)
	}
	for _, tc := range []struct{ body, field string }{
		{`{"url":"ftp://x","event_types":["message.received"]}`, "url"},
		{`{"url":"https://x.test","event_types":["nope"]}`, "event_types"},
		{`{"url":"https://x.test","headers":{}}`, "headers"},
		{`{"url":"https://x.test","pod_ids":["other"]}`, "pod_ids"},
		{`{"url":"https://x.test","event_types":"message.received"}`, "event_types"},
	} {
		var er struct {
			Name    string `json:"name"`
			Message string `json:"message"`
		}
		if c := e.do(e.key, "POST", "/v0/webhooks", tc.body, &er); c != 400 || !strings.Contains(er.Message, tc.field) {
			t.Errorf("%s: %d %+v", tc.body, c, er)
		}
	}
	if c := e.do(e.key, "POST", "/v0/webhooks", `{"url":"https://x.test","inbox_ids":["nobody@shop.test"]}`, nil); c != 404 {
		t.Errorf("unknown inbox: %d", c)
	}
	// Update: event types replaced, inboxes added and removed.
	var up webhookObj
	if c := e.do(e.key, "PATCH", "/v0/webhooks/"+w.WebhookID, `{"event_types":["message.sent","message.delivered"],"add_inbox_ids":["b@shop.test"],"remove_inbox_ids":["a@shop.test"]}`, &up); c != 200 ||
		strings.Join(up.EventTypes, ",") != "message.sent,message.delivered" || strings.Join(up.InboxIDs, ",") != "b@shop.test" {
		t.Errorf("update: %d %+v", c, up)
	}
	// Inbox-scoped routes and scoped keys.
	var iw webhookObj
	if c := e.do(e.key, "POST", "/v0/inboxes/a@shop.test/webhooks", `{"url":"https://agent.test/a","event_types":["message.received"]}`, &iw); c != 200 || strings.Join(iw.InboxIDs, ",") != "a@shop.test" {
		t.Errorf("inbox create: %d %+v", c, iw)
	}
	scoped := e.newKey([]string{"a@shop.test"})
	var l struct {
		Count    int          `json:"count"`
		Webhooks []webhookObj `json:"webhooks"`
	}
	if e.do(scoped, "GET", "/v0/webhooks", nil, &l); l.Count != 1 || l.Webhooks[0].WebhookID != iw.WebhookID || l.Webhooks[0].Secret != iw.Secret {
		t.Errorf("scoped list: %+v", l)
	}
	var sg webhookObj
	if c := e.do(scoped, "GET", "/v0/webhooks/"+iw.WebhookID, nil, &sg); c != 200 || sg.Secret != iw.Secret || !strings.HasPrefix(sg.Secret, "whsec_") {
		t.Errorf("scoped get of its inbox's webhook: %d %+v", c, sg)
	}
	if c := e.do(scoped, "GET", "/v0/webhooks/"+w.WebhookID, nil, nil); c != 404 {
		t.Errorf("scoped get of another inbox's webhook: %d", c)
	}
	if c := e.do(scoped, "DELETE", "/v0/webhooks/"+w.WebhookID, nil, nil); c != 404 {
		t.Errorf("scoped delete of another inbox's webhook: %d", c)
	}
	if c := e.do(scoped, "POST", "/v0/webhooks", `{"url":"https://x.test","inbox_ids":["b@shop.test"]}`, nil); c != 404 {
		t.Errorf("scoped create on another inbox: %d", c)
	}
	var sw webhookObj
	if e.do(scoped, "POST", "/v0/webhooks", `{"url":"https://x.test"}`, &sw); strings.Join(sw.InboxIDs, ",") != "a@shop.test" {
		t.Errorf("scoped key's webhook without inbox_ids: %+v", sw)
	}
	if e.do(e.key, "GET", "/v0/inboxes/b@shop.test/webhooks", nil, &l); l.Count != 1 || l.Webhooks[0].WebhookID != w.WebhookID {
		t.Errorf("inbox list: %+v", l)
	}
	// Paging.
	var p1, p2 struct {
		Count         int          `json:"count"`
		NextPageToken string       `json:"next_page_token"`
		Webhooks      []webhookObj `json:"webhooks"`
	}
	e.do(e.key, "GET", "/v0/webhooks?limit=2", nil, &p1)
	e.do(e.key, "GET", "/v0/webhooks?limit=2&page_token="+p1.NextPageToken, nil, &p2)
	if p1.Count != 2 || p1.NextPageToken == "" || p2.Count != 1 || p2.NextPageToken != "" || p2.Webhooks[0].WebhookID == p1.Webhooks[1].WebhookID {
		t.Errorf("paging: %+v %+v", p1, p2)
	}
	if c := e.do(e.key, "DELETE", "/v0/webhooks/"+w.WebhookID, nil, nil); c != 204 {
		t.Errorf("delete: %d", c)
	}
	if c := e.do(e.key, "GET", "/v0/webhooks/"+w.WebhookID, nil, nil); c != 404 {
		t.Errorf("get after delete: %d", c)
	}
}

// verifySvix recomputes the Svix signature independently of the code
// under test.
func verifySvix(secret string, h http.Header, body []byte) bool {
	key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	m := hmac.New(sha256.New, key)
	m.Write([]byte(h.Get("svix-id") + "." + h.Get("svix-timestamp") + "." + string(body)))
	want := "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
	return hmac.Equal([]byte(want), []byte(h.Get("svix-signature")))
}

type hookHit struct {
	ID    string
	Event struct {
		Type      string `json:"type"`
		EventType string `json:"event_type"`
		EventID   string `json:"event_id"`
		Message   struct {
			Subject string `json:"subject"`
			InboxID string `json:"inbox_id"`
		} `json:"message"`
	}
	Verified bool
}

// TestWebhookDelivery: signed the Svix way, filtered, retried after
// failures with the same svix-id, and resumed by a new sender (a
// restart) from the durable log.
func TestWebhookDelivery(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.createInbox("a", "shop.test")
	var mu sync.Mutex
	var hits []hookHit
	failures := 2
	got := make(chan struct{}, 100)
	var secret string
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		var h hookHit
		h.ID = r.Header.Get("svix-id")
		h.Verified = verifySvix(secret, r.Header, body)
		json.Unmarshal(body, &h.Event)
		hits = append(hits, h)
		got <- struct{}{}
		if failures > 0 {
			failures--
			w.WriteHeader(503)
			return
		}
		w.WriteHeader(204)
	}))
	defer recv.Close()
	var w webhookObj
	if c := e.do(e.key, "POST", "/v0/webhooks", map[string]any{"url": recv.URL, "event_types": []string{"message.received"}, "inbox_ids": []string{"a@shop.test"}}, &w); c != 200 {
		t.Fatalf("create: %d", c)
	}
	mu.Lock()
	secret = w.Secret
	mu.Unlock()
	e.receive("first", "a@shop.test")
	e.receive("other inbox", "b@shop.test")

	svc := e.svc
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// First sender: one attempt, fails (503), then "crashes".
	s1 := &api.WebhookSender{Service: svc, MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}
	if n, err := e.runOnce(ctx, s1); n != 1 || err != nil {
		t.Fatalf("first run: %d %v", n, err)
	}
	// A new sender (after a restart) goes on: one more failure, then done.
	sctx, scancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- (&api.WebhookSender{Service: svc, Poll: 10 * time.Millisecond, MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}).Run(sctx)
	}()
	for i := 0; i < 2; i++ {
		select {
		case <-got:
		case <-ctx.Done():
			t.Fatal("timeout waiting for deliveries")
		}
	}
	<-got // the first RunOnce's hit was buffered too
	e.receive("second", "a@shop.test")
	select {
	case <-got:
	case <-ctx.Done():
		t.Fatal("timeout waiting for the second event")
	}
	scancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if len(hits) != 4 {
		t.Fatalf("hits: %+v", hits)
	}
	for i, h := range hits {
		want := "first"
		if i == 3 {
			want = "second"
		}
		if !h.Verified || h.Event.Type != "event" || h.Event.EventType != "message.received" || h.Event.Message.Subject != want || h.Event.Message.InboxID != "a@shop.test" {
			t.Errorf("hit %d: %+v", i, h)
		}
	}
	if hits[0].ID != hits[1].ID || hits[1].ID != hits[2].ID || hits[2].ID == hits[3].ID {
		t.Errorf("svix-id not stable across retries / not distinct per event: %s %s %s %s", hits[0].ID, hits[1].ID, hits[2].ID, hits[3].ID)
	}
	// Nothing left pending.
	if n, err := (&api.WebhookSender{Service: svc}).RunOnce(ctx, e.st); n != 0 || err != nil {
		t.Errorf("after delivery: %d pending, %v", n, err)
	}
}

func TestSvixSignatureKnown(t *testing.T) {
	t.Parallel()
	// Svix's documented example
	// (https://docs.svix.com/receiving/verifying-payloads/how-manual).
	sig, err := api.SvixSignature("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330",
		[]byte(`{"test": 2432232314}`))
	if err != nil || sig != "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=" {
		t.Errorf("signature %s %v", sig, err)
	}
}

// TestWebhookNoLinkLocal: deliveries never connect to link-local
// addresses (cloud metadata), whatever the URL says; the attempt fails
// and is retried, not sent.
func TestWebhookNoLinkLocal(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.createInbox("a", "shop.test")
	if c := e.do(e.key, "POST", "/v0/webhooks", `{"url":"http://169.254.169.254/latest/meta-data/"}`, nil); c != 200 {
		t.Fatalf("create: %d", c)
	}
	e.receive("x", "a@shop.test")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if n, err := e.runOnce(ctx, &api.WebhookSender{Service: e.svc}); n != 1 || err != nil {
		t.Fatalf("run: %d %v", n, err)
	}
	hs, err := e.st.WebhookDeliveries(ctx)
	if err != nil || len(hs) != 1 || hs[0].State != "pending" || !strings.Contains(hs[0].LastError, "refusing to connect") {
		t.Errorf("delivery: %+v %v", hs, err)
	}
}

// runOnce is ws.RunOnce, tried again until it finds a delivery (or ctx
// ends): on Postgres an event is fanned out to the webhooks once every
// transaction older than it has ended (the event log's visibility line),
// and other tests' transactions run on the same server.
func (e *env) runOnce(ctx context.Context, ws *api.WebhookSender) (int, error) {
	for {
		n, err := ws.RunOnce(ctx, e.st)
		if n > 0 || err != nil || ctx.Err() != nil {
			return n, err
		}
		select {
		case <-ctx.Done():
			return 0, nil
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestPodWebhooks: the one pod's webhook routes are the organisation's;
// another pod is a 404.
func TestPodWebhooks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.createInbox("a", "shop.test")
	var w webhookObj
	if c := e.do(e.key, "POST", "/v0/pods/envelopd/webhooks", `{"url":"https://agent.test/hook","event_types":["message.received"]}`, &w); c != 200 || w.WebhookID == "" {
		t.Fatalf("create: %d %+v", c, w)
	}
	var got webhookObj
	if c := e.do(e.key, "GET", "/v0/webhooks/"+w.WebhookID, nil, &got); c != 200 || got.Secret != w.Secret {
		t.Errorf("the pod's webhook as the organisation's: %d %+v", c, got)
	}
	var list struct {
		Count    int          `json:"count"`
		Webhooks []webhookObj `json:"webhooks"`
	}
	if c := e.do(e.key, "GET", "/v0/pods/envelopd/webhooks", nil, &list); c != 200 || list.Count != 1 || list.Webhooks[0].WebhookID != w.WebhookID {
		t.Errorf("list: %d %+v", c, list)
	}
	if c := e.do(e.key, "PATCH", "/v0/pods/envelopd/webhooks/"+w.WebhookID, `{"event_types":["message.received","message.sent"]}`, &got); c != 200 || len(got.EventTypes) != 2 {
		t.Errorf("update: %d %+v", c, got)
	}
	if c := e.do(e.key, "GET", "/v0/pods/other/webhooks/"+w.WebhookID, nil, nil); c != 404 {
		t.Errorf("another pod: %d", c)
	}
	if c := e.do(e.key, "DELETE", "/v0/pods/envelopd/webhooks/"+w.WebhookID, nil, nil); c != 204 {
		t.Errorf("delete: %d", c)
	}
	if c := e.do(e.key, "GET", "/v0/webhooks/"+w.WebhookID, nil, nil); c != 404 {
		t.Errorf("after delete: %d", c)
	}
}
