package api_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/envelopd/envelopd/api"
	"github.com/envelopd/envelopd/store"
)

// keyWith stores a key scoped to inboxes or bound to pod, with perms
// (nil: every permission), and returns it.
func (e *env) keyWith(inboxes []string, pod string, perms ...string) (key, id string) {
	e.t.Helper()
	key, k, err := api.NewKey(inboxes, "", time.Now())
	if err != nil {
		e.t.Fatal(err)
	}
	k.Pod, k.Permissions = pod, perms
	if perms == nil {
		k.Permissions = []string{}
	}
	if err := e.st.CreateAPIKey(context.Background(), k); err != nil {
		e.t.Fatal(err)
	}
	return key, k.ID
}

type keyObj struct {
	Type        string          `json:"type"`
	APIKeyID    string          `json:"api_key_id"`
	APIKey      string          `json:"api_key"`
	Name        string          `json:"name"`
	PodID       string          `json:"pod_id"`
	InboxID     string          `json:"inbox_id"`
	Permissions map[string]bool `json:"permissions"`
	CreatedAt   time.Time       `json:"created_at"`
	UpdatedAt   time.Time       `json:"updated_at"`
}

// granted lists the permissions set true.
func (k keyObj) granted() string {
	var out []string
	for _, n := range api.Permissions {
		if k.Permissions[n] {
			out = append(out, n)
		}
	}
	return strings.Join(out, ",")
}

// TestPermissionsEnforced: a key with permissions may call the routes
// whose permission it holds, in every scope form (organisation, pod,
// inbox), and gets 403 ForbiddenError naming the permission for the
// others; message_read also reads threads (thread_read, the Python SDK's,
// reads threads only); a webhook carries only events its maker may read;
// auth.me needs none.
func TestPermissionsEnforced(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.createInbox("a", "shop.test")
	e.receive("hello", "a@shop.test")
	reader, _ := e.keyWith(nil, "", "inbox_read", "message_read")
	threads, _ := e.keyWith(nil, "", "thread_read")
	none, _ := e.keyWith(nil, "")
	hooks, _ := e.keyWith(nil, "", "webhook_create", "domain_read")
	for _, tc := range []struct {
		key, method, path string
		body              any
		code              int
		perm              string
	}{
		{reader, "GET", "/v0/inboxes", nil, 200, ""},
		{reader, "GET", "/v0/pods/envelopd/inboxes/a@shop.test", nil, 200, ""},
		{reader, "GET", "/v0/inboxes/a@shop.test/messages", nil, 200, ""},
		{reader, "GET", "/v0/threads", nil, 200, ""},
		{reader, "POST", "/v0/inboxes", `{"username":"b"}`, 403, "inbox_create"},
		{reader, "PATCH", "/v0/inboxes/a@shop.test", `{"display_name":"A"}`, 403, "inbox_update"},
		{reader, "POST", "/v0/inboxes/a@shop.test/messages/send", `{"to":"x@y.test","text":"t"}`, 403, "message_send"},
		{reader, "DELETE", "/v0/pods/envelopd/threads/t1", nil, 403, "thread_delete permission (or message_delete"},
		{reader, "GET", "/v0/inboxes/a@shop.test/drafts", nil, 403, "draft_read"},
		{reader, "GET", "/v0/webhooks", nil, 403, "webhook_read"},
		{reader, "GET", "/v0/lists/send/block", nil, 403, "list_entry_read"},
		{reader, "GET", "/v0/metrics", nil, 403, "metrics_read"},
		{reader, "GET", "/v0/api-keys", nil, 403, "api_key_read"},
		{reader, "GET", "/v0/pods", nil, 403, "pod_read"},
		{reader, "GET", "/v0/domains", nil, 403, "domain_read"},
		{threads, "GET", "/v0/inboxes/a@shop.test/threads", nil, 200, ""},
		{threads, "GET", "/v0/inboxes/a@shop.test/messages", nil, 403, "message_read"},
		{hooks, "POST", "/v0/webhooks", `{"url":"https://h.test/x","event_types":["domain.verified"]}`, 200, ""},
		{hooks, "POST", "/v0/webhooks", `{"url":"https://h.test/x","event_types":["message.received"]}`, 403, "message_read"},
		{hooks, "POST", "/v0/webhooks", `{"url":"https://h.test/x"}`, 403, "message_read"},
		{none, "GET", "/v0/auth/me", nil, 200, ""},
		{none, "GET", "/v0/tokens", nil, 200, ""},
		{none, "GET", "/v0/inboxes", nil, 403, "inbox_read"},
		{e.key, "GET", "/v0/api-keys", nil, 200, ""},
	} {
		var er struct{ Name, Message string }
		c := e.do(tc.key, tc.method, tc.path, tc.body, &er)
		if c != tc.code || tc.perm != "" && (er.Name != "ForbiddenError" || !strings.Contains(er.Message, "lacks the "+tc.perm)) {
			t.Errorf("%s %s: %d %+v, want %d naming %s", tc.method, tc.path, c, er, tc.code, tc.perm)
		}
	}
}

