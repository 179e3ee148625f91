package storetest

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/envelopd/envelopd/store"
)

type eventTypesStore interface {
	store.Store
	store.ListStore
	store.EventLogger
	Events(ctx context.Context, f store.EventFilter) ([]store.Event, error)
	SyncInboxes(ctx context.Context, max int) (int, error)
	InboxMessages(ctx context.Context, q store.InboxQuery) ([]store.InboxMessage, error)
}

// testEventTypes: the variants of message.received replace it for the
// mail they describe, per inbox — a sender no check authenticates
// (.unauthenticated), a sender an inbox's receive lists block
// (.blocked, and that inbox's label blocked, while another inbox of the
// same mail gets message.received) — and a refused send is logged as
// message.rejected with its detail, in the order of the facts.
func testEventTypes(ctx context.Context, t *testing.T, st API) {
	s, ok := st.(eventTypesStore)
	if !ok {
		t.Skipf("%T keeps no event log", st)
	}
	if _, err := s.PutListEntry(ctx, store.ListEntry{Scope: "a@shop.test", Direction: store.ListReceive, Type: store.ListBlock,
		Entry: "evil.test", CreatedAt: base}); err != nil {
		t.Fatal(err)
	}
	verdict := func(as any) json.RawMessage {
		b, _ := json.Marshal(map[string]any{"note": "", "sender": map[string]any{"spf": map[string]any{"result": "none"}, "authenticated_as": as}})
		return b
	}
	in := func(id, from string, result json.RawMessage) *store.Incoming {
		return &store.Incoming{Direction: store.DirIn, MessageID: id, Sender: from, Recipients: []string{"a@shop.test", "b@shop.test"},
			Raw: []byte("Message-ID: <" + id + ">\r\n\r\nx"), Status: store.StatusAccepted, ReceivedAt: base, Result: result}
	}
	for _, m := range []*store.Incoming{
		in("plain@x.test", "alice@good.test", nil),                     // no verdict: message.received
		in("auth@x.test", "alice@good.test", verdict("good.test")),     // authenticated
		in("unauth@x.test", "mallory@good.test", verdict(nil)),         // not authenticated
		in("blocked@x.test", "bob@Evil.test", verdict(nil)),            // blocked for a@, unauthenticated for b@
		in("blocked2@x.test", "carol@evil.test", verdict("evil.test")), // blocked for a@ only
	} {
		if _, err := s.Ingest(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.LogRejected(ctx, "A@shop.test", store.RejectDetail{ThreadID: "t1", MessageID: "<r@shop.test>", Reason: "recipient x@evil.test is on the send block list"}, base); err != nil {
		t.Fatal(err)
	}
	evs, err := s.Events(ctx, store.EventFilter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range evs {
		got = append(got, e.Type+" "+e.Inbox)
	}
	want := []string{
		"message.received a@shop.test", "message.received b@shop.test",
		"message.received a@shop.test", "message.received b@shop.test",
		"message.received.unauthenticated a@shop.test", "message.received.unauthenticated b@shop.test",
		"message.received.blocked a@shop.test", "message.received.unauthenticated b@shop.test",
		"message.received.blocked a@shop.test", "message.received b@shop.test",
		"message.rejected a@shop.test",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("events:\n%q\nwant\n%q", got, want)
	}
	last := evs[len(evs)-1]
	var d store.RejectDetail
	if err := json.Unmarshal([]byte(last.Detail), &d); err != nil || d.ThreadID != "t1" || d.MessageID != "<r@shop.test>" || last.MessageID != 0 ||
		!last.CreatedAt.Equal(base) {
		t.Errorf("message.rejected: %+v detail %+v (%v)", last, d, err)
	}
	// A subscription to a variant gets that variant only, and so does a
	// webhook made for it.
	only, err := s.Events(ctx, store.EventFilter{Types: []string{store.EventReceivedBlocked}})
	if err != nil || len(only) != 2 {
		t.Errorf("blocked events: %d %v, want 2", len(only), err)
	}
	if ws, ok := st.(store.APIStore); ok {
		if _, _, err := ws.CreateWebhook(ctx, store.Webhook{ID: "wh_blocked", URL: "http://127.0.0.1:9/", Secret: "whsec_AAAA", Enabled: true,
			EventTypes: []string{store.EventReceivedBlocked, store.EventRejected}, CreatedAt: base, UpdatedAt: base}, store.WebhookLimits{}); err != nil {
			t.Fatal(err)
		}
		ds, err := ws.WebhookDeliveries(ctx)
		var got []int64
		for _, d := range ds {
			got = append(got, d.EventID)
		}
		want := []int64{only[0].ID, only[1].ID, last.ID}
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("webhook deliveries of events %v (%v), want %v", got, err, want)
		}
	}
	// The inbox index labels the same messages blocked, in a@ only.
	if _, err := s.SyncInboxes(ctx, 0); err != nil {
		t.Fatal(err)
	}
	for _, inbox := range []string{"a@shop.test", "b@shop.test"} {
		ms, err := s.InboxMessages(ctx, store.InboxQuery{Inbox: inbox, Ascending: true})
		if err != nil || len(ms) != 5 {
			t.Fatalf("%s: %d messages, %v", inbox, len(ms), err)
		}
		for _, m := range ms {
			blocked := slices.Contains(m.Labels, store.LabelBlocked)
			want := inbox == "a@shop.test" && (m.MessageID == "blocked@x.test" || m.MessageID == "blocked2@x.test")
			if blocked != want {
				t.Errorf("%s %s: labels %v, blocked want %v", inbox, m.MessageID, m.Labels, want)
			}
		}
	}
}
