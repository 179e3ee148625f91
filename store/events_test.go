package store_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/envelopd/envelopd/internal/pgtest"
	"github.com/envelopd/envelopd/store"
)

// TestEventsDurable: the event log is written by the store with the
// facts it reports (received per inbox, sent, delivered, bounced), a
// webhook's deliveries are fanned out in the same transaction, and both
// survive a restart (close, reopen).
func TestEventsDurable(t *testing.T) {
	t.Parallel()
	testEventsDurable(t, filepath.Join(t.TempDir(), "e.db"))
}

// TestPostgresEventsDurable is TestEventsDurable on Postgres.
func TestPostgresEventsDurable(t *testing.T) {
	t.Parallel()
	testEventsDurable(t, pgtest.Schema(t))
}

func testEventsDurable(t *testing.T, path string) {
	ctx := context.Background()
	s, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, _, err := s.CreateWebhook(ctx, store.Webhook{ID: "wh_1", URL: "http://x.test/", EventTypes: []string{store.EventReceived},
		InboxIDs: []string{"b@x.test"}, Secret: "whsec_AAAA", Enabled: true, CreatedAt: now, UpdatedAt: now}, store.WebhookLimits{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ingest(ctx, &store.Incoming{Direction: store.DirIn, MessageID: "m1@x.test", Sender: "alice@x.test",
		Recipients: []string{"A@x.test", "b@x.test", "a@x.test"}, Raw: []byte("m1"), Status: store.StatusAccepted, ReceivedAt: now}); err != nil {
		t.Fatal(err)
	}
	// Storing the same message again (a redelivery) logs nothing.
	if _, err := s.Ingest(ctx, &store.Incoming{Direction: store.DirIn, MessageID: "m1@x.test", Sender: "alice@x.test",
		Recipients: []string{"a@x.test", "b@x.test"}, Raw: []byte("m1"), Status: store.StatusAccepted, ReceivedAt: now}); err != nil {
		t.Fatal(err)
	}
	qid, err := s.Enqueue(ctx, &store.Outgoing{From: "b@x.test", MessageID: "s1@x.test", Raw: []byte("s1"),
		Recipients: []string{"c@y.test", "d@y.test"},
		Copy:       &store.Incoming{MessageID: "s1@x.test", Sender: "b@x.test", Recipients: []string{"c@y.test", "d@y.test"}, Raw: []byte("s1"), Status: store.StatusAccepted}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RecordDelivery(ctx, qid, "c@y.test", store.QueueSent, "", now); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordDelivery(ctx, qid, "d@y.test", store.QueuePending, "451 later", now); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordDelivery(ctx, qid, "d@y.test", store.QueueFailed, "550 no", now); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s, err = store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// On Postgres the log shows an event once every transaction older
	// than it has ended (other tests run on the same server): wait for
	// the five, then check them.
	var evs []store.Event
	for deadline := time.Now().Add(10 * time.Second); ; {
		if evs, err = s.Events(ctx, store.EventFilter{}); err != nil {
			t.Fatal(err)
		}
		if len(evs) >= 5 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	var got []string
	for i, e := range evs {
		if i > 0 && e.ID <= evs[i-1].ID {
			t.Errorf("ids out of order: %+v", evs)
		}
		got = append(got, e.Type+" "+e.Inbox+" "+strings.Join(e.Recipients, ",")+" "+e.Detail)
	}
	want := []string{
		"message.received a@x.test  ",
		"message.received b@x.test  ",
		"message.sent b@x.test  ",
		"message.delivered b@x.test c@y.test ",
		"message.bounced b@x.test d@y.test 550 no",
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("events:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if last, err := s.LastEventID(ctx); err != nil || last != evs[len(evs)-1].ID {
		t.Errorf("last %d %v", last, err)
	}
	// Filters.
	f, _ := s.Events(ctx, store.EventFilter{After: evs[0].ID, Inboxes: []string{"b@x.test"}, Types: []string{store.EventBounced, store.EventReceived}})
	if len(f) != 2 || f[0].Type != store.EventReceived || f[1].Type != store.EventBounced {
		t.Errorf("filtered: %+v", f)
	}
	// The webhook got exactly its one event, pending after the restart.
	ds, err := s.ClaimWebhookDeliveries(ctx, time.Now(), time.Minute, 10, 0, nil)
	if err != nil || len(ds) != 1 || ds[0].Event.ID != evs[1].ID || ds[0].Webhook.URL != "http://x.test/" || ds[0].Attempts != 1 {
		t.Fatalf("deliveries: %+v %v", ds, err)
	}
	// Claimed: not again within the lease.
	if again, _ := s.ClaimWebhookDeliveries(ctx, time.Now(), time.Minute, 10, 0, nil); len(again) != 0 {
		t.Errorf("claimed twice: %+v", again)
	}
	if err := s.WebhookDeliveryRetry(ctx, "wh_1", ds[0].Event.ID, time.Now().Add(-time.Second), "HTTP 500"); err != nil {
		t.Fatal(err)
	}
	if again, _ := s.ClaimWebhookDeliveries(ctx, time.Now(), time.Minute, 10, 0, nil); len(again) != 1 || again[0].Attempts != 2 {
		t.Errorf("retry: %+v", again)
	}
	if err := s.WebhookDeliveryDone(ctx, "wh_1", ds[0].Event.ID); err != nil {
		t.Fatal(err)
	}
	if again, _ := s.ClaimWebhookDeliveries(ctx, time.Now().Add(time.Hour), time.Minute, 10, 0, nil); len(again) != 0 {
		t.Errorf("after done: %+v", again)
	}
	// WaitEvents returns at once when newer events exist, and waits otherwise.
	if err := s.WaitEvents(ctx, 0); err != nil {
		t.Error(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := s.WaitEvents(wctx, evs[len(evs)-1].ID); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("wait: %v", err)
	}
}

// TestIdempotencyClaims: one claim wins; the same request replays the
// stored answer, another request is refused; a released claim can be
// taken again, and so can a stale one.
func TestIdempotencyClaims(t *testing.T) {
	t.Parallel()
	testIdempotencyClaims(t, filepath.Join(t.TempDir(), "i.db"))
}

// TestPostgresIdempotencyClaims is TestIdempotencyClaims on Postgres.
func TestPostgresIdempotencyClaims(t *testing.T) {
	t.Parallel()
	testIdempotencyClaims(t, pgtest.Schema(t))
}

func testIdempotencyClaims(t *testing.T, db string) {
	ctx := context.Background()
	s, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Now()
	req := []byte("hash-1")
	if ok, _, _, err := s.ClaimIdempotency(ctx, "k", "K1", req, now, time.Minute); !ok || err != nil {
		t.Fatalf("first claim: %v %v", ok, err)
	}
	if _, _, _, err := s.ClaimIdempotency(ctx, "k", "K1", req, now, time.Minute); !errors.Is(err, store.ErrIdempotencyInFlight) {
		t.Errorf("second claim while running: %v", err)
	}
	if _, _, _, err := s.ClaimIdempotency(ctx, "k", "K1", []byte("hash-2"), now, time.Minute); !errors.Is(err, store.ErrIdempotencyMismatch) {
		t.Errorf("other request: %v", err)
	}
	if ok, _, _, err := s.ClaimIdempotency(ctx, "k", "K1", req, now.Add(2*time.Minute), time.Minute); !ok || err != nil {
		t.Errorf("stale claim taken over: %v %v", ok, err)
	}
	if err := s.FinishIdempotency(ctx, "k", "K1", 200, []byte(`{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	ok, status, resp, err := s.ClaimIdempotency(ctx, "k", "K1", req, now, time.Minute)
	if ok || status != 200 || string(resp) != `{"a":1}` || err != nil {
		t.Errorf("replay: %v %d %s %v", ok, status, resp, err)
	}
	if ok, _, _, _ := s.ClaimIdempotency(ctx, "other-key", "K1", []byte("x"), now, time.Minute); !ok {
		t.Error("keys are per API key")
	}
	if ok, _, _, _ := s.ClaimIdempotency(ctx, "k", "K2", req, now, time.Minute); !ok {
		t.Fatal("K2")
	}
	if err := s.FinishIdempotency(ctx, "k", "K2", 0, nil); err != nil {
		t.Fatal(err)
	}
	if ok, _, _, _ := s.ClaimIdempotency(ctx, "k", "K2", []byte("changed"), now, time.Minute); !ok {
		t.Error("a released key is free again")
	}
}