// TestAPIKeyScopeAndPermissions: create with permissions (returned as
// the SDK's object, every name true or false), get, update (name and
// permissions; the secret and scope stay), and no escalation: a key
// never makes or changes a key with a permission it lacks, and a pod or
// inbox key never makes a wider one nor sees one.
func TestAPIKeyScopeAndPermissions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.createInbox("a", "shop.test")
	e.createInbox("b", "shop.test")
	var k keyObj
	if c := e.do(e.key, "POST", "/v0/api-keys", `{"name":"ro","permissions":{"inbox_read":true,"message_read":true,"message_send":false,"api_key_read":true,"api_key_create":true,"api_key_update":true}}`, &k); c != 200 ||
		k.Type != "bearer" || k.granted() != "inbox_read,message_read,api_key_read,api_key_create,api_key_update" || len(k.Permissions) != len(api.Permissions) ||
		k.PodID != "" || k.InboxID != "" || !k.UpdatedAt.Equal(k.CreatedAt) {
		t.Fatalf("create: %d %+v", c, k)
	}
	var got keyObj
	if c := e.do(e.key, "GET", "/v0/api-keys/"+k.APIKeyID, nil, &got); c != 200 || got.APIKey != "" || got.granted() != k.granted() || got.Name != "ro" {
		t.Errorf("get: %d %+v", c, got)
	}
	// Escalation.
	var er struct{ Name, Message string }
	if c := e.do(k.APIKey, "POST", "/v0/api-keys", `{"permissions":{"message_send":true}}`, &er); c != 403 || er.Name != "ForbiddenError" || !strings.Contains(er.Message, "message_send") {
		t.Errorf("create with a permission the maker lacks: %d %+v", c, er)
	}
	var child keyObj
	if c := e.do(k.APIKey, "POST", "/v0/inboxes/a@shop.test/api-keys", `{"name":"child"}`, &child); c != 200 || child.granted() != k.granted() || child.InboxID != "a@shop.test" || child.PodID != "envelopd" {
		t.Errorf("create without permissions by a key with some: %d %+v", c, child)
	}
	if c := e.do(k.APIKey, "PATCH", "/v0/api-keys/"+child.APIKeyID, `{"permissions":{"webhook_read":true}}`, &er); c != 403 || !strings.Contains(er.Message, "webhook_read") {
		t.Errorf("update to a permission the updater lacks: %d %+v", c, er)
	}
	if c := e.do(k.APIKey, "PATCH", "/v0/api-keys/"+k.APIKeyID, `{"permissions":{"inbox_read":true}}`, &got); c != 200 || got.granted() != "inbox_read" || !got.UpdatedAt.After(got.CreatedAt) {
		t.Errorf("a key narrowing itself: %d %+v", c, got)
	}
	if c := e.do(k.APIKey, "GET", "/v0/api-keys", nil, &er); c != 403 || !strings.Contains(er.Message, "api_key_read") {
		t.Errorf("list without api_key_read: %d %+v", c, er)
	}
	// Update: name and permissions; the secret and the scope stay.
	if c := e.do(e.key, "PATCH", "/v0/inboxes/a@shop.test/api-keys/"+child.APIKeyID, `{"name":"renamed","permissions":{"inbox_read":true,"message_read":true}}`, &got); c != 200 ||
		got.Name != "renamed" || got.granted() != "inbox_read,message_read" || got.InboxID != "a@shop.test" {
		t.Errorf("update: %d %+v", c, got)
	}
	if c := e.do(child.APIKey, "GET", "/v0/inboxes/a@shop.test/messages", nil, nil); c != 200 {
		t.Errorf("the updated key: %d", c)
	}
	if c := e.do(child.APIKey, "GET", "/v0/inboxes/b@shop.test", nil, nil); c != 404 {
		t.Errorf("the updated key's scope: %d", c)
	}
	if c := e.do(e.key, "PATCH", "/v0/inboxes/b@shop.test/api-keys/"+child.APIKeyID, `{"name":"x"}`, nil); c != 404 {
		t.Errorf("update through another inbox: %d", c)
	}
	if c := e.do(e.key, "PATCH", "/v0/api-keys/"+child.APIKeyID, `{"permissions":{"inbox_reed":true}}`, nil); c != 400 {
		t.Errorf("update with an unknown permission: %d", c)
	}
	// Scope: pod and inbox keys make and see keys within their scope.
	pod, _ := e.keyWith(nil, "envelopd", api.Permissions...)
	inbox, _ := e.keyWith([]string{"a@shop.test"}, "", api.Permissions...)
	if c := e.do(pod, "POST", "/v0/api-keys", `{}`, nil); c != 403 {
		t.Errorf("pod key making an organisation key: %d", c)
	}
	var pk keyObj
	if c := e.do(pod, "POST", "/v0/pods/envelopd/api-keys", `{"name":"p"}`, &pk); c != 200 || pk.PodID != "envelopd" || pk.InboxID != "" || pk.Permissions == nil {
		t.Errorf("pod key making a pod key: %d %+v", c, pk)
	}
	var l struct {
		Count   int      `json:"count"`
		APIKeys []keyObj `json:"api_keys"`
	}
	if c := e.do(pod, "GET", "/v0/api-keys", nil, &l); c != 200 {
		t.Errorf("pod key list: %d", c)
	}
	for _, x := range l.APIKeys {
		if x.PodID == "" {
			t.Errorf("pod key sees an organisation key: %+v", x)
		}
	}
	if c := e.do(pod, "GET", "/v0/api-keys/"+k.APIKeyID, nil, nil); c != 404 {
		t.Errorf("pod key getting an organisation key: %d", c)
	}
	if c := e.do(inbox, "POST", "/v0/pods/envelopd/api-keys", `{}`, nil); c != 403 {
		t.Errorf("inbox key making a pod key: %d", c)
	}
	if c := e.do(inbox, "GET", "/v0/api-keys", nil, &l); c != 200 || len(l.APIKeys) != 2 {
		t.Errorf("inbox key list: %d %+v", c, l)
	}
	for _, x := range l.APIKeys {
		if x.InboxID != "a@shop.test" {
			t.Errorf("inbox key sees %+v", x)
		}
	}
	if c := e.do(inbox, "PATCH", "/v0/api-keys/"+pk.APIKeyID, `{"name":"mine"}`, nil); c != 404 {
		t.Errorf("inbox key updating a pod key: %d", c)
	}
	// A revoked key is gone for get and update.
	if c := e.do(e.key, "DELETE", "/v0/api-keys/"+child.APIKeyID, nil, nil); c != 204 {
		t.Fatal(c)
	}
	if c := e.do(e.key, "GET", "/v0/api-keys/"+child.APIKeyID, nil, nil); c != 404 {
		t.Errorf("get of a revoked key: %d", c)
	}
	if c := e.do(e.key, "PATCH", "/v0/api-keys/"+child.APIKeyID, `{"name":"x"}`, nil); c != 404 {
		t.Errorf("update of a revoked key: %d", c)
	}
}

