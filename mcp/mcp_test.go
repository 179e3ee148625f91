package mcp_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/envelopd/envelopd/api"
	"github.com/envelopd/envelopd/mailin/relaytest"
	"github.com/envelopd/envelopd/mailout"
	"github.com/envelopd/envelopd/mcp"
	"github.com/envelopd/envelopd/protocols/aicp"
	"github.com/envelopd/envelopd/protocols/vacant"
	"github.com/envelopd/envelopd/store"
)

const (
	shop = "shop@shop.test"
	bob  = "bob@buyer.test"
)

type fixture struct {
	relay *relaytest.Relay
	svc   *api.Service
	cfg   mcp.Config
}

// newFixture runs an in-process relay (shop.test, buyer.test; its queue
// worker delivers local mail) and the API service over its store.
func newFixture(t *testing.T) *fixture {
	r := relaytest.Start(t, relaytest.Domains("shop.test", "buyer.test"))
	wake := func() {
		select {
		case r.Relay.Wake <- struct{}{}:
		default:
		}
	}
	svc, err := api.NewService(api.Config{Store: r.Store, Relay: true, Domains: []string{"shop.test", "buyer.test"}, Wake: wake,
		Mailer: func(d string) *mailout.Mailer { return &mailout.Mailer{Signers: r.Relay.Signers[d]} }})
	if err != nil {
		t.Fatal(err)
	}
	seed := func(b byte) ed25519.PrivateKey { return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{b}, 32)) }
	return &fixture{relay: r, svc: svc, cfg: mcp.Config{Service: svc, Principal: &api.Principal{KeyID: "test"},
		AICPKey: seed(7), VacantKey: seed(9), ChainTip: r.Store.ChainTip}}
}

// connect is the go-sdk's own client over in-memory transports.
func connect(t *testing.T, cfg mcp.Config) *sdk.ClientSession {
	ctx := context.Background()
	ct, st := sdk.NewInMemoryTransports()
	ss, err := mcp.NewServer(cfg).Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); ss.Wait() })
	return cs
}

// call calls a tool that must succeed and decodes its structured output.
func call[T any](t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) T {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		t.Fatalf("%s: tool error: %s", name, text(res))
	}
	var out T
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s: %v: %s", name, err, b)
	}
	return out
}

