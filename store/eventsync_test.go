package store

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// backlogStore is a fresh SQLite store and the inbound mail n of a
// backlog.
func backlogStore(t *testing.T) (*SQLite, func(n int) *Incoming) {
	s, err := OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "e.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	now := time.Now()
	return s, func(n int) *Incoming {
		return &Incoming{Direction: DirIn, MessageID: fmt.Sprintf("m%d@x.test", n), Sender: "alice@x.test",
			Recipients: []string{"b@x.test"}, Raw: []byte(fmt.Sprintf("m%d", n)), Status: StatusAccepted, ReceivedAt: now}
	}
}

// pagedEvents reads the whole log by pages of limit, each after the
// last id of the one before.
func pagedEvents(t *testing.T, s *SQLite, limit int) []Event {
	var all []Event
	for after := int64(0); ; {
		page, err := s.Events(context.Background(), EventFilter{After: after, Limit: limit})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			return all
		}
		all = append(all, page...)
		after = page[len(page)-1].ID
	}
}

// TestEventBacklogInSteps: mail stored while nothing read the event log
// (SQLite writes message.received late, migration 16) is caught up in
// steps when an event read needs it (a send and a delivery stage their
// events behind it, TestSendSkipsBacklog) — no writer
// transaction covers more than syncEventsStep message ids, even with
// other mail committing meanwhile — and the log keeps its order: every
// received event once, in message order, before the sent event of a
// message stored after them, ids ascending, a paging cursor skipping
// none.
func TestEventBacklogInSteps(t *testing.T) {
	ctx := context.Background()
	s, in := backlogStore(t)
	now := time.Now()
	const backlog = 30000
	for i := 0; i < backlog; i += 1000 {
		if err := s.write(ctx, func(tx *wtx) error {
			for j := i; j < i+1000; j++ {
				if _, _, err := ingestTx(tx, in(j), true); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}

	// The message ids each transaction caught up, read in the writer
	// after each commit.
	var steps []int64
	var last int64
	if err := s.rdb.QueryRowContext(ctx, `SELECT id FROM event_sync`).Scan(&last); err != nil {
		t.Fatal(err)
	}
	s.afterCommit = func(tx *wtx) {
		var id int64
		if err := tx.QueryRow(`SELECT id FROM event_sync`).Scan(&id); err != nil {
			t.Error(err)
			return
		}
		if id != last {
			steps = append(steps, id-last)
			last = id
		}
	}

	// More mail arrives while the send and its deliveries are written.
	var wg sync.WaitGroup
	const more = 2000
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := backlog; i < backlog+more; i++ {
			if _, err := s.Ingest(ctx, in(i)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	qid, err := s.Enqueue(ctx, &Outgoing{From: "b@x.test", MessageID: "s1@x.test", Raw: []byte("s1"),
		Recipients: []string{"c@y.test"},
		Copy:       &Incoming{MessageID: "s1@x.test", Sender: "b@x.test", Recipients: []string{"c@y.test"}, Raw: []byte("s1"), Status: StatusAccepted}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RecordDelivery(ctx, qid, "c@y.test", QueueSent, "", now); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	all := pagedEvents(t, s, 777)
	s.afterCommit = nil
	// One more write so that the hook's last run is ordered before the
	// reads below.
	if err := s.write(ctx, func(*wtx) error { return nil }); err != nil {
		t.Fatal(err)
	}

	var total, biggest int64
	for _, n := range steps {
		total += n
		biggest = max(biggest, n)
	}
	if biggest > syncEventsStep {
		t.Errorf("a transaction caught up %d message ids, over the step %d (steps %v)", biggest, syncEventsStep, steps)
	}
	if total < backlog {
		t.Errorf("caught up %d message ids in %d steps, want ≥ %d", total, len(steps), backlog)
	}
	if len(steps) < backlog/syncEventsStep {
		t.Errorf("%d steps for a backlog of %d: want ≥ %d", len(steps), backlog, backlog/syncEventsStep)
	}

	var sentID, sentMsg, deliveredID int64
	received := map[int64]int64{} // message id → event id
	var prevID, prevMsg int64
	for _, e := range all {
		if e.ID <= prevID {
			t.Fatalf("event ids out of order: %d after %d", e.ID, prevID)
		}
		prevID = e.ID
		switch e.Type {
		case EventReceived:
			if e.MessageID <= prevMsg {
				t.Fatalf("received event of message %d after message %d's", e.MessageID, prevMsg)
			}
			prevMsg = e.MessageID
			received[e.MessageID] = e.ID
		case EventSent:
			sentID, sentMsg = e.ID, e.MessageID
		case EventDelivered:
			deliveredID = e.ID
		}
	}
	if len(received) != backlog+more {
		t.Errorf("%d received events, want %d", len(received), backlog+more)
	}
	if sentID == 0 || deliveredID < sentID {
		t.Fatalf("sent event %d, delivered event %d", sentID, deliveredID)
	}
	for m, id := range received {
		if m < sentMsg && id > sentID {
			t.Errorf("message %d stored before the sent message %d has its received event %d after the sent event %d", m, sentMsg, id, sentID)
		}
	}
}

// TestSendSkipsBacklog: a send, and then a delivery, on a store whose
// event log is behind by more than one step (mail stored while nothing
// read the log) cover no message ids in their transactions: their
// events are staged (api_events_staged) rather than written after the
// whole backlog. The first read of the log then numbers everything in
// the order of the facts: the received events of the messages stored
// before the send first, then the sent and delivered events, then the
// received events of later mail.
func TestSendSkipsBacklog(t *testing.T) {
	ctx := context.Background()
	s, in := backlogStore(t)
	now := time.Now()
	const backlog = 3 * syncEventsStep
	if err := s.write(ctx, func(tx *wtx) error {
		for j := 0; j < backlog; j++ {
			if _, _, err := ingestTx(tx, in(j), true); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// Each commit's move of event_sync and the staged rows after it.
	type commit struct{ moved, staged int64 }
	var commits []commit
	var last int64
	if err := s.rdb.QueryRowContext(ctx, `SELECT id FROM event_sync`).Scan(&last); err != nil {
		t.Fatal(err)
	}
	s.afterCommit = func(tx *wtx) {
		var c commit
		var id int64
		if err := tx.QueryRow(`SELECT id, (SELECT count(*) FROM api_events_staged) FROM event_sync`).Scan(&id, &c.staged); err != nil {
			t.Error(err)
			return
		}
		c.moved, last = id-last, id
		commits = append(commits, c)
	}
	qid, err := s.Enqueue(ctx, &Outgoing{From: "b@x.test", MessageID: "s1@x.test", Raw: []byte("s1"),
		Recipients: []string{"c@y.test"},
		Copy:       &Incoming{MessageID: "s1@x.test", Sender: "b@x.test", Recipients: []string{"c@y.test"}, Raw: []byte("s1"), Status: StatusAccepted}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RecordDelivery(ctx, qid, "c@y.test", QueueSent, "", now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ingest(ctx, in(backlog)); err != nil {
		t.Fatal(err)
	}
	s.afterCommit = nil
	if err := s.write(ctx, func(*wtx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if len(commits) != 3 {
		t.Fatalf("%d commits for a send, a delivery and a received mail, want 3: %+v", len(commits), commits)
	}
	for i, c := range commits[:2] {
		if c.moved != 0 {
			t.Errorf("write %d caught up %d message ids of the backlog, want 0", i, c.moved)
		}
		if c.staged != int64(i+1) {
			t.Errorf("after write %d, %d events staged, want %d", i, c.staged, i+1)
		}
	}

	all := pagedEvents(t, s, 1000)
	var types []string
	var prev int64
	for i, e := range all {
		if e.ID <= prev {
			t.Fatalf("event ids out of order: %d after %d", e.ID, prev)
		}
		prev = e.ID
		want := EventReceived
		switch {
		case i == backlog:
			want = EventSent
		case i == backlog+1:
			want = EventDelivered
		}
		if e.Type != want {
			types = append(types, fmt.Sprintf("%d:%s", i, e.Type))
		}
	}
	if len(all) != backlog+3 || len(types) > 0 {
		t.Errorf("%d events (want %d), out of place: %v", len(all), backlog+3, types)
	}
	var staged int
	if err := s.rdb.QueryRowContext(ctx, `SELECT count(*) FROM api_events_staged`).Scan(&staged); err != nil || staged != 0 {
		t.Errorf("%d events still staged after the read (%v)", staged, err)
	}
}