// TestAuthMe: auth.me answers the scope of the key that asks.
func TestAuthMe(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	pod, podID := e.keyWith(nil, "envelopd", "inbox_read")
	inbox, inboxID := e.keyWith([]string{"a@shop.test"}, "")
	two, twoID := e.keyWith([]string{"a@shop.test", "b@shop.test"}, "", "message_read")
	orgID := strings.Split(e.key, "_")[1]
	for key, want := range map[string]string{
		e.key: `{"scope_type":"organization","scope_id":"envelopd","organization_id":"envelopd","api_key_id":"` + orgID + `"}`,
		pod:   `{"scope_type":"pod","scope_id":"envelopd","organization_id":"envelopd","pod_id":"envelopd","api_key_id":"` + podID + `"}`,
		inbox: `{"scope_type":"inbox","scope_id":"a@shop.test","organization_id":"envelopd","pod_id":"envelopd","inbox_id":"a@shop.test","inbox_ids":["a@shop.test"],"api_key_id":"` + inboxID + `"}`,
		two:   `{"scope_type":"inbox","scope_id":"a@shop.test","organization_id":"envelopd","pod_id":"envelopd","inbox_id":"a@shop.test","inbox_ids":["a@shop.test","b@shop.test"],"api_key_id":"` + twoID + `"}`,
	} {
		var got json.RawMessage
		if c := e.do(key, "GET", "/v0/auth/me", nil, &got); c != 200 || string(got) != want {
			t.Errorf("auth.me: %d %s, want %s", c, got, want)
		}
	}
}

