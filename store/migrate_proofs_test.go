package store_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/envelopd/envelopd/internal/pgtest"
	"github.com/envelopd/envelopd/payments/proof"
	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/store"
)

// TestMigrateProofIdentity: migration 18 identifies the proofs of a
// database written when proofs were compared as text. The five ways of
// writing one transaction were five accepted payments then: the earliest
// keeps the proof, the four others are kept as stored (accepted, not
// rewritten) and reported as collisions, their payments duplicate. A
// received message gets an unverified payment; a sent one none. A new
// message naming the transaction is then duplicate_proof.
func TestMigrateProofIdentity(t *testing.T) {
	defer store.SetProofBatch(store.SetProofBatch(2)) // several batches
	var stmts []string
	for i, o := range oldProofs {
		stmts = append(stmts, fmt.Sprintf(`INSERT INTO messages (mailbox, direction, message_id, content_hash, sender,
			recipients, subject, type, envelopay_id, status, thread_id, received_at, errors, warnings, result,
			auth_results, size) VALUES ('', '%s', 'm%d@x.test', x'0%d', 'a%d@x.test', '["b@y.test"]', 'PAY', 'pay',
			'pay_%d', 'accepted', 't_%d', %d, '[]', '[]', CAST('%s' AS BLOB), '', 1)`,
			o.dir, i+1, i+1, i+1, i+1, i+1, (i+1)*1000, oldResult(i)),
			fmt.Sprintf(`INSERT INTO proofs (direction, mailbox, fingerprint, message_id) VALUES ('%s', '', 'text-%d', %d)`, o.dir, i+1, i+1))
	}
	path := oldDatabase(t, 16, stmts...)
	s, err := store.OpenSQLite(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkMigratedProofs(t, s, func(i int) int64 { return int64(i + 1) })
}

// TestPostgresMigrateProofIdentity is TestMigrateProofIdentity on
// Postgres (its migration 18 runs the same Go step).
func TestPostgresMigrateProofIdentity(t *testing.T) {
	pgtest.Server(t)
	defer store.SetProofBatch(store.SetProofBatch(3))
	ctx := context.Background()
	dsn := pgtest.Schema(t)
	db, err := store.PGMigrateTo(ctx, dsn, 16)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range oldProofs {
		for _, q := range []string{fmt.Sprintf(`INSERT INTO messages (id, mailbox, direction, message_id, content_hash, sender,
			recipients, subject, type, envelopay_id, status, thread_id, received_at, errors, warnings, result,
			auth_results, size) VALUES (%d, '', '%s', 'm%d@x.test', '\x0%d', 'a%d@x.test', '["b@y.test"]', 'PAY', 'pay',
			'pay_%d', 'accepted', 't_%d', %d, '[]', '[]', convert_to('%s', 'UTF8'), '', 1)`,
			(i+1)<<10, o.dir, i+1, i+1, i+1, i+1, i+1, (i+1)*1000, oldResult(i)),
			fmt.Sprintf(`INSERT INTO proofs (direction, mailbox, fingerprint, message_id) VALUES ('%s', '', 'text-%d', %d)`, o.dir, i+1, (i+1)<<10)} {
			if _, err := db.ExecContext(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
	}
	db.Close()
	s, err := store.OpenPostgres(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkMigratedProofs(t, s, func(i int) int64 { return int64(i+1) << 10 })
}

// oldProofs are the proofs of the old database's messages: the five ways
// of writing one transaction, a proof naming none, and a sent PAY.
var oldProofs = []struct{ dir, proof string }{
	{"in", `{"tx":"0xabcdef0123"}`},
	{"in", `{"tx":"0xABCDEF0123"}`},
	{"in", `{"tx":"0xabcdef0123","memo":"again"}`},
	{"in", `{"tx":" 0xabcdef0123"}`},
	{"in", `"0xabcdef0123"`},
	{"in", `{"receipt":"paid"}`},
	{"out", `{"tx":"0x4a92e3e0ea4bcf085cc879b1b3a0e3ea341013ae803caf1f9443a1fac48c2bfd"}`},
}

// oldResult is the stored parse result of old message i.
func oldResult(i int) string {
	return fmt.Sprintf(`{"type":"pay","body":{"v":"0.2.0","type":"pay","id":"pay_%d","amount":"5","token":"USDC","chain":"base","proof":%s}}`,
		i+1, oldProofs[i].proof)
}

// checkMigratedProofs checks a store opened over the old database; id
// gives the row id of old message i.
func checkMigratedProofs(t *testing.T, s store.DB, id func(i int) int64) {
	ctx := context.Background()
	cs, err := s.ProofCollisions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := proof.Identify("base", []byte(`"0xabcdef0123"`)).Fingerprint
	var got []int64
	for _, c := range cs {
		if c.KeptID != id(0) || c.Fingerprint != want {
			t.Errorf("collision %+v, want kept %d fingerprint %s", c, id(0), want)
		}
		got = append(got, c.MessageID)
	}
	if !slices.Equal(got, []int64{id(1), id(2), id(3), id(4)}) {
		t.Errorf("collisions %v, want messages 2-5", got)
	}
	ps, err := s.ListPayments(ctx, store.PaymentFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var states []string
	for _, p := range ps {
		states = append(states, fmt.Sprintf("%d %s %s %s", p.ID, p.State, p.Chain, p.Tx))
	}
	wantStates := []string{fmt.Sprintf("%d unverified base 0xabcdef0123", id(0))}
	for i := 1; i <= 4; i++ {
		wantStates = append(wantStates, fmt.Sprintf("%d duplicate base 0xabcdef0123", id(i)))
	}
	wantStates = append(wantStates, fmt.Sprintf("%d unverified base ", id(5)))
	if !slices.Equal(states, wantStates) {
		t.Errorf("payments %q, want %q", states, wantStates)
	}
	for i := range oldProofs {
		m, err := s.Message(ctx, id(i))
		if err != nil || m.Status != store.StatusAccepted {
			t.Errorf("message %d: %v %v, want kept accepted", id(i), m, err)
		}
	}
	for i, p := range []string{`{"tx":"0XABCDEF0123","n":1}`, `{"receipt":"paid"}`} {
		out, err := s.Ingest(ctx, &store.Incoming{MessageID: fmt.Sprintf("new%d@x.test", i), Direction: store.DirIn, Sender: "c@x.test",
			Type: "pay", EnvelopayID: fmt.Sprintf("pay_new%d", i), Status: store.StatusAccepted, Raw: []byte(p),
			ProofFingerprint: proof.Identify("base", []byte(p)).Fingerprint})
		if err != nil {
			t.Fatal(err)
		}
		if out.Status != store.StatusDuplicate || !out.Errors.Has(protocols.CodeDuplicateProof) {
			t.Errorf("new proof %s: %s %v, want duplicate_proof", p, out.Status, out.Errors)
		}
	}
}
