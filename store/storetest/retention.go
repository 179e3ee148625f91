package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/envelopd/envelopd/store"
)

// testRetention: the API's event log and Idempotency-Key records are
// forgotten after their retention, never an event that may still be
// delivered to a webhook (not fanned out yet, or at or after a pending
// delivery).
func testRetention(ctx context.Context, t *testing.T, st API) {
	s, p := st, st
	now := time.Now()
	if _, _, err := s.CreateWebhook(ctx, store.Webhook{ID: "wh_keep", URL: "http://127.0.0.1:9/", Secret: "whsec_AAAA", Enabled: true,
		CreatedAt: now, UpdatedAt: now}, store.WebhookLimits{}); err != nil {
		t.Fatal(err)
	}
	for i, at := range []time.Time{now.Add(-72 * time.Hour), now.Add(-48 * time.Hour), now.Add(-47 * time.Hour), now, now} {
		in := msg(fmt.Sprintf("ret%d@x.test", i), "a@x.test", fmt.Sprintf("ret_%d", i), func(in *store.Incoming) { in.ReceivedAt = at })
		if _, err := st.Ingest(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	events := func() []store.Event {
		t.Helper()
		es, err := s.Events(ctx, store.EventFilter{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		return es
	}
	// Postgres shows an event once every older transaction has ended.
	for deadline := time.Now().Add(10 * time.Second); len(events()) < 5 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	prune := func(want int) {
		t.Helper()
		n, err := p.PruneAPILogs(ctx, now, 24*time.Hour, 0)
		if err != nil || n != want {
			t.Fatalf("PruneAPILogs: %d, %v; want %d", n, err, want)
		}
	}
	prune(0) // not fanned out to the webhook yet
	d, err := s.ClaimWebhookDeliveries(ctx, now, time.Minute, 10, 0, nil)
	if err != nil || len(d) != 1 {
		t.Fatalf("claim: %v %v", d, err)
	}
	prune(0) // the oldest is in flight
	for range 5 {
		if err := s.WebhookDeliveryDone(ctx, d[0].Webhook.ID, d[0].Event.ID); err != nil {
			t.Fatal(err)
		}
		if d, err = s.ClaimWebhookDeliveries(ctx, now, time.Minute, 10, 0, nil); err != nil {
			t.Fatal(err)
		}
		if len(d) == 0 {
			break
		}
		if d[0].Event.CreatedAt.After(now.Add(-24 * time.Hour)) {
			// The recent ones stay pending; the old ones are done.
			break
		}
	}
	prune(3)
	es := events()
	if len(es) != 2 {
		t.Fatalf("%d events left, want the 2 recent: %+v", len(es), es)
	}
	for _, e := range es {
		if e.CreatedAt.Before(now.Add(-24 * time.Hour)) {
			t.Errorf("old event %+v kept", e)
		}
	}
	ds, err := s.WebhookDeliveries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 2 {
		t.Errorf("%d deliveries left, want the 2 of the recent events: %+v", len(ds), ds)
	}
	prune(0)

	// Idempotency-Key records.
	for key, at := range map[string]time.Time{"old": now.Add(-25 * time.Hour), "new": now.Add(-time.Hour)} {
		if c, _, _, err := s.ClaimIdempotency(ctx, "k1", key, []byte("req"), at, time.Minute); err != nil || !c {
			t.Fatalf("claim %s: %v %v", key, c, err)
		}
		if err := s.FinishIdempotency(ctx, "k1", key, 200, []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := p.PruneAPILogs(ctx, now, 0, 24*time.Hour); err != nil || n != 1 {
		t.Fatalf("PruneAPILogs idempotency: %d, %v; want 1", n, err)
	}
	if c, _, _, err := s.ClaimIdempotency(ctx, "k1", "old", []byte("other"), now, time.Minute); err != nil || !c {
		t.Errorf("a forgotten key claimed again: %v %v", c, err)
	}
	if _, _, _, err := s.ClaimIdempotency(ctx, "k1", "new", []byte("other"), now, time.Minute); err == nil {
		t.Errorf("a kept key taken by another request")
	}
}
