package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/envelopd/envelopd/store"
)

// testWebhooks: the webhooks' rules. Events are fanned out to the
// webhooks their (event type, inbox) pairs select, outside the event's
// transaction; a tenant's webhooks are bounded (store.WebhookLimits);
// revoking a key disables its webhooks; claims are fair across
// endpoints (one delivery per webhook in flight, oldest event first)
// and a failing endpoint is backed off as a whole.
func testWebhooks(ctx context.Context, t *testing.T, s API) {
	now := time.Now()
	key := func(id string) {
		if err := s.CreateAPIKey(ctx, store.APIKey{ID: id, Hash: []byte("h"), CreatedAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	key("k1")
	key("k2")
	hook := func(id, keyID string, types, inboxes []string, l store.WebhookLimits) error {
		_, _, err := s.CreateWebhook(ctx, store.Webhook{ID: id, URL: "http://127.0.0.1:9/", EventTypes: types, InboxIDs: inboxes,
			Secret: "whsec_AAAA", Enabled: true, KeyID: keyID, CreatedAt: now, UpdatedAt: now}, l)
		return err
	}
	// Limits.
	l := store.WebhookLimits{PerKey: 3, PerInbox: 2, EventTypes: 2, EventTypeLen: 20, Inboxes: 2}
	for _, tc := range []struct {
		name           string
		types, inboxes []string
	}{
		{"event types", []string{"message.received", "message.sent", "message.bounced"}, nil},
		{"event type length", []string{"message.received.and.more"}, nil},
		{"inboxes", nil, []string{"a@x.test", "b@x.test", "c@x.test"}},
	} {
		if err := hook("wh_bad", "k1", tc.types, tc.inboxes, l); !errors.Is(err, store.ErrLimit) {
			t.Errorf("%s over the limit: %v, want ErrLimit", tc.name, err)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(hook("wh_a1", "k1", []string{store.EventReceived}, []string{"a@x.test"}, l))
	must(hook("wh_a2", "k1", nil, []string{"a@x.test"}, l))
	if err := hook("wh_a3", "k2", nil, []string{"a@x.test"}, l); !errors.Is(err, store.ErrLimit) {
		t.Errorf("third webhook of an inbox: %v, want ErrLimit", err)
	}
	must(hook("wh_b", "k1", []string{store.EventSent}, nil, l))
	if err := hook("wh_c", "k1", nil, []string{"c@x.test"}, l); !errors.Is(err, store.ErrLimit) {
		t.Errorf("fourth webhook of a key: %v, want ErrLimit", err)
	}
	must(hook("wh_k2", "k2", nil, []string{"b@x.test"}, l))

	// Fan-out: a@ received → wh_a1, wh_a2; b@ received → wh_k2.
	for i, rcpt := range []string{"a@x.test", "b@x.test", "a@x.test"} {
		in := msg(fmt.Sprintf("wh%d@x.test", i), "s@y.test", fmt.Sprintf("ord_wh%d", i), nil)
		in.Recipients = []string{rcpt}
		if _, err := s.Ingest(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	ds, err := s.ClaimWebhookDeliveries(ctx, time.Now(), time.Minute, 100, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, d := range ds {
		got[d.Webhook.ID]++
	}
	// One per webhook: wh_a1 and wh_a2 have two events each, wh_k2 one.
	if len(ds) != 3 || got["wh_a1"] != 1 || got["wh_a2"] != 1 || got["wh_k2"] != 1 {
		t.Fatalf("first claim: %v, want one delivery for each of wh_a1, wh_a2, wh_k2", got)
	}
	first := map[string]int64{}
	for _, d := range ds {
		first[d.Webhook.ID] = d.Event.ID
	}
	if again, _ := s.ClaimWebhookDeliveries(ctx, time.Now(), time.Minute, 100, 0, nil); len(again) != 0 {
		t.Errorf("claimed while every webhook is in flight: %d", len(again))
	}
	// wh_a1 fails: backed off, its second delivery waits; wh_a2 succeeds
	// and goes on with its second event.
	must(s.WebhookDeliveryRetry(ctx, "wh_a1", first["wh_a1"], time.Now().Add(time.Hour), "HTTP 503"))
	must(s.WebhookDeliveryDone(ctx, "wh_a2", first["wh_a2"]))
	ds, err = s.ClaimWebhookDeliveries(ctx, time.Now(), time.Minute, 100, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 1 || ds[0].Webhook.ID != "wh_a2" || ds[0].Event.ID <= first["wh_a2"] {
		t.Errorf("after a failure and a success: %+v, want wh_a2's second event only", ds)
	}
	w, err := s.WebhookByID(ctx, "wh_a1")
	if err != nil || w.State() != "failing" || w.Failures != 1 {
		t.Errorf("failed endpoint: %+v %v", w, err)
	}
	// Revoking k2 disables wh_k2 at once.
	must(s.RevokeAPIKey(ctx, "k2"))
	w, err = s.WebhookByID(ctx, "wh_k2")
	if err != nil || w.Enabled || w.DisabledReason != "key_revoked" || w.State() != "disabled" {
		t.Errorf("webhook of a revoked key: %+v %v", w, err)
	}
	in := msg("wh9@x.test", "s@y.test", "ord_wh9", nil)
	in.Recipients = []string{"b@x.test"}
	if _, err := s.Ingest(ctx, in); err != nil {
		t.Fatal(err)
	}
	must(s.WebhookDeliveryDone(ctx, "wh_k2", first["wh_k2"]))
	if ds, _ := s.ClaimWebhookDeliveries(ctx, time.Now(), time.Minute, 100, 0, nil); len(ds) != 0 {
		t.Errorf("claimed after the revocation: %+v", ds)
	}
	st, err := s.WebhookDeliveries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range st {
		if d.WebhookID == "wh_k2" && d.State == "pending" {
			t.Errorf("an event fanned out to a disabled webhook: %+v", d)
		}
	}
}

// testWebhookOwners: a claim gives one owner (API key) at most perOwner
// deliveries in flight, counting those the caller has in flight already.
func testWebhookOwners(ctx context.Context, t *testing.T, s API) {
	now := time.Now()
	for i, owner := range []string{"k1", "k1", "k1", "k2"} {
		if _, _, err := s.CreateWebhook(ctx, store.Webhook{ID: fmt.Sprintf("wh_%d", i), URL: "http://127.0.0.1:9/", Secret: "whsec_AAAA",
			Enabled: true, KeyID: owner, CreatedAt: now, UpdatedAt: now}, store.WebhookLimits{}); err != nil {
			t.Fatal(err)
		}
	}
	in := msg("own@x.test", "s@y.test", "ord_own", nil)
	if _, err := s.Ingest(ctx, in); err != nil {
		t.Fatal(err)
	}
	owners := func(ds []store.WebhookDelivery) map[string]int {
		m := map[string]int{}
		for _, d := range ds {
			m[d.Webhook.KeyID]++
		}
		return m
	}
	// k1 has one in flight already: one more; k2 one.
	ds, err := s.ClaimWebhookDeliveries(ctx, time.Now(), time.Minute, 100, 2, map[string]int{"k1": 1})
	if got := owners(ds); err != nil || len(ds) != 2 || got["k1"] != 1 || got["k2"] != 1 {
		t.Fatalf("claim with k1 busy: %v %v, want one each", got, err)
	}
	ds, err = s.ClaimWebhookDeliveries(ctx, time.Now(), time.Minute, 100, 2, map[string]int{"k1": 2, "k2": 1})
	if err != nil || len(ds) != 0 {
		t.Errorf("claim with k1 at its share: %v %v", owners(ds), err)
	}
	ds, err = s.ClaimWebhookDeliveries(ctx, time.Now(), time.Minute, 100, 0, nil)
	if got := owners(ds); err != nil || len(ds) != 2 || got["k1"] != 2 {
		t.Errorf("claim without a share: %v %v, want k1's other two", got, err)
	}
}
