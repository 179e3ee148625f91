package store_test

import (
	"context"
	"testing"

	"github.com/envelopd/envelopd/store"
)

// TestMigrateReceivedEventsOutOfIngest: migration 16 writes SQLite's
// message.received events when the log is read instead of in the ingest
// transaction. A message stored before it (announced by the old trigger)
// keeps its one event; one stored after gets one per recipient inbox,
// written by the first read, once however often the log is read.
func TestMigrateReceivedEventsOutOfIngest(t *testing.T) {
	ctx := context.Background()
	path := oldDatabase(t, 15, `INSERT INTO messages (mailbox, direction, message_id, content_hash, sender,
		recipients, subject, type, envelopay_id, status, thread_id, received_at, errors, warnings,
		auth_results, size) VALUES ('', 'in', 'old@x.test', x'00', 'a@x.test', '["b@y.test"]', 'PAY | coffee', 'pay',
		'pay_1', 'accepted', 't_old', 0, '[]', '[]', '', 1)`)
	s, err := store.OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Ingest(ctx, &store.Incoming{MessageID: "new@x.test", Direction: store.DirIn, Sender: "a@x.test",
		Recipients: []string{"C@y.test", "b@y.test", "c@y.test"}, Subject: "PAY | coffee again", Type: "pay",
		Status: store.StatusAccepted, Raw: []byte("y")}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for range 3 { // reading again writes nothing twice
		evs, err := s.Events(ctx, store.EventFilter{})
		if err != nil {
			t.Fatal(err)
		}
		got = got[:0]
		for _, e := range evs {
			got = append(got, e.Type+" "+e.Inbox)
		}
	}
	want := []string{"message.received b@y.test", "message.received b@y.test", "message.received c@y.test"}
	if len(got) != len(want) {
		t.Fatalf("events %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("events %q, want %q", got, want)
		}
	}
	if last, err := s.LastEventID(ctx); err != nil || last != 3 {
		t.Fatalf("last event %d %v, want 3", last, err)
	}
}

// TestReceivedEventsBacklog: mail stored while nothing read the event log
// (more than one catch-up step of it) gets its events, once each and in
// message order, at the first read.
func TestReceivedEventsBacklog(t *testing.T) {
	ctx := context.Background()
	path := oldDatabase(t, store.SchemaVersion, `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 12000)
		INSERT INTO messages (mailbox, direction, message_id, content_hash, sender, recipients, subject, type,
			envelopay_id, status, thread_id, received_at, errors, warnings, auth_results, size)
		SELECT '', 'in', 'm' || i || '@x.test', x'00', 'a@x.test', '["b@y.test"]', 'PAY | x', 'pay',
			'pay_' || i, 'accepted', 't_' || i, i, '[]', '[]', '', 1 FROM n`)
	s, err := store.OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	last, err := s.LastEventID(ctx)
	if err != nil || last != 12000 {
		t.Fatalf("last event %d %v, want 12000", last, err)
	}
	var after, n int64
	for {
		evs, err := s.Events(ctx, store.EventFilter{After: after, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			break
		}
		for _, e := range evs {
			n++
			if e.MessageID != n || e.Type != store.EventReceived || e.Inbox != "b@y.test" {
				t.Fatalf("event %d: %+v, want message.received of message %d", e.ID, e, n)
			}
		}
		after = evs[len(evs)-1].ID
	}
	if n != 12000 {
		t.Fatalf("%d events, want 12000", n)
	}
}
