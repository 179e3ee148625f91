package mailin

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/envelopd/envelopd/parse"
	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/store"
)

// owedSetup opens a store in a temporary file (path) for an OOPS test,
// with a DKIM kit to sign the mail and a recorder of the OOPS composed.
func owedSetup(t *testing.T) (string, *store.SQLite, *dkimKit, *oopsRecorder) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "envelopd.db")
	st, err := store.OpenSQLite(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	return path, st, newDKIMKit(t), &oopsRecorder{}
}

// TestOwedOOPSRecovered: the courtesy OOPS is recorded as owed with the
// mail and composed after the commit by the owed-OOPS worker. A process
// that dies between composing and queueing it (here: its store closes
// under the composer) leaves the OOPS owed; the owed-OOPS worker of the
// next process rebuilds it from the stored message alone — same code,
// same recipient, signed from the operator's domain — queues it once, and
// records it on the message.
func TestOwedOOPSRecovered(t *testing.T) {
	ctx := context.Background()
	path, st, kit, rec := owedSetup(t)
	crashed := false
	p := &Pipeline{Store: st, Verifier: kit.v, OOPSDomains: []string{"server.test"},
		OOPS: func(r *parse.Result, pr protocols.Problem, from string) ([]byte, error) {
			if !crashed {
				crashed = true
				st.Close() // the process dies after the commit
			}
			return rec.compose(r, pr, from)
		}}
	out, err := p.Ingest(ctx, kit.sign(t, unknownType("alice@buyer.test", "owed-1@buyer.test"), "buyer.test"),
		Meta{Rcpts: []string{"bob@server.test"}})
	if err != nil {
		t.Fatalf("the mail must be stored: %v", err)
	}
	if out.OOPS == nil || !out.OOPS.Pending {
		t.Fatalf("OOPS %+v, want owed (pending)", out.OOPS)
	}
	// A worker composes it and dies before queueing it.
	if n, err := p.ComposeOwedOOPS(ctx, st, time.Now().Add(time.Hour)); err == nil {
		t.Fatalf("settled %d on a closed store", n)
	}

	st, err = store.OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p.Store = st
	// Only what was owed before olderThan is settled.
	if n, err := p.ComposeOwedOOPS(ctx, st, time.Now().Add(-time.Hour)); err != nil || n != 0 {
		t.Fatalf("settled %d (%v) within the grace period, want 0", n, err)
	}
	for range 2 { // a second pass finds nothing left
		if _, err := p.ComposeOwedOOPS(ctx, st, time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	q, err := st.Queue(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(q) != 1 || q[0].Kind != "oops" || len(q[0].Recipients) != 1 || q[0].Recipients[0].Rcpt != "alice@buyer.test" ||
		q[0].From != "postmaster@server.test" && q[0].From != "bob@server.test" {
		t.Fatalf("queue %+v, want one OOPS to alice@buyer.test from server.test", q)
	}
	m, err := st.Message(ctx, out.ID)
	if err != nil {
		t.Fatal(err)
	}
	if m.OOPS == nil || !m.OOPS.Sent || m.OOPS.Pending || m.OOPS.QueueID != q[0].ID || m.OOPS.Code != protocols.CodeUnknownType {
		t.Errorf("stored decision %+v, want sent as queue %d", m.OOPS, q[0].ID)
	}
	if c := rec.take(); len(c) != 2 || c[1] != protocols.CodeUnknownType {
		t.Errorf("composed %v, want the lost one and the recovered one", c)
	}
}

// claimThenStop is a store whose first owed-OOPS claim stops the worker
// (its context cancelled) right after the claim commits, and which gives
// nothing back: the process is killed between the claim and the compose,
// the row leased.
type claimThenStop struct {
	*store.SQLite
	stop    func()
	claimed chan struct{}
}

func (c *claimThenStop) ClaimOwedOOPS(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]store.OwedOOPS, error) {
	owed, err := c.SQLite.ClaimOwedOOPS(ctx, now, lease, limit)
	if c.stop != nil && len(owed) > 0 {
		c.stop()
		c.stop = nil
		close(c.claimed)
	}
	return owed, err
}

func (c *claimThenStop) ReleaseOwedOOPS(context.Context, int64, time.Time) error { return nil }

// TestOOPSSentOnceAfterRestart: the OOPS a mail is owed is committed with
// the mail; a process killed after that commit and before the OOPS is
// composed (no worker ran), or killed between its worker's claim and the
// compose (the row leased), loses nothing: after a restart the
// owed-OOPS worker, woken at start, queues it, once.
func TestOOPSSentOnceAfterRestart(t *testing.T) {
	for _, tc := range []struct {
		name string
		// stop runs the first process's worker, if any, and stops it.
		stop func(t *testing.T, p *Pipeline, st *store.SQLite)
		// later is how far the restarted worker's clock is ahead.
		later time.Duration
	}{
		{"killed after commit", func(*testing.T, *Pipeline, *store.SQLite) {}, 0},
		{"killed between claim and compose", func(t *testing.T, p *Pipeline, st *store.SQLite) {
			ctx, cancel := context.WithCancel(context.Background())
			cs := &claimThenStop{SQLite: st, stop: cancel, claimed: make(chan struct{})}
			done := make(chan error, 1)
			go func() { done <- (&OOPSWorker{Pipeline: p, Store: cs}).Run(ctx) }()
			select {
			case <-cs.claimed:
			case <-time.After(10 * time.Second):
				t.Fatal("the worker never claimed the owed OOPS")
			}
			if err := <-done; err != context.Canceled {
				t.Fatalf("worker Run = %v, want context.Canceled", err)
			}
		}, 3 * time.Minute}, // past the claim's lease
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			path, st, kit, rec := owedSetup(t)
			p := &Pipeline{Store: st, Verifier: kit.v, OOPSDomains: []string{"server.test"}, OOPS: rec.compose}
			out, err := p.Ingest(ctx, kit.sign(t, unknownType("alice@buyer.test", "restart@buyer.test"), "buyer.test"),
				Meta{Rcpts: []string{"bob@server.test"}})
			if err != nil || out.OOPS == nil || !out.OOPS.Pending {
				t.Fatalf("ingest: %+v %v, want the OOPS owed", out.OOPS, err)
			}
			tc.stop(t, p, st)
			if c := rec.take(); len(c) != 0 {
				t.Fatalf("composed %v before the restart, want none", c)
			}
			st.Close()

			// The restart: a new store and pipeline, the worker started.
			st, err = store.OpenSQLite(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			p = &Pipeline{Store: st, Verifier: kit.v, OOPSDomains: []string{"server.test"}, OOPS: rec.compose}
			queued := st.QueueChanged() // taken before the worker starts
			wctx, stop := context.WithCancel(ctx)
			done := make(chan error, 1)
			w := &OOPSWorker{Pipeline: p, Store: st, Now: func() time.Time { return time.Now().Add(tc.later) }}
			go func() { done <- w.Run(wctx) }()
			select {
			case <-queued:
			case <-time.After(10 * time.Second):
				t.Fatal("the restarted worker queued nothing")
			}
			stop()
			<-done
			// Another pass (a second restart, another node) finds nothing.
			if n, err := w.RunOnce(ctx); err != nil || n != 0 {
				t.Errorf("second pass settled %d (%v), want 0", n, err)
			}
			q, err := st.Queue(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			if len(q) != 1 || q[0].Kind != "oops" || len(q[0].Recipients) != 1 || q[0].Recipients[0].Rcpt != "alice@buyer.test" {
				t.Fatalf("queue %+v, want the one OOPS to alice@buyer.test", q)
			}
			m, err := st.Message(ctx, out.ID)
			if err != nil || m.OOPS == nil || !m.OOPS.Sent || m.OOPS.Pending || m.OOPS.QueueID != q[0].ID {
				t.Errorf("stored decision %+v %v, want sent as queue %d", m.OOPS, err, q[0].ID)
			}
			if c := rec.take(); len(c) != 1 || c[0] != protocols.CodeUnknownType {
				t.Errorf("composed %v, want the one unknown_type OOPS", c)
			}
		})
	}
}
