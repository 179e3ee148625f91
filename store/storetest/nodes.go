package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/store"
)

// nodes is how many store instances over the same data the node tests
// open: separate pools, separate connections — what several envelopd
// processes (SQLite: on one file; Postgres: on one database) are.
const nodes = 3

// testNodes: several store instances over one data set, each
// used by several goroutines at once, keep every guarantee that one
// instance keeps: one proof accepted once, one Message-ID stored once,
// each queued recipient and each hand-off claimed by one worker within a
// lease, and a cursor (WaitNew, Messages AfterID) that never skips a
// message, whatever order the instances commit in.
func testNodes(t *testing.T, open func(t *testing.T) Rules) {
	runTests(t, open, []test[Rules]{
		{name: "same proof", open: testNodesSameProof},
		{name: "same message", open: testNodesSameMessage},
		{name: "queue claims", open: testNodesQueue},
		{name: "hand-off claims", open: testNodesHandoffs},
		{name: "cursor", open: testNodesCursor},
		{name: "first key wins", open: testNodesFirstKey},
	})
}

// nodeRacers is how many goroutines race across the nodes.
const nodeRacers = 24

func testNodesSameProof(t *testing.T, open func(t *testing.T) Rules) {
	ss := openNodes(t, open)
	outs := raceIngest(t, ss, nodeRacers, func(i int) *store.Incoming {
		return msg(fmt.Sprintf("np%d@node.test", i), fmt.Sprintf("s%d@node.test", i), fmt.Sprintf("pay_%d", i),
			func(in *store.Incoming) { in.ProofFingerprint = "fp-nodes" })
	})
	accepted := 0
	for i, o := range outs {
		switch {
		case o.Status == store.StatusAccepted:
			accepted++
		case o.Status != store.StatusDuplicate || !o.Errors.Has(protocols.CodeDuplicateProof):
			t.Errorf("racer %d: %s %v, want duplicate with duplicate_proof", i, o.Status, codes(o.Errors))
		}
	}
	if accepted != 1 {
		t.Errorf("%d accepted, want exactly 1", accepted)
	}
	// Every node reads the same: one accepted, the rest duplicates.
	for n, s := range ss {
		ms, err := s.Messages(context.Background(), store.Filter{Status: store.StatusAccepted})
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) != 1 {
			t.Errorf("node %d sees %d accepted, want 1", n, len(ms))
		}
	}
}

