package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/envelopd/envelopd/api"
	"github.com/envelopd/envelopd/store"
)

// wsEvent is what the tests read of a websocket message.
type wsEvent struct {
	Type       string   `json:"type"`
	EventType  string   `json:"event_type"`
	EventID    string   `json:"event_id"`
	EventTypes []string `json:"event_types"`
	InboxIDs   []string `json:"inbox_ids"`
	Name       string   `json:"name"`
	Message    *struct {
		InboxID   string   `json:"inbox_id"`
		MessageID string   `json:"message_id"`
		Subject   string   `json:"subject"`
		Labels    []string `json:"labels"`
		Envelopay struct {
			Status string `json:"status"`
		} `json:"envelopay"`
	} `json:"message"`
	Thread *struct {
		ThreadID     string `json:"thread_id"`
		MessageCount int    `json:"message_count"`
	} `json:"thread"`
	Send *struct {
		InboxID    string   `json:"inbox_id"`
		MessageID  string   `json:"message_id"`
		Recipients []string `json:"recipients"`
	} `json:"send"`
	Delivery *struct {
		MessageID  string   `json:"message_id"`
		Recipients []string `json:"recipients"`
	} `json:"delivery"`
	Reject *struct {
		InboxID   string    `json:"inbox_id"`
		ThreadID  string    `json:"thread_id"`
		MessageID string    `json:"message_id"`
		Timestamp time.Time `json:"timestamp"`
		Reason    string    `json:"reason"`
	} `json:"reject"`
	Bounce *struct {
		MessageID  string `json:"message_id"`
		Recipients []struct {
			Address string `json:"address"`
			Status  string `json:"status"`
		} `json:"recipients"`
	} `json:"bounce"`
}

func (e *env) dial(ctx context.Context, key, query string) (*websocket.Conn, *http.Response, error) {
	u := "ws" + strings.TrimPrefix(e.srv.URL, "http") + "/v0?api_key=" + url.QueryEscape(key) + query
	return websocket.Dial(ctx, u, nil)
}

func wsSend(t *testing.T, ctx context.Context, c *websocket.Conn, v any) {
	t.Helper()
	b, _ := json.Marshal(v)
	if err := c.Write(ctx, websocket.MessageText, b); err != nil {
		t.Fatal(err)
	}
}

func wsRead(t *testing.T, ctx context.Context, c *websocket.Conn) wsEvent {
	t.Helper()
	_, b, err := c.Read(ctx)
	if err != nil {
		t.Fatalf("websocket read: %v", err)
	}
	var ev wsEvent
	if strings.Contains(string(b), `"type":"error"`) {
		var e struct{ Type, Name string }
		err := json.Unmarshal(b, &e)
		ev.Type, ev.Name = e.Type, e.Name
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatalf("websocket message %s: %v", b, err)
	}
	return ev
}

// subscribe connects and subscribes; it returns once subscribed.
func (e *env) subscribe(t *testing.T, ctx context.Context, key, query string, sub map[string]any) *websocket.Conn {
	t.Helper()
	c, _, err := e.dial(ctx, key, query)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.CloseNow() })
	sub["type"] = "subscribe"
	wsSend(t, ctx, c, sub)
	if ev := wsRead(t, ctx, c); ev.Type != "subscribed" {
		t.Fatalf("after subscribe: %+v", ev)
	}
	return c
}

func (e *env) receive(subject, rcpt string) {
	e.t.Helper()
	mid := strings.ReplaceAll(subject, " ", "-") + "@buyer.test"
	raw := fmt.Sprintf("From: b@buyer.test\r\nTo: %s\r\nSubject: %s\r\nMessage-ID: <%s>\r\n\r\nbody\r\n", rcpt, subject, mid)
	if _, err := e.st.Ingest(context.Background(), &store.Incoming{Direction: store.DirIn, Raw: []byte(raw), MessageID: mid,
		Sender: "b@buyer.test", Recipients: []string{rcpt}, Subject: subject, Status: store.StatusAccepted,
		ReceivedAt: time.Now()}); err != nil {
		e.t.Fatal(err)
	}
}

