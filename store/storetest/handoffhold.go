package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/envelopd/envelopd/store"
)

// testHandoffHold: a person holds a message's pending hand-offs (the
// worker's claim passes them over) and releases them; a hand-off that
// also waits for its payment waits for it again once released, and stays
// held by the person when the payment is verified meanwhile.
func testHandoffHold(ctx context.Context, t *testing.T, s Rules) {
	plain, err := s.Ingest(ctx, msg("hold1@a.test", "a@a.test", "ord_h1", func(in *store.Incoming) { in.Handoff = []string{"exec"} }))
	if err != nil {
		t.Fatal(err)
	}
	// paidMsg is a PAY whose hand-off waits for its payment (tx).
	paidMsg := func(mid, eid, tx string) store.Outcome {
		t.Helper()
		out, err := s.Ingest(ctx, msg(mid, "a@a.test", eid, func(in *store.Incoming) {
			in.Handoff = []string{"exec"}
			in.ProofFingerprint = "fp-" + tx
			in.Proof = &store.ProofFacts{Chain: "base", Tx: tx, Token: "USDC", Amount: "5", Check: true}
			in.HandoffVerified = true
		}))
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	paid := paidMsg("hold2@a.test", "pay_h2", "0xab01")
	heldBy := func(id int64) []string {
		t.Helper()
		hs, err := s.Handoffs(ctx, store.HandoffFilter{State: "all", MessageID: id})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, h := range hs {
			if h.Message.ID != id {
				t.Fatalf("hand-offs of %d: got one of %d", id, h.Message.ID)
			}
			out = append(out, h.State+":"+h.HeldBy)
		}
		return out
	}
	eq := func(what string, got []string, want ...string) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %q, want %q", what, got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%s: %q, want %q", what, got, want)
			}
		}
	}
	eq("before", heldBy(plain.ID), "pending:")
	eq("before (paid)", heldBy(paid.ID), "pending:payment")

	hs, err := s.HandoffHold(ctx, plain.ID)
	if err != nil || len(hs) != 1 || !hs[0].Held || hs[0].HeldBy != "person" {
		t.Fatalf("hold: %+v %v", hs, err)
	}
	if _, err := s.HandoffHold(ctx, paid.ID); err != nil {
		t.Fatal(err)
	}
	eq("held (paid)", heldBy(paid.ID), "pending:person,payment")
	// Holding again changes nothing.
	if _, err := s.HandoffHold(ctx, plain.ID); err != nil {
		t.Fatal(err)
	}
	eq("held twice", heldBy(plain.ID), "pending:person")
	// The worker passes held hand-offs over, however late.
	if ds, err := s.ClaimDeliveries(ctx, "exec", base.Add(100*365*24*time.Hour), time.Minute, 10); err != nil || len(ds) != 0 {
		t.Fatalf("claim of held hand-offs: %+v %v", ds, err)
	}
	// The payment verified: held by the person alone.
	ps, err := s.ClaimPayments(ctx, base.Add(time.Hour), time.Minute, 10, nil)
	if err != nil || len(ps) != 1 || ps[0].ID != paid.ID {
		t.Fatalf("claim payment: %+v %v", ps, err)
	}
	if err := s.SettlePayment(ctx, paid.ID, store.Settlement{State: store.PaymentVerified, Paid: "5", CheckedAt: base.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	eq("verified while held", heldBy(paid.ID), "pending:person")

	// Released: due now.
	if hs, err := s.HandoffRelease(ctx, plain.ID); err != nil || len(hs) != 1 || hs[0].Held || hs[0].State != store.HandoffPending {
		t.Fatalf("release: %+v %v", hs, err)
	}
	if ds, err := s.ClaimDeliveries(ctx, "exec", time.Now().Add(time.Minute), time.Minute, 10); err != nil || len(ds) != 1 || ds[0].MessageID != plain.ID {
		t.Fatalf("claim after release: %+v %v", ds, err)
	}
	// Nothing held to release; a message with nothing pending cannot be
	// held; an unknown message is not found.
	if _, err := s.HandoffRelease(ctx, plain.ID); !errors.Is(err, store.ErrNoPendingHandoff) {
		t.Fatalf("release of nothing held: %v", err)
	}
	if _, err := s.HandoffRelease(ctx, paid.ID); err != nil {
		t.Fatal(err)
	}
	eq("released (paid, verified)", heldBy(paid.ID), "pending:")
	if _, err := s.HandoffHold(ctx, 1<<40); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("hold of an unknown message: %v", err)
	}
	quiet, err := s.Ingest(ctx, msg("hold3@a.test", "a@a.test", "ord_h3", func(in *store.Incoming) { in.Handoff = nil }))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.HandoffHold(ctx, quiet.ID); !errors.Is(err, store.ErrNoPendingHandoff) {
		t.Fatalf("hold of a message without hand-offs: %v", err)
	}

	// Held while waiting for the payment, released before it is checked:
	// it waits for the payment again.
	p2 := paidMsg("hold4@a.test", "pay_h4", "0x04")
	if _, err := s.HandoffHold(ctx, p2.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.HandoffRelease(ctx, p2.ID); err != nil {
		t.Fatal(err)
	}
	eq("held, released, payment pending", heldBy(p2.ID), "pending:payment")
}