func text(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// toolError calls a tool that must fail and returns the API error object
// of its text.
func toolError(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) api.Error {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if !res.IsError {
		t.Fatalf("%s: want a tool error, got %s", name, text(res))
	}
	var e struct {
		api.Error
		Errors []api.Problem `json:"errors"`
	}
	if err := json.Unmarshal([]byte(text(res)), &e); err != nil {
		t.Fatalf("%s: error text is not the API error object: %q", name, text(res))
	}
	e.Error.Errors = e.Errors
	return e.Error
}

func codes(e api.Error) []string {
	var out []string
	ps, _ := e.Errors.([]api.Problem)
	for _, p := range ps {
		out = append(out, p.Code)
	}
	return out
}

type envelopayView struct {
	Type   string          `json:"type"`
	Status string          `json:"status"`
	Errors []api.Problem   `json:"errors"`
	ID     int64           `json:"id"`
	Body   json.RawMessage `json:"body"`
	DKIM   []struct {
		Result string `json:"result"`
		Domain string `json:"domain"`
	} `json:"dkim"`
}

func view(t *testing.T, m *api.Message) envelopayView {
	t.Helper()
	var v envelopayView
	if err := json.Unmarshal(m.Envelopay, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

var allTools = []string{"aicp_sign", "create_draft", "create_inbox", "create_list_entry", "delete_draft", "delete_inbox",
	"delete_list_entry", "delete_thread", "forward_message", "get_attachment", "get_draft", "get_draft_attachment", "get_inbox", "get_list_entry",
	"get_message", "get_raw", "get_thread", "label_message", "list_drafts", "list_inboxes", "list_list_entries",
	"list_messages", "list_threads", "reply", "reply_to_message", "search_inboxes", "search_messages", "search_threads",
	"send_draft", "send_envelopay", "send_message", "update_draft", "update_inbox", "update_message", "update_thread",
	"vacant_sign", "wait_for_message"}

// TestTools plays WHICH → METHODS → ORDER → FULFILL → PAY and a replayed
// proof between two inboxes of a relay through every tool, with the
// go-sdk's client.
func TestTools(t *testing.T) {
	f := newFixture(t)
	cs := connect(t, f.cfg)
	ctx := context.Background()

	tl, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tl.Tools {
		names = append(names, tool.Name)
		if tool.InputSchema == nil || tool.OutputSchema == nil || tool.Description == "" {
			t.Errorf("%s: schemas or description missing", tool.Name)
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, allTools) {
		t.Fatalf("tools %v, want %v", names, allTools)
	}

	type created struct {
		Inbox   api.Inbox `json:"inbox"`
		Created bool      `json:"created"`
	}
	c := call[created](t, cs, "create_inbox", map[string]any{"username": "shop", "domain": "shop.test", "client_id": "s1"})
	if c.Inbox.InboxID != shop || !c.Created {
		t.Fatalf("create: %+v", c)
	}
	if c2 := call[created](t, cs, "create_inbox", map[string]any{"username": "shop", "domain": "shop.test", "client_id": "s1"}); c2.Created || !c2.Inbox.CreatedAt.Equal(c.Inbox.CreatedAt) {
		t.Errorf("create again: %+v", c2)
	}
	call[created](t, cs, "create_inbox", map[string]any{"username": "bob", "domain": "buyer.test"})
	li := call[api.ListInboxes](t, cs, "list_inboxes", nil)
	if li.Count != 2 || li.Inboxes[0].InboxID != bob || li.Inboxes[1].InboxID != shop {
		t.Fatalf("list_inboxes: %+v", li)
	}

	// WHICH (bare), waited for from the start of the shop's inbox.
	which := call[api.SendResult](t, cs, "send_envelopay", map[string]any{"inbox_id": bob, "to": []string{shop}, "type": "which"})
	w := call[api.WaitResult](t, cs, "wait_for_message", map[string]any{"inbox_id": shop, "type": "which", "cursor": 0})
	if w.TimedOut || w.Message == nil || w.Message.ThreadID != which.ThreadID || w.Message.Subject != "WHICH" {
		t.Fatalf("wait which: %+v", w)
	}

	// METHODS by reply; Bob waits after the WHICH he sent.
	call[api.SendResult](t, cs, "reply", map[string]any{"inbox_id": shop, "message_id": w.Message.MessageID, "type": "methods",
		"note": "SOL accepted", "body": map[string]any{"rails": []any{map[string]any{"chain": "solana", "token": "SOL",
			"wallet": "6dL6n77jJFWq4bu3cQp57H8rMUPEXu7uYN1XApPxpUif", "price": "500000000"}}}})
	m := call[api.WaitResult](t, cs, "wait_for_message", map[string]any{"inbox_id": bob, "type": "methods", "after_message_id": which.MessageID})
	if m.Message == nil || m.Message.Subject != "METHODS | SOL accepted" || m.Message.ThreadID != which.ThreadID {
		t.Fatalf("wait methods: %+v", m)
	}

	// ORDER by reply to the thread; FULFILL.
	order := call[api.SendResult](t, cs, "reply", map[string]any{"inbox_id": bob, "thread_id": which.ThreadID, "type": "order",
		"body": map[string]any{"id": "ord_1", "task": map[string]any{"description": "Review PR #417"}}})
	if order.Envelopay == nil || order.Envelopay.Type != "order" || order.Envelopay.Status != "accepted" || order.Envelopay.ID != "ord_1" {
		t.Fatalf("order: %+v", order.Envelopay)
	}
	o := call[api.WaitResult](t, cs, "wait_for_message", map[string]any{"inbox_id": shop, "type": "order", "cursor": w.Cursor})
	ful := call[api.SendResult](t, cs, "reply", map[string]any{"inbox_id": shop, "message_id": o.Message.MessageID, "type": "fulfill",
		"body": map[string]any{"order_ref": "ord_1", "result": map[string]any{"summary": "Approved"}}})
	fm := call[api.WaitResult](t, cs, "wait_for_message", map[string]any{"inbox_id": bob, "from": shop, "type": "fulfill", "after_message_id": order.MessageID})
	if fm.Message == nil || fm.Message.InReplyTo != ful.MessageID && fm.Message.MessageID != ful.MessageID {
		t.Fatalf("wait fulfill: %+v", fm)
	}

	// PAY; the same proof again is refused before anything is sent.
	pay := map[string]any{"amount": "500000000", "token": "SOL", "chain": "solana", "proof": map[string]any{"tx": "5xQ7mcp"}}
	call[api.SendResult](t, cs, "reply", map[string]any{"inbox_id": bob, "message_id": fm.Message.MessageID, "type": "pay", "body": pay})
	p1 := call[api.WaitResult](t, cs, "wait_for_message", map[string]any{"inbox_id": shop, "type": "pay", "cursor": o.Cursor})
	if v := view(t, p1.Message); v.Status != "accepted" || v.DKIM[0].Result != "pass" || v.DKIM[0].Domain != "buyer.test" {
		t.Fatalf("pay verdicts: %+v", v)
	}
	e := toolError(t, cs, "reply", map[string]any{"inbox_id": bob, "message_id": fm.Message.MessageID, "type": "pay", "body": pay})
	if e.Name != "ValidationError" || !slices.Equal(codes(e), []string{"duplicate_proof"}) || !strings.Contains(e.Message, "duplicate_proof") {
		t.Fatalf("replayed proof: %+v", e)
	}
	// Forced: sent, and the shop's copy is a duplicate.
	forced := call[api.SendResult](t, cs, "reply", map[string]any{"inbox_id": bob, "message_id": fm.Message.MessageID, "type": "pay", "body": pay, "force": true})
	if !forced.Envelopay.Forced {
		t.Errorf("forced: %+v", forced.Envelopay)
	}
	p2 := call[api.WaitResult](t, cs, "wait_for_message", map[string]any{"inbox_id": shop, "type": "pay", "cursor": p1.Cursor})
	if v := view(t, p2.Message); v.Status != "duplicate" || !slices.Contains(p2.Message.Labels, "duplicate") {
		t.Fatalf("replay verdict: %+v", v)
	}

	// Threads, messages, raw, labels.
	th := call[api.ListThreads](t, cs, "list_threads", map[string]any{"inbox_id": shop})
	if th.Count != 1 || th.Threads[0].ThreadID != which.ThreadID {
		t.Fatalf("list_threads: %+v", th)
	}
	if all := call[api.ListThreads](t, cs, "list_threads", nil); all.Count != 2 {
		t.Errorf("list_threads (all): %d", all.Count)
	}
	// The courtesy OOPS is composed and queued after the replay's commit
	// (the OOPS leaves the ingest transaction): wait for it.
	var gt api.Thread
	var types []string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		gt = call[api.Thread](t, cs, "get_thread", map[string]any{"inbox_id": shop, "thread_id": which.ThreadID})
		types = types[:0]
		for i := range gt.Messages {
			types = append(types, view(t, &gt.Messages[i]).Type)
		}
		if len(types) >= 7 || time.Now().After(deadline) {
			break
		}
	}
	if want := []string{"which", "methods", "order", "fulfill", "pay", "pay", "oops"}; !slices.Equal(types, want) {
		t.Fatalf("thread types %v, want %v", types, want)
	}
	lm := call[api.ListMessages](t, cs, "list_messages", map[string]any{"inbox_id": bob, "labels": []string{"sent"}, "ascending": true, "limit": 2})
	if lm.Count != 2 || lm.NextPageToken == "" {
		t.Fatalf("list_messages: %+v", lm)
	}
	gm := call[api.Message](t, cs, "get_message", map[string]any{"inbox_id": shop, "message_id": p1.Message.MessageID})
	if gm.Text == nil || !strings.Contains(*gm.Text, `"5xQ7mcp"`) || view(t, &gm).Type != "pay" {
		t.Fatalf("get_message: %+v", gm)
	}
	type raw struct {
		MessageID, Encoding, Raw string
		Size                     int
	}
	r := call[raw](t, cs, "get_raw", map[string]any{"inbox_id": shop, "message_id": p1.Message.MessageID})
	stored, err := f.relay.Store.Message(ctx, view(t, &gm).ID)
	if err != nil {
		t.Fatal(err)
	}
	if r.Encoding != "text" || r.Raw != string(stored.Raw) || r.Size != len(stored.Raw) {
		t.Fatalf("get_raw: %s, %d bytes", r.Encoding, r.Size)
	}
	lab := call[api.UpdateMessageResult](t, cs, "label_message", map[string]any{"inbox_id": shop, "message_id": p1.Message.MessageID, "add_labels": []string{"paid"}})
	if !slices.Contains(lab.Labels, "paid") {
		t.Fatalf("label: %+v", lab)
	}
	if paid := call[api.ListMessages](t, cs, "list_messages", map[string]any{"inbox_id": shop, "labels": []string{"paid"}}); paid.Count != 1 {
		t.Errorf("paid: %d", paid.Count)
	}

	// A wait that finds nothing times out with a cursor.
	to := call[api.WaitResult](t, cs, "wait_for_message", map[string]any{"inbox_id": shop, "type": "invoice", "timeout_seconds": 1, "cursor": 0})
	if !to.TimedOut || to.Message != nil || to.Cursor == 0 {
		t.Fatalf("timeout: %+v", to)
	}
}

// TestSignTools: aicp_sign and vacant_sign sign with the configured keys
// (the CLI's own logic, protocols/tunnelsign).
func TestSignTools(t *testing.T) {
	f := newFixture(t)
	cs := connect(t, f.cfg)
	type aicpOut struct {
		Signed json.RawMessage `json:"signed"`
		Valid  bool            `json:"valid"`
		Errors []api.Problem   `json:"errors"`
	}
	now := "2026-05-06T12:00:00Z"
	a := call[aicpOut](t, cs, "aicp_sign", map[string]any{"message": map[string]any{"from": "alice", "to": "bob", "body": "hi"}, "now": now})
	keys := map[string][]byte{"alice": f.cfg.AICPKey.Public().(ed25519.PublicKey)}
	if r := aicp.Validate(a.Signed, aicp.Options{Keys: keys, Now: time.Date(2026, 5, 6, 12, 0, 0, 0, time.UTC)}); !a.Valid || !r.Valid || len(a.Errors) != 0 {
		t.Fatalf("aicp_sign: %s %v", a.Signed, r.Errors)
	}
	stale := call[aicpOut](t, cs, "aicp_sign", map[string]any{"message": map[string]any{"from": "alice", "to": "bob", "body": "x", "timestamp": 5}, "now": now})
	if stale.Valid || len(stale.Errors) == 0 || stale.Errors[0].Code != "stale_timestamp" {
		t.Fatalf("stale: %+v", stale)
	}
	type vacantOut struct {
		Envelope json.RawMessage `json:"envelope"`
		From     string          `json:"from"`
		Seq      int64           `json:"seq"`
		Prev     string          `json:"prev"`
	}
	to := strings.Repeat("ab", 32)
	v := call[vacantOut](t, cs, "vacant_sign", map[string]any{"to": to, "text": "hello"})
	if v.Seq != 1 || v.Prev != vacant.ZeroHash {
		t.Fatalf("vacant chain position: %d %s", v.Seq, v.Prev)
	}
	if r := vacant.Validate(v.Envelope); !r.Valid {
		t.Fatalf("vacant_sign: %s: %v", v.Envelope, r.Errors)
	}
}

// TestToolErrors: every tool's validation error, as the error object the
// model reads (name and exact codes).
func TestToolErrors(t *testing.T) {
	f := newFixture(t)
	cs := connect(t, f.cfg)
	call[json.RawMessage](t, cs, "create_inbox", map[string]any{"username": "shop", "domain": "shop.test"})
	call[json.RawMessage](t, cs, "create_inbox", map[string]any{"username": "bob", "domain": "buyer.test"})
	sent := call[api.SendResult](t, cs, "send_envelopay", map[string]any{"inbox_id": bob, "to": []string{shop}, "type": "which"})
	for _, c := range []struct {
		tool  string
		args  map[string]any
		name  string
		codes []string
	}{
		{"list_inboxes", map[string]any{"limit": 5000}, "ValidationError", []string{"invalid_field"}},
		{"create_inbox", map[string]any{"username": "x", "domain": "elsewhere.test"}, "ValidationError", []string{"invalid_field"}},
		{"list_threads", map[string]any{"inbox_id": "nobody@shop.test"}, "NotFoundError", nil},
		{"list_threads", map[string]any{"page_token": "%%%"}, "ValidationError", []string{"invalid_field"}},
		{"get_thread", map[string]any{"inbox_id": shop, "thread_id": "nope"}, "NotFoundError", nil},
		{"list_messages", map[string]any{"inbox_id": shop, "limit": 0, "labels": []string{"a b"}}, "ValidationError", []string{"invalid_field"}},
		{"get_message", map[string]any{"inbox_id": shop, "message_id": "<nope@shop.test>"}, "NotFoundError", nil},
		{"get_raw", map[string]any{"inbox_id": shop, "message_id": "999999"}, "NotFoundError", nil},
		{"send_envelopay", map[string]any{"inbox_id": bob, "to": []string{shop}, "type": "bogus"}, "ValidationError", []string{"unknown_type"}},
		{"send_envelopay", map[string]any{"inbox_id": bob, "to": []string{shop}, "type": "order", "body": map[string]any{"type": "pay"}}, "ValidationError", []string{"type_mismatch"}},
		{"send_envelopay", map[string]any{"inbox_id": bob, "to": []string{"not an address"}, "type": "which"}, "ValidationError", []string{"invalid_field"}},
		{"send_envelopay", map[string]any{"inbox_id": shop, "to": []string{bob}, "type": "fulfill", "body": map[string]any{"order_ref": "ord_nope", "result": map[string]any{"summary": "x"}}}, "ValidationError", []string{"unknown_ref"}},
		{"reply", map[string]any{"inbox_id": shop, "text": "hi"}, "ValidationError", []string{"invalid_field"}},
		{"reply", map[string]any{"inbox_id": shop, "message_id": "<nope@shop.test>", "text": "hi"}, "NotFoundError", nil},
		{"wait_for_message", map[string]any{"inbox_id": shop, "timeout_seconds": 301}, "ValidationError", []string{"invalid_field"}},
		{"wait_for_message", map[string]any{"inbox_id": shop, "type": "bill"}, "ValidationError", []string{"invalid_field"}},
		{"wait_for_message", map[string]any{"inbox_id": shop, "labels": []string{"a b"}}, "ValidationError", []string{"invalid_field"}},
		{"wait_for_message", map[string]any{"inbox_id": "nobody@shop.test"}, "NotFoundError", nil},
		{"wait_for_message", map[string]any{"inbox_id": bob, "after_message_id": "<nope@buyer.test>"}, "NotFoundError", nil},
		{"label_message", map[string]any{"inbox_id": bob, "message_id": sent.MessageID, "add_labels": []string{"accepted"}}, "ValidationError", []string{"invalid_field"}},
		{"aicp_sign", map[string]any{"message": map[string]any{"from": "a"}, "now": "yesterday"}, "ValidationError", []string{"invalid_field"}},
		{"vacant_sign", map[string]any{"to": strings.Repeat("ab", 32), "message": map[string]any{}}, "ValidationError", []string{"invalid_field"}},
		{"vacant_sign", map[string]any{"to": "xyz", "text": "hi"}, "ValidationError", []string{"invalid_field"}},
		{"vacant_sign", map[string]any{"to": strings.Repeat("ab", 32), "text": "hi", "seq": 3}, "ValidationError", []string{"invalid_field"}},
	} {
		e := toolError(t, cs, c.tool, c.args)
		if e.Name != c.name || !slices.Equal(codes(e), c.codes) {
			t.Errorf("%s %v: got %s %v (%s), want %s %v", c.tool, c.args, e.Name, codes(e), e.Message, c.name, c.codes)
		}
	}
	// Arguments that do not fit the input schema are refused by the SDK.
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "get_message", Arguments: map[string]any{"inbox_id": shop}})
	if err != nil || !res.IsError || !strings.Contains(text(res), "message_id") {
		t.Errorf("missing required argument: %v %s", err, text(res))
	}

	// A scoped principal sees only its inboxes, and others as not found.
	cfg := f.cfg
	cfg.Principal = &api.Principal{KeyID: "k", Inboxes: []string{bob}}
	scoped := connect(t, cfg)
	if l := call[api.ListInboxes](t, scoped, "list_inboxes", nil); l.Count != 1 || l.Inboxes[0].InboxID != bob {
		t.Errorf("scoped list: %+v", l)
	}
	if e := toolError(t, scoped, "get_thread", map[string]any{"inbox_id": shop, "thread_id": sent.ThreadID}); e.Name != "NotFoundError" {
		t.Errorf("scoped get_thread: %+v", e)
	}
	// No principal (an HTTP server's tools reached without a key).
	cfg.Principal = nil
	if e := toolError(t, connect(t, cfg), "list_inboxes", nil); e.Name != "UnauthorizedError" {
		t.Errorf("no principal: %+v", e)
	}
	// No signing keys configured.
	cfg.Principal, cfg.AICPKey = f.cfg.Principal, nil
	if e := toolError(t, connect(t, cfg), "aicp_sign", map[string]any{"message": map[string]any{}}); e.Name != "NotImplementedError" {
		t.Errorf("no AICP key: %+v", e)
	}
}

type throttle struct {
	mu    sync.Mutex
	fails []string
}

func (th *throttle) Allow(string, bool) (time.Duration, bool) {
	th.mu.Lock()
	defer th.mu.Unlock()
	if len(th.fails) >= 3 {
		return 30 * time.Second, false
	}
	return 0, true
}
func (th *throttle) Fail(ip, account string) (time.Duration, bool) {
	th.mu.Lock()
	defer th.mu.Unlock()
	th.fails = append(th.fails, ip+"/"+account)
	return 0, false
}
func (th *throttle) Succeed(string, string) {}

type bearer struct{ key string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}

// TestHTTP: streamable HTTP with the API's bearer keys and their scope;
// bad keys are 401 and counted by the throttle, which then answers 429.
func TestHTTP(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	newKey := func(inboxes []string) string {
		key, k, err := api.NewKey(inboxes, "", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := f.relay.Store.CreateAPIKey(ctx, k); err != nil {
			t.Fatal(err)
		}
		return key
	}
	th := &throttle{}
	srv := httptest.NewServer(mcp.NewHTTPHandler(f.cfg, mcp.HTTPOptions{Keys: f.relay.Store, Throttle: th}))
	t.Cleanup(srv.Close)
	dial := func(key string) (*sdk.ClientSession, error) {
		tr := &sdk.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: &http.Client{Transport: bearer{key}}}
		return sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, tr, nil)
	}
	if _, _, err := f.svc.CreateInbox(ctx, &api.Principal{}, api.CreateInboxRequest{Username: "shop", Domain: "shop.test"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.svc.CreateInbox(ctx, &api.Principal{}, api.CreateInboxRequest{Username: "bob", Domain: "buyer.test"}); err != nil {
		t.Fatal(err)
	}
	cs, err := dial(newKey([]string{bob}))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	// The HTTP session's principal is its key, not cfg.Principal.
	if l := call[api.ListInboxes](t, cs, "list_inboxes", nil); l.Count != 1 || l.Inboxes[0].InboxID != bob {
		t.Fatalf("scoped list over HTTP: %+v", l)
	}
	sent := call[api.SendResult](t, cs, "send_envelopay", map[string]any{"inbox_id": bob, "to": []string{shop}, "type": "which"})
	if sent.MessageID == "" {
		t.Fatal("no message id")
	}
	bad := "ek_000000000000_" + strings.Repeat("A", 43)
	if _, err := dial(bad); err == nil || !strings.Contains(strings.ToLower(err.Error()), "unauthorized") {
		t.Fatalf("bad key: %v", err)
	}
	// Each refused request is counted (the client may send more than one
	// per connection attempt).
	for len(th.fails) < 3 {
		if _, err := dial(bad); err == nil {
			t.Fatal("bad key accepted")
		}
	}
	for _, f := range th.fails {
		if f != "127.0.0.1/000000000000" {
			t.Fatalf("throttle fails: %v", th.fails)
		}
	}
	// A request without a key counts too.
	th.fails = th.fails[:2]
	req, _ := http.NewRequest("POST", srv.URL, strings.NewReader("{}"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || len(th.fails) != 3 || th.fails[2] != "127.0.0.1/" {
		t.Fatalf("no key: %d, fails %v", resp.StatusCode, th.fails)
	}
	req, _ = http.NewRequest("POST", srv.URL, strings.NewReader("{}"))
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "30" {
		t.Fatalf("throttled: %d %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

// TestHTTPWaitOutlastsWriteTimeout: a wait longer than the HTTP server's
// write timeout (serve's is 2 minutes, a wait up to 5) is answered: the
// handler extends the write deadline of its request.
func TestHTTPWaitOutlastsWriteTimeout(t *testing.T) {
	f := newFixture(t)
	key, _ := f.shopKey(t)
	srv := httptest.NewUnstartedServer(mcp.NewHTTPHandler(f.cfg, mcp.HTTPOptions{Keys: f.relay.Store}))
	srv.Config.WriteTimeout = time.Second
	srv.Start()
	t.Cleanup(srv.Close)
	cs := dialHTTP(t, srv.URL, key)
	w := call[api.WaitResult](t, cs, "wait_for_message", map[string]any{"inbox_id": shop, "timeout_seconds": 2})
	if !w.TimedOut {
		t.Fatalf("wait: %+v", w)
	}
}

// TestHTTPRevokedKeyEndsWait: a wait in flight ends within a second or
// so of its key's revocation (not at its timeout), and the session's next
// request is refused.
func TestHTTPRevokedKeyEndsWait(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	key, k := f.shopKey(t)
	tenants := api.NewTenants(f.relay.Store, api.TenantLimits{})
	srv := httptest.NewServer(mcp.NewHTTPHandler(f.cfg, mcp.HTTPOptions{Keys: f.relay.Store, Tenants: tenants}))
	t.Cleanup(srv.Close)
	cs := dialHTTP(t, srv.URL, key)
	done := make(chan error, 1)
	go func() {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "wait_for_message", Arguments: map[string]any{"inbox_id": shop, "timeout_seconds": 300}})
		if err == nil && !res.IsError {
			err = fmt.Errorf("the wait was answered: %s", text(res))
		} else {
			err = nil
		}
		done <- err
	}()
	// Revoke once the wait is being watched.
	for !tenants.Watched(k.ID) {
		time.Sleep(5 * time.Millisecond)
	}
	if err := f.relay.Store.RevokeAPIKey(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the wait outlived its key by 30 s")
	}
	if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "list_inboxes"}); err == nil {
		t.Error("a request with the revoked key was answered")
	}
}

// shopKey makes an unscoped key and the shop inbox; it returns the key
// and its stored form.
func (f *fixture) shopKey(t *testing.T) (string, store.APIKey) {
	t.Helper()
	ctx := context.Background()
	key, k, err := api.NewKey(nil, "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := f.relay.Store.CreateAPIKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.svc.CreateInbox(ctx, &api.Principal{}, api.CreateInboxRequest{Username: "shop", Domain: "shop.test"}); err != nil {
		t.Fatal(err)
	}
	return key, k
}

// dialHTTP opens an MCP session over streamable HTTP with key; the test
// closes it.
func dialHTTP(t *testing.T, url, key string) *sdk.ClientSession {
	t.Helper()
	tr := &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{key}}}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}