func TestWebsocketAuth(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, key := range []string{"", "ek_000000000000_" + strings.Repeat("A", 43)} {
		_, resp, err := e.dial(ctx, key, "")
		if err == nil || resp == nil || resp.StatusCode != 401 {
			t.Errorf("key %q: %v %v", key, resp, err)
		}
	}
	e.throttle.mu.Lock()
	n := len(e.throttle.fails)
	e.throttle.mu.Unlock()
	if n != 2 {
		t.Errorf("throttle saw %d failures, want 2", n)
	}
	if _, resp, err := e.dial(ctx, e.key, "&last_event_id=nope"); err == nil || resp.StatusCode != 400 {
		t.Errorf("bad last_event_id: %v %v", resp, err)
	}
	// A frame that is not a subscribe gets an error message, not a close.
	c, _, err := e.dial(ctx, e.key, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	wsSend(t, ctx, c, map[string]any{"type": "hello"})
	if ev := wsRead(t, ctx, c); ev.Type != "error" || ev.Name != "ValidationError" {
		t.Errorf("bad frame: %+v", ev)
	}
	wsSend(t, ctx, c, map[string]any{"type": "subscribe", "event_types": []string{"nope"}})
	if ev := wsRead(t, ctx, c); ev.Type != "error" {
		t.Errorf("bad event type: %+v", ev)
	}
	wsSend(t, ctx, c, map[string]any{"type": "subscribe", "event_types": []string{"message.received"}, "inbox_ids": []string{"A@Shop.test"}})
	if ev := wsRead(t, ctx, c); ev.Type != "subscribed" || ev.EventTypes[0] != "message.received" || ev.InboxIDs[0] != "a@shop.test" {
		t.Errorf("subscribed: %+v", ev)
	}
}

// TestWebsocketEvents: filtered by inbox and type, in order; a reconnect
// with last_event_id gets what it missed; a scoped key sees only its
// inboxes.
func TestWebsocketEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := e.subscribe(t, ctx, e.key, "", map[string]any{"inbox_ids": []string{"a@shop.test"}, "event_types": []string{"message.received"}})
	scoped := e.subscribe(t, ctx, e.newKey([]string{"b@shop.test"}), "", map[string]any{})
	for i := 0; i < 3; i++ {
		e.receive(fmt.Sprintf("to b %d", i), "b@shop.test")
		e.receive(fmt.Sprintf("to a %d", i), "a@shop.test")
	}
	var last string
	for i := 0; i < 3; i++ {
		ev := wsRead(t, ctx, c)
		if ev.Type != "event" || ev.EventType != "message.received" || ev.Message == nil || ev.Message.InboxID != "a@shop.test" ||
			ev.Message.Subject != fmt.Sprintf("to a %d", i) || ev.Message.MessageID != fmt.Sprintf("<to-a-%d@buyer.test>", i) ||
			ev.Thread == nil || ev.Thread.MessageCount != 1 || ev.Message.Envelopay.Status != "accepted" || ev.Message.Labels[0] != "received" {
			t.Fatalf("event %d: %+v", i, ev)
		}
		if last >= ev.EventID && len(last) >= len(ev.EventID) {
			t.Errorf("event ids out of order: %s then %s", last, ev.EventID)
		}
		last = ev.EventID
	}
	for i := 0; i < 3; i++ {
		ev := wsRead(t, ctx, scoped)
		if ev.Message == nil || ev.Message.InboxID != "b@shop.test" || ev.Message.Subject != fmt.Sprintf("to b %d", i) {
			t.Fatalf("scoped event %d: %+v", i, ev)
		}
	}
	c.Close(websocket.StatusNormalClosure, "")
	// Missed while away.
	e.receive("to a missed", "a@shop.test")
	e.receive("to a missed 2", "a@shop.test")
	c2 := e.subscribe(t, ctx, e.key, "&last_event_id="+last, map[string]any{"inbox_ids": []string{"a@shop.test"}})
	for _, want := range []string{"to a missed", "to a missed 2"} {
		if ev := wsRead(t, ctx, c2); ev.Message == nil || ev.Message.Subject != want {
			t.Fatalf("after reconnect: %+v, want %q", ev, want)
		}
	}
	// A scoped key subscribing to another inbox gets nothing of it.
	e.receive("to a again", "a@shop.test")
	e.receive("to b again", "b@shop.test")
	if ev := wsRead(t, ctx, scoped); ev.Message == nil || ev.Message.Subject != "to b again" {
		t.Errorf("scoped: %+v", ev)
	}
}

