package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
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

// testUsage: the inbox index's usage counters. A message counts once
// per inbox that shows it, with its size, in the hour it was received;
// a thread once per inbox, when its first message is indexed; a hidden
// message still counts (it stays stored); the organisation is the sum
// over inboxes; a time counts the hours that began before it.
func testUsage(ctx context.Context, t *testing.T, s API) {
	base := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	var sizeA, sizeB int64
	in := func(id string, rcpts []string, at time.Time, refs []string) {
		t.Helper()
		raw := fmt.Sprintf("From: s@x.test\r\nTo: %s\r\nSubject: %s\r\nMessage-ID: <%s@x.test>\r\n\r\nbody\r\n", rcpts[0], id, id)
		if _, err := s.Ingest(ctx, &store.Incoming{Direction: store.DirIn, Raw: []byte(raw), MessageID: id + "@x.test", Sender: "s@x.test",
			Recipients: rcpts, Subject: id, Status: store.StatusAccepted, ReceivedAt: at, InReplyTo: refs, References: refs}); err != nil {
			t.Fatal(err)
		}
		for _, r := range rcpts {
			switch r {
			case "a@u.test":
				sizeA += int64(len(raw))
			case "b@u.test":
				sizeB += int64(len(raw))
			}
		}
	}
	in("m1", []string{"a@u.test"}, base.Add(10*time.Minute), nil)
	in("m2", []string{"a@u.test", "b@u.test"}, base.Add(70*time.Minute), nil)
	in("m3", []string{"a@u.test"}, base.Add(3*time.Hour), []string{"m1@x.test"}) // m1's thread
	series := func(inboxes []string, start, end time.Time, period time.Duration) ([]time.Time, []store.Usage) {
		t.Helper()
		at, u, err := s.Usage(ctx, inboxes, start, end, period)
		if err != nil || len(at) != len(u) {
			t.Fatalf("usage: %v %v %v", at, u, err)
		}
		for i := range u {
			u[i].Bytes, u[i].Inboxes = 0, 0 // checked below
		}
		return at, u
	}
	// Hourly points base … base+4h: the hour of m1 began at base, so a
	// point after base counts it whole; m3's hour (base+3h) counts from
	// the point after it.
	at, a := series([]string{"a@u.test"}, base.Add(-time.Hour), base.Add(4*time.Hour), time.Hour)
	want := []store.Usage{{}, {Messages: 1, Threads: 1}, {Messages: 2, Threads: 2}, {Messages: 2, Threads: 2}, {Messages: 3, Threads: 2}}
	if !slices.Equal(a, want) || !at[0].Equal(base) || !at[4].Equal(base.Add(4*time.Hour)) {
		t.Errorf("inbox a: %v %+v, want %+v", at, a, want)
	}
	// From base+90m: m1 and m2 before the start; m3 at the second point;
	// the last point is end (a shorter period).
	at, a = series([]string{"a@u.test"}, base.Add(90*time.Minute), base.Add(4*time.Hour), time.Hour)
	want = []store.Usage{{Messages: 2, Threads: 2}, {Messages: 3, Threads: 2}, {Messages: 3, Threads: 2}}
	if !slices.Equal(a, want) || !at[2].Equal(base.Add(4*time.Hour)) {
		t.Errorf("inbox a from base+90m: %v %+v, want %+v", at, a, want)
	}
	check := func(name string, inboxes []string, w store.Usage) {
		t.Helper()
		_, got, err := s.Usage(ctx, inboxes, base, base.Add(5*time.Hour), 5*time.Hour)
		if err != nil || len(got) != 1 || got[0].Messages != w.Messages || got[0].Threads != w.Threads || got[0].Bytes != w.Bytes {
			t.Errorf("%s: %+v %v, want %+v", name, got, err, w)
		}
	}
	check("a", []string{"a@u.test"}, store.Usage{Messages: 3, Threads: 2, Bytes: sizeA})
	check("b", []string{"b@u.test"}, store.Usage{Messages: 1, Threads: 1, Bytes: sizeB})
	check("a and b", []string{"a@u.test", "b@u.test"}, store.Usage{Messages: 4, Threads: 3, Bytes: sizeA + sizeB})
	check("organisation", nil, store.Usage{Messages: 4, Threads: 3, Bytes: sizeA + sizeB})
	check("no inbox", []string{}, store.Usage{})
	// Hiding a message leaves it counted (it stays stored).
	ms, err := s.InboxMessages(ctx, store.InboxQuery{Inbox: "b@u.test", Limit: 10})
	if err != nil || len(ms) != 1 {
		t.Fatalf("b's messages: %+v %v", ms, err)
	}
	if err := s.HideMessages(ctx, "b@u.test", "", []int64{ms[0].ID}); err != nil {
		t.Fatal(err)
	}
	check("b after a delete", []string{"b@u.test"}, store.Usage{Messages: 1, Threads: 1, Bytes: sizeB})
	// Inboxes: created before the time, not deleted.
	if _, _, err := s.CreateInbox(ctx, "c@u.test", "", "", false); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	_, got, err := s.Usage(ctx, nil, base.Add(-time.Hour), base, time.Hour)
	if err != nil || got[0].Inboxes != 0 {
		t.Errorf("inboxes at base (a and b were made by their first mail, after): %+v %v", got, err)
	}
	if _, got, err = s.Usage(ctx, nil, base, now.Add(time.Minute), time.Hour*24*365); err != nil || got[0].Inboxes != 3 {
		t.Errorf("inboxes now: %+v %v", got, err)
	}
	if err := s.DeleteInbox(ctx, "c@u.test"); err != nil {
		t.Fatal(err)
	}
	if _, got, err := s.Usage(ctx, nil, base, now.Add(time.Minute), time.Hour*24*365); err != nil || got[0].Inboxes != 2 {
		t.Errorf("inboxes after a delete: %+v %v", got, err)
	}
	for _, bad := range []struct {
		start, end time.Time
		period     time.Duration
	}{{base, base, time.Hour}, {base, base.Add(-time.Hour), time.Hour}, {base, base.Add(time.Hour), 0},
		{base, base.Add(time.Duration(store.MaxUsagePoints)*time.Second + 1), time.Second}} {
		if _, _, err := s.Usage(ctx, nil, bad.start, bad.end, bad.period); !errors.Is(err, store.ErrBadInput) {
			t.Errorf("usage %+v: %v, want ErrBadInput", bad, err)
		}
	}
}

