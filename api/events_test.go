package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

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