// TestWebsocketSendEvents: message.sent, then message.delivered and
// message.bounced as the queue records its recipients.
func TestWebsocketSendEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.createInbox("shop", "shop.test")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := e.subscribe(t, ctx, e.key, "", map[string]any{"inbox_ids": []string{"shop@shop.test"}})
	var sent struct {
		MessageID string `json:"message_id"`
		QueueID   int64  `json:"queue_id"`
	}
	if st := e.do(e.key, "POST", "/v0/inboxes/shop@shop.test/messages/send",
		`{"to":["x@buyer.test","y@buyer.test"],"subject":"hi","text":"hello"}`, &sent); st != 200 {
		t.Fatalf("send: %d", st)
	}
	if err := e.st.RecordDelivery(ctx, sent.QueueID, "x@buyer.test", store.QueueSent, "", time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := e.st.RecordDelivery(ctx, sent.QueueID, "y@buyer.test", store.QueueFailed, "550 5.1.1 no such user", time.Now()); err != nil {
		t.Fatal(err)
	}
	ev := wsRead(t, ctx, c)
	if ev.EventType != "message.sent" || ev.Send == nil || ev.Send.MessageID != sent.MessageID || ev.Send.InboxID != "shop@shop.test" ||
		strings.Join(ev.Send.Recipients, ",") != "x@buyer.test,y@buyer.test" {
		t.Errorf("sent: %+v %+v", ev, ev.Send)
	}
	ev = wsRead(t, ctx, c)
	if ev.EventType != "message.delivered" || ev.Delivery == nil || ev.Delivery.MessageID != sent.MessageID || ev.Delivery.Recipients[0] != "x@buyer.test" {
		t.Errorf("delivered: %+v", ev)
	}
	ev = wsRead(t, ctx, c)
	if ev.EventType != "message.bounced" || ev.Bounce == nil || ev.Bounce.Recipients[0].Address != "y@buyer.test" ||
		ev.Bounce.Recipients[0].Status != "550 5.1.1 no such user" {
		t.Errorf("bounced: %+v", ev)
	}
}

// TestWebsocketVariantEvents: mail from a sender the receive lists
// block is message.received.blocked, mail whose sender verdict
// authenticates no domain message.received.unauthenticated (each the
// received payload: message and thread), a send the send lists refuse
// message.rejected with its Reject — and a subscriber to
// message.received gets none of them.
func TestWebsocketVariantEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.createInbox("shop", "shop.test")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	all := e.subscribe(t, ctx, e.key, "", map[string]any{"inbox_ids": []string{"shop@shop.test"}})
	plain := e.subscribe(t, ctx, e.key, "", map[string]any{"event_types": []string{"message.received"}})
	for _, p := range []string{`/v0/lists/receive/block`, `/v0/lists/send/block`} {
		if c := e.do(e.key, "POST", p, `{"entry":"evil.test"}`, nil); c != 200 {
			t.Fatal(c)
		}
	}
	in := func(subject, from string, result string) {
		t.Helper()
		mid := strings.ReplaceAll(subject, " ", "-") + "@x.test"
		raw := fmt.Sprintf("From: %s\r\nTo: shop@shop.test\r\nSubject: %s\r\nMessage-ID: <%s>\r\n\r\nbody\r\n", from, subject, mid)
		var r json.RawMessage
		if result != "" {
			r = json.RawMessage(result)
		}
		if _, err := e.st.Ingest(ctx, &store.Incoming{Direction: store.DirIn, Raw: []byte(raw), MessageID: mid, Sender: from,
			Recipients: []string{"shop@shop.test"}, Subject: subject, Status: store.StatusAccepted, ReceivedAt: time.Now(), Result: r}); err != nil {
			t.Fatal(err)
		}
	}
	in("spam one", "x@evil.test", "")
	in("who knows", "y@good.test", `{"sender":{"spf":{"result":"none"},"dmarc":null,"arc":null,"authenticated_as":null}}`)
	var er struct{ Name string }
	if c := e.do(e.key, "POST", "/v0/inboxes/shop@shop.test/messages/send", map[string]any{"to": "z@evil.test", "subject": "no", "text": "x"}, &er); c != 403 || er.Name != "MessageRejectedError" {
		t.Fatalf("send to a blocked recipient: %d %+v", c, er)
	}
	in("hello", "y@good.test", `{"sender":{"spf":{"result":"pass"},"dmarc":null,"arc":null,"authenticated_as":"good.test","authenticated_by":"spf"}}`)

	ev := wsRead(t, ctx, all)
	if ev.EventType != "message.received.blocked" || ev.Message == nil || ev.Message.Subject != "spam one" || ev.Thread == nil ||
		!slices.Contains(ev.Message.Labels, "blocked") {
		t.Errorf("blocked: %+v %+v", ev, ev.Message)
	}
	ev = wsRead(t, ctx, all)
	if ev.EventType != "message.received.unauthenticated" || ev.Message == nil || ev.Message.Subject != "who knows" || ev.Thread == nil {
		t.Errorf("unauthenticated: %+v", ev)
	}
	ev = wsRead(t, ctx, all)
	if ev.EventType != "message.rejected" || ev.Reject == nil || ev.Reject.InboxID != "shop@shop.test" || ev.Reject.ThreadID == "" ||
		!strings.HasSuffix(ev.Reject.MessageID, "@shop.test>") || !strings.Contains(ev.Reject.Reason, "evil.test") || ev.Reject.Timestamp.IsZero() {
		t.Errorf("rejected: %+v %+v", ev, ev.Reject)
	}
	ev = wsRead(t, ctx, all)
	if ev.EventType != "message.received" || ev.Message == nil || ev.Message.Subject != "hello" {
		t.Errorf("received: %+v", ev)
	}
	if ev := wsRead(t, ctx, plain); ev.EventType != "message.received" || ev.Message == nil || ev.Message.Subject != "hello" {
		t.Errorf("message.received subscriber: %+v", ev)
	}
}