// testWebhookHeaders: a webhook's custom headers are kept with it,
// changed in one transaction, and refused outside the rule.
func testWebhookHeaders(ctx context.Context, t *testing.T, s API) {
	now := time.Now()
	l := store.WebhookLimits{Headers: 3, HeaderBytes: 32}
	w := store.Webhook{ID: "wh_h", URL: "http://127.0.0.1:9/", Secret: "whsec_AAAA", Enabled: true, CreatedAt: now, UpdatedAt: now,
		Headers: map[string]string{"X-Token": "t1"}}
	if _, _, err := s.CreateWebhook(ctx, w, l); err != nil {
		t.Fatal(err)
	}
	got, err := s.SetWebhookHeaders(ctx, "wh_h", map[string]string{"x-token": "t2", "X-Other": "o"}, nil, l, now)
	if err != nil || len(got.Headers) != 2 || got.Headers["x-token"] != "t2" {
		t.Fatalf("set: %+v %v", got.Headers, err)
	}
	if _, err := s.SetWebhookHeaders(ctx, "wh_h", nil, []string{"X-OTHER", "X-Absent"}, l, now); err != nil {
		t.Fatal(err)
	}
	back, err := s.WebhookByID(ctx, "wh_h")
	if err != nil || len(back.Headers) != 1 || back.Headers["x-token"] != "t2" || store.WebhookHeaderNames(back)[0] != "x-token" {
		t.Errorf("stored: %+v %v", back.Headers, err)
	}
	for _, tc := range []struct {
		name string
		set  map[string]string
		code string
	}{
		{"reserved", map[string]string{"Host": "x"}, "reserved_header"},
		{"signature", map[string]string{"Svix-Id": "x"}, "reserved_header"},
		{"name", map[string]string{"X A": "x"}, "invalid_header_name"},
		{"value", map[string]string{"X-A": "a\r\nB: c"}, "invalid_header_value"},
		{"length", map[string]string{"X-A": "0123456789012345678901234567890"}, "header_too_long"},
		{"count", map[string]string{"X-A": "1", "X-B": "2", "X-C": "3"}, "too_many_headers"},
	} {
		var he *store.HeaderError
		if _, err := s.SetWebhookHeaders(ctx, "wh_h", tc.set, nil, l, now); !errors.As(err, &he) || he.Code != tc.code || !errors.Is(err, store.ErrBadInput) {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.code)
		}
	}
	if back, _ := s.WebhookByID(ctx, "wh_h"); len(back.Headers) != 1 {
		t.Errorf("refused changes wrote: %+v", back.Headers)
	}
	if _, err := s.SetWebhookHeaders(ctx, "wh_none", map[string]string{"X-A": "1"}, nil, l, now); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown webhook: %v", err)
	}
}
