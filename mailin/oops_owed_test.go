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

// TestOwedOOPSRecovered: the courtesy OOPS is composed after
// the mail's ingest commits. A process that dies in between (here: its
// store closes under the composer) leaves the OOPS owed; the owed-OOPS
// worker of the next process rebuilds it from the stored message alone —
// same code, same recipient, signed from the operator's domain — queues
// it once, and records it on the message.
func TestOwedOOPSRecovered(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "envelopd.db")
	st, err := store.OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	kit := newDKIMKit(t)
	rec := &oopsRecorder{}
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

	st, err = store.OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p.Store = st
	// Within the grace period the deciding ingest is presumed alive.
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
