package store_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/envelopd/envelopd/payments/proof"
	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/store"
)

// TestMigrateProofIdentity: migration 17 identifies the proofs of a
// database written when proofs were compared as text. The five ways of
// writing one transaction were five accepted payments then: the earliest
// keeps the proof, the four others are kept as stored (accepted, not
// rewritten) and reported as collisions, their payments duplicate. A
// received message gets an unverified payment; a sent one none. A new
// message naming the transaction is then duplicate_proof.
func TestMigrateProofIdentity(t *testing.T) {
	ctx := context.Background()
	type old struct {
		dir, proof string
	}
	olds := []old{
		{"in", `{"tx":"0xabcdef0123"}`},
		{"in", `{"tx":"0xABCDEF0123"}`},
		{"in", `{"tx":"0xabcdef0123","memo":"again"}`},
		{"in", `{"tx":" 0xabcdef0123"}`},
		{"in", `"0xabcdef0123"`},
		{"in", `{"receipt":"paid"}`},
		{"out", `{"tx":"0x4a92e3e0ea4bcf085cc879b1b3a0e3ea341013ae803caf1f9443a1fac48c2bfd"}`},
	}
	var stmts []string
	for i, o := range olds {
		n := i + 1
		body := fmt.Sprintf(`{"v":"0.2.0","type":"pay","id":"pay_%d","amount":"5","token":"USDC","chain":"base","proof":%s}`, n, o.proof)
		stmts = append(stmts, fmt.Sprintf(`INSERT INTO messages (mailbox, direction, message_id, content_hash, sender,
			recipients, subject, type, envelopay_id, status, thread_id, received_at, errors, warnings, result,
			auth_results, size) VALUES ('', '%s', 'm%d@x.test', x'0%d', 'a%d@x.test', '["b@y.test"]', 'PAY', 'pay',
			'pay_%d', 'accepted', 't_%d', %d, '[]', '[]', CAST('{"type":"pay","body":%s}' AS BLOB), '', 1)`,
			o.dir, n, n, n, n, n, n*1000, body),
			fmt.Sprintf(`INSERT INTO proofs (direction, mailbox, fingerprint, message_id) VALUES ('%s', '', 'text-%d', %d)`, o.dir, n, n))
	}
	path := oldDatabase(t, 16, stmts...)
	s, err := store.OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	cs, err := s.ProofCollisions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := proof.Identify("base", []byte(`"0xabcdef0123"`)).Fingerprint
	var got []int64
	for _, c := range cs {
		if c.KeptID != 1 || c.Fingerprint != want {
			t.Errorf("collision %+v, want kept 1 fingerprint %s", c, want)
		}
		got = append(got, c.MessageID)
	}
	if !slices.Equal(got, []int64{2, 3, 4, 5}) {
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
	wantStates := []string{"1 unverified base 0xabcdef0123", "2 duplicate base 0xabcdef0123", "3 duplicate base 0xabcdef0123",
		"4 duplicate base 0xabcdef0123", "5 duplicate base 0xabcdef0123", "6 unverified base "}
	if !slices.Equal(states, wantStates) {
		t.Errorf("payments %q, want %q", states, wantStates)
	}
	for id := int64(1); id <= 7; id++ {
		m, err := s.Message(ctx, id)
		if err != nil || m.Status != store.StatusAccepted {
			t.Errorf("message %d: %v %v, want kept accepted", id, m, err)
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