// TestWebsocketPermissions: the websocket sends a key only the events it
// may read: no message events without message_read, no
// message.received.blocked without label_blocked_read; an update of the
// key's permissions applies to its open stream.
func TestWebsocketPermissions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.createInbox("shop", "shop.test")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if c := e.do(e.key, "POST", "/v0/lists/receive/block", `{"entry":"evil.test"}`, nil); c != 200 {
		t.Fatal(c)
	}
	noBlocked, _ := e.keyWith(nil, "", "message_read")
	noMessages, _ := e.keyWith(nil, "", "domain_read", "label_blocked_read")
	a := e.subscribe(t, ctx, noBlocked, "", map[string]any{"inbox_ids": []string{"shop@shop.test"}})
	b := e.subscribe(t, ctx, noMessages, "", map[string]any{})
	in := func(from string) {
		t.Helper()
		raw := "From: " + from + "\r\nTo: shop@shop.test\r\nSubject: " + from + "\r\nMessage-ID: <" + from + ">\r\n\r\nbody\r\n"
		if _, err := e.st.Ingest(ctx, &store.Incoming{Direction: store.DirIn, Raw: []byte(raw), MessageID: from, Sender: from,
			Recipients: []string{"shop@shop.test"}, Subject: from, Status: store.StatusAccepted, ReceivedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	in("x@evil.test")
	in("y@good.test")
	if ev := wsRead(t, ctx, a); ev.EventType != "message.received" || ev.Message == nil || ev.Message.Subject != "y@good.test" {
		t.Errorf("key without label_blocked_read: %+v", ev)
	}
	// b's stream has had every event a was sent (one log, read in order):
	// none may arrive.
	rctx, rcancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer rcancel()
	if _, m, err := b.Read(rctx); err == nil {
		t.Errorf("key without message_read was sent %s", m)
	}
	// Given message_read, an open stream sends the next message event.
	later, laterID := e.keyWith(nil, "", "domain_read")
	d := e.subscribe(t, ctx, later, "", map[string]any{})
	if c := e.do(e.key, "PATCH", "/v0/api-keys/"+laterID, `{"permissions":{"message_read":true}}`, nil); c != 200 {
		t.Fatal(c)
	}
	in("z@good.test")
	if ev := wsRead(t, ctx, d); ev.EventType != "message.received" || ev.Message == nil || ev.Message.Subject != "z@good.test" {
		t.Errorf("after the update: %+v", ev)
	}
}