func testNodesSameMessage(t *testing.T, open func(t *testing.T) Rules) {
	ss := openNodes(t, open)
	outs := raceIngest(t, ss, nodeRacers, func(int) *store.Incoming { return msg("same@node.test", "a@node.test", "ord_1", nil) })
	fresh := 0
	for i, o := range outs {
		if o.ID != outs[0].ID || o.Status != store.StatusAccepted {
			t.Errorf("racer %d: row %d %s, want row %d accepted", i, o.ID, o.Status, outs[0].ID)
		}
		if !o.Redelivery {
			fresh++
		}
	}
	if fresh != 1 {
		t.Errorf("%d stored it, want 1 (the others: redelivery)", fresh)
	}
	ms, err := ss[1].Messages(context.Background(), store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 {
		t.Errorf("%d rows, want 1", len(ms))
	}
}

func testNodesQueue(t *testing.T, open func(t *testing.T) Rules) {
	ss := openNodes(t, open)
	ctx := context.Background()
	const entries = 40
	want := map[string]bool{}
	for i := range entries {
		id, err := ss[i%nodes].Enqueue(ctx, outgoing(fmt.Sprintf("nq%d@here.test", i), "a@a.test", "b@b.test"))
		if err != nil {
			t.Fatal(err)
		}
		want[fmt.Sprintf("%d %s", id, "a@a.test")] = true
		want[fmt.Sprintf("%d %s", id, "b@b.test")] = true
	}
	now := time.Now().Add(time.Second)
	got := claimRace(t, nodeRacers, func(i int) ([]store.Due, error) { return ss[i%nodes].ClaimDue(ctx, now, time.Hour, 3) },
		func(d store.Due) string { return fmt.Sprintf("%d %s", d.QueueID, d.Rcpt) })
	for k, n := range got {
		if n != 1 || !want[k] {
			t.Errorf("%s claimed %d times (queued: %v), want once", k, n, want[k])
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d recipients claimed, want %d", len(got), len(want))
	}
	// Within the lease nothing is due again, on any node.
	for n, s := range ss {
		if ds, err := s.ClaimDue(ctx, now, time.Hour, 100); err != nil || len(ds) != 0 {
			t.Errorf("node %d claimed %d more within the lease (%v)", n, len(ds), err)
		}
	}
	// A node that died holding claims: after the lease they are due again.
	ds, err := ss[0].ClaimDue(ctx, now.Add(2*time.Hour), time.Hour, 1000)
	if err != nil || len(ds) != len(want) {
		t.Errorf("after the lease: %d claimed (%v), want %d", len(ds), err, len(want))
	}
}

func testNodesHandoffs(t *testing.T, open func(t *testing.T) Rules) {
	ss := openNodes(t, open)
	ctx := context.Background()
	const msgs = 40
	for i := range msgs {
		if _, err := ss[i%nodes].Ingest(ctx, msg(fmt.Sprintf("nh%d@node.test", i), "a@node.test", fmt.Sprintf("ord_%d", i), nil)); err != nil {
			t.Fatal(err)
		}
	}
	now := base.Add(time.Hour)
	got := claimRace(t, nodeRacers, func(i int) ([]store.Delivery, error) {
		return ss[i%nodes].ClaimDeliveries(ctx, "exec", now, time.Hour, 3)
	}, func(d store.Delivery) int64 { return d.ID })
	for id, n := range got {
		if n != 1 {
			t.Errorf("hand-off %d claimed %d times, want once", id, n)
		}
	}
	if len(got) != msgs {
		t.Errorf("%d hand-offs claimed, want %d", len(got), msgs)
	}
}

// testNodesCursor: writers on every node ingest while a reader on one
// node follows the cursor as watch does (WaitNew, then Messages after the
// last id seen). It must see every message exactly once: a message
// committed late, below an id already passed, would be skipped.
func testNodesCursor(t *testing.T, open func(t *testing.T) Rules) {
	ss := openNodes(t, open)
	cursorRace(t, ss, 6, 15, func(w, i int) *store.Incoming {
		return msg(fmt.Sprintf("nc%d.%d@node.test", w, i), fmt.Sprintf("w%d@node.test", w), fmt.Sprintf("ord_%d", i), nil)
	}, cursor[store.Message]{
		wait: ss[0].WaitNew,
		read: func(ctx context.Context, after int64) ([]store.Message, error) {
			return ss[0].Messages(ctx, store.Filter{AfterID: after})
		},
		all:  func(ctx context.Context) ([]store.Message, error) { return ss[0].Messages(ctx, store.Filter{}) },
		id:   func(m store.Message) int64 { return m.ID },
		name: func(m store.Message) string { return fmt.Sprintf("message %d (%s)", m.ID, m.MessageID) },
	}, time.Minute)
}

// testNodesFirstKey: nodes starting together each generate a relay DKIM
// key and store it if none is there; all of them get back one key.
func testNodesFirstKey(t *testing.T, open func(t *testing.T) Rules) {
	ss := openNodes(t, open)
	got := make([]string, nodeRacers)
	errs := make([]error, nodeRacers)
	race(nodeRacers, func(i int) {
		got[i], errs[i] = ss[i%nodes].PutKeyIfAbsent(context.Background(), "dkim-local", "agents.test", fmt.Sprintf("key-%d\x00", i))
	})
	for i := range got {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if got[i] != got[0] {
			t.Errorf("racer %d uses %q, racer 0 %q: want one key", i, got[i], got[0])
		}
	}
	keys, err := ss[1].Keys(context.Background(), "dkim-local")
	if err != nil || keys["agents.test"] != got[0] {
		t.Errorf("stored %q (%v), want %q", keys["agents.test"], err, got[0])
	}
}
