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

// testUsage: the inbox index's usage counters. A message counts once
// per inbox that shows it, with its size, in the hour it was received;
// a thread once per inbox, when its first message is indexed; a hidden
// message still counts (it stays stored); the organisation is the sum
// over inboxes; a time counts the hours that began before it.
func testUsage(t *testing.T, open func(t *testing.T) API) {
	ctx := context.Background()
	s := open(t)
	defer s.Close()
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
	at := []time.Time{base, base.Add(5 * time.Minute), base.Add(time.Hour), base.Add(2 * time.Hour), base.Add(4 * time.Hour)}
	a, err := s.Usage(ctx, []string{"a@u.test"}, at)
	if err != nil {
		t.Fatal(err)
	}
	// The hour of m1 began at base: a time after base counts it whole.
	// (Bytes are checked below, at the end.)
	want := []store.Usage{{}, {Messages: 1, Threads: 1}, {Messages: 1, Threads: 1}, {Messages: 2, Threads: 2}, {Messages: 3, Threads: 2}}
	for i := range a {
		a[i].Bytes, a[i].Inboxes = 0, 0
	}
	if !slices.Equal(a, want) {
		t.Errorf("inbox a: %+v, want %+v", a, want)
	}
	end := []time.Time{base.Add(5 * time.Hour)}
	check := func(name string, inboxes []string, w store.Usage) {
		t.Helper()
		got, err := s.Usage(ctx, inboxes, end)
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
	got, err := s.Usage(ctx, nil, []time.Time{base, time.Now().Add(time.Minute)})
	if err != nil || got[0].Inboxes != 0 || got[1].Inboxes != 3 {
		t.Errorf("inboxes: %+v %v", got, err)
	}
	if err := s.DeleteInbox(ctx, "c@u.test"); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Usage(ctx, nil, []time.Time{time.Now().Add(time.Minute)}); err != nil || got[0].Inboxes != 2 {
		t.Errorf("inboxes after a delete: %+v %v", got, err)
	}
	for _, bad := range [][]time.Time{nil, {end[0], base}, make([]time.Time, store.MaxUsagePoints+1)} {
		if _, err := s.Usage(ctx, nil, bad); !errors.Is(err, store.ErrBadInput) {
			t.Errorf("usage at %d times: %v, want ErrBadInput", len(bad), err)
		}
	}
}

// testWebhookHeaders: a webhook's custom headers are kept with it,
// changed in one transaction, and refused outside the rule.
func testWebhookHeaders(t *testing.T, open func(t *testing.T) API) {
	ctx := context.Background()
	s := open(t)
	defer s.Close()
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