// TestInboxEvents: the labels an API call adds and removes are the
// inbox's events (the SDK's inboxes.events.list), newest first, paged.
func TestInboxEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.createInbox("shop", "shop.test")
	e.createInbox("other", "shop.test")
	e.receive("hi there", "shop@shop.test")
	for _, body := range []string{`{"add_labels":["todo","vip"]}`, `{"add_labels":["vip"],"remove_labels":["todo"]}`} {
		if c := e.do(e.key, "PATCH", "/v0/inboxes/shop@shop.test/messages/hi-there@buyer.test", body, nil); c != 200 {
			t.Fatalf("label: %d", c)
		}
	}
	var l api.InboxEventsObject
	if c := e.do(e.key, "GET", "/v0/inboxes/shop@shop.test/events?limit=2", nil, &l); c != 200 {
		t.Fatalf("list: %d", c)
	}
	got := []string{}
	for _, ev := range l.Events {
		got = append(got, ev.EventType+" "+ev.Label)
		if ev.InboxID != "shop@shop.test" || ev.MessageID != "<hi-there@buyer.test>" || ev.EventID == "" || ev.PodID == "" ||
			ev.OrganizationID == "" || ev.EventAt.IsZero() || ev.CreatedAt.IsZero() {
			t.Errorf("event %+v", ev)
		}
	}
	if l.Count != 2 || l.NextPageToken == "" || strings.Join(got, ",") != "label.removed todo,label.added vip" {
		t.Fatalf("first page: %+v (%v)", l, got)
	}
	tok := l.NextPageToken
	l.NextPageToken = ""
	if c := e.do(e.key, "GET", "/v0/inboxes/shop@shop.test/events?limit=2&page_token="+url.QueryEscape(tok), nil, &l); c != 200 ||
		l.Count != 1 || l.Events[0].EventType != "label.added" || l.Events[0].Label != "todo" || l.NextPageToken != "" {
		t.Errorf("second page: %d %+v", c, l)
	}
	if c := e.do(e.key, "GET", "/v0/inboxes/shop@shop.test/events?ascending=true", nil, &l); c != 200 || l.Count != 3 || l.Events[0].Label != "todo" ||
		l.Events[0].EventType != "label.added" {
		t.Errorf("ascending: %d %+v", c, l)
	}
	if c := e.do(e.key, "GET", "/v0/inboxes/other@shop.test/events", nil, &l); c != 200 || l.Count != 0 || l.Events == nil {
		t.Errorf("other inbox: %d %+v", c, l)
	}
	scoped := e.newKey([]string{"other@shop.test"})
	if c := e.do(scoped, "GET", "/v0/inboxes/shop@shop.test/events", nil, nil); c != 404 {
		t.Errorf("another inbox's events with a scoped key: %d", c)
	}
}
