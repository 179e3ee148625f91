package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/store"
)

// testPayments: the payments' room (store.Payments) on every backend.
// Pending payments are claimed with a lease, authenticated senders first,
// each by one worker of several store instances (nodes) within a lease,
// and again after the lease when their worker died (a restart, kill -9:
// the row is durable); a settled payment writes its event once; release
// takes the claim's attempt back; recheck makes a settled payment due;
// a duplicate is never checked.
func testPayments(t *testing.T, open func(t *testing.T) Payments) {
	ctx := context.Background()
	ss := openNodes(t, open)
	pays := make([]store.Payments, len(ss))
	for i, s := range ss {
		pays[i] = s
	}
	const n = 30
	ids := map[int64]bool{}
	var authID int64
	for i := range n {
		out, err := ss[0].Ingest(ctx, msg(fmt.Sprintf("pay%d@a.test", i), fmt.Sprintf("s%d@a.test", i), fmt.Sprintf("pay_%d", i), func(in *store.Incoming) {
			in.ProofFingerprint = fmt.Sprintf("fp-pay-%d", i)
			in.Proof = &store.ProofFacts{Chain: "base", Tx: fmt.Sprintf("0x%064x", i), Token: "USDC", Amount: "5", Check: true,
				Authenticated: i == n-1}
		}))
		if err != nil || out.Status != store.StatusAccepted {
			t.Fatalf("ingest %d: %v %v", i, out, err)
		}
		ids[out.ID] = true
		if i == n-1 {
			authID = out.ID
		}
	}
	dup, err := ss[1].Ingest(ctx, msg("dup@a.test", "m@m.test", "pay_dup", func(in *store.Incoming) {
		in.ProofFingerprint = "fp-pay-0"
		in.Proof = &store.ProofFacts{Chain: "base", Tx: fmt.Sprintf("0x%064x", 0), Check: true}
	}))
	if err != nil || dup.Status != store.StatusDuplicate {
		t.Fatalf("duplicate: %+v %v", dup, err)
	}
	if p, err := pays[2].GetPayment(ctx, dup.ID); err != nil || p.State != store.PaymentDuplicate || p.Reason == "" {
		t.Fatalf("duplicate's payment %+v %v", p, err)
	}
	now := base.Add(time.Minute)

	// The authenticated sender's payment comes first.
	first, err := pays[0].ClaimPayments(ctx, now, time.Minute, 1, nil)
	if err != nil || len(first) != 1 || first[0].ID != authID || first[0].Attempts != 1 || !first[0].Authenticated {
		t.Fatalf("first claim %+v %v, want the authenticated sender's payment %d", first, err, authID)
	}
	// Release gives it back, attempt not counted.
	if err := pays[1].ReleasePayment(ctx, authID, now); err != nil {
		t.Fatal(err)
	}

	// Every node claims in a loop: each payment is taken exactly once.
	got := claimRace(t, len(ss)*2, func(i int) ([]store.Payment, error) {
		return pays[i%len(ss)].ClaimPayments(ctx, now, time.Minute, 3, nil)
	}, func(p store.Payment) int64 {
		if p.Attempts != 1 {
			t.Errorf("payment %d: attempts %d, want 1", p.ID, p.Attempts)
		}
		return p.ID
	})
	if len(got) != n {
		t.Errorf("%d payments claimed, want %d", len(got), n)
	}
	for id, c := range got {
		if c != 1 || !ids[id] {
			t.Errorf("payment %d claimed %d times", id, c)
		}
	}
	// Within the lease nothing more; after it (the workers died), all again.
	if ps, err := pays[2].ClaimPayments(ctx, now.Add(30*time.Second), time.Minute, 100, nil); err != nil || len(ps) != 0 {
		t.Fatalf("claim within the lease: %d %v", len(ps), err)
	}
	// A restarted node finds them after the lease.
	ss[2].Close()
	re := openStore(t, open)
	later := now.Add(2 * time.Minute)
	pays[2] = re
	ps, err := pays[2].ClaimPayments(ctx, later, time.Minute, 100, nil)
	if err != nil || len(ps) != n {
		t.Fatalf("claim after the lease: %d %v, want %d", len(ps), err, n)
	}

	// Settle: verified writes one event; pending reschedules.
	v := ps[0].ID
	if err := pays[0].SettlePayment(ctx, v, store.Settlement{State: store.PaymentVerified, Paid: "5", To: "0xto", From: "0xfrom",
		Block: 9, Confirmations: 2, Warnings: []string{"overpaid"}, CheckedAt: later}); err != nil {
		t.Fatal(err)
	}
	if err := pays[0].SettlePayment(ctx, v, store.Settlement{State: store.PaymentMismatch, CheckedAt: later}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("settling a settled payment: %v, want ErrNotFound", err)
	}
	r := ps[1].ID
	if err := pays[1].SettlePayment(ctx, r, store.Settlement{State: store.PaymentNotFound, Reason: "gone", CheckedAt: later}); err != nil {
		t.Fatal(err)
	}
	pend := ps[2].ID
	if err := pays[1].SettlePayment(ctx, pend, store.Settlement{State: store.PaymentPending, Reason: "not yet", CheckedAt: later, Next: later.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	p, err := pays[2].GetPayment(ctx, v)
	if err != nil || p.State != store.PaymentVerified || p.Paid != "5" || p.To != "0xto" || p.From != "0xfrom" || p.Block != 9 ||
		p.Confirmations != 2 || len(p.Warnings) != 1 || p.CheckedAt == nil || !p.CheckedAt.Equal(later) || p.NextCheck != nil {
		t.Errorf("verified payment %+v %v", p, err)
	}
	if p, err := pays[2].GetPayment(ctx, pend); err != nil || p.State != store.PaymentPending || p.NextCheck == nil || !p.NextCheck.Equal(later.Add(time.Hour)) {
		t.Errorf("pending payment %+v %v", p, err)
	}
	api := ss[0]
	evs, err := api.Events(ctx, store.EventFilter{Types: []string{store.EventPaymentVerified, store.EventPaymentRejected}})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range evs {
		kinds = append(kinds, fmt.Sprintf("%s %d %s", e.Type, e.MessageID, e.Inbox))
	}
	want := []string{fmt.Sprintf("payment.verified %d agent@here.test", v), fmt.Sprintf("payment.rejected %d agent@here.test", r)}
	if fmt.Sprint(kinds) != fmt.Sprint(want) {
		t.Errorf("events %q, want %q", kinds, want)
	}
	// Lists and filters.
	if l, err := pays[0].ListPayments(ctx, store.PaymentFilter{State: store.PaymentVerified}); err != nil || len(l) != 1 || l[0].ID != v {
		t.Errorf("verified list %+v %v", l, err)
	}
	if _, err := pays[0].ListPayments(ctx, store.PaymentFilter{State: "bogus"}); !errors.Is(err, store.ErrBadInput) {
		t.Errorf("bad state filter: %v", err)
	}
	if m, err := pays[0].PaymentsFor(ctx, []int64{v, r, dup.ID, -1}); err != nil || len(m) != 3 || m[dup.ID].State != store.PaymentDuplicate {
		t.Errorf("PaymentsFor %v %v", m, err)
	}
	// Recheck: a settled payment is due again; a duplicate never is.
	if err := pays[1].RecheckPayment(ctx, r, later); err != nil {
		t.Fatal(err)
	}
	if err := pays[1].RecheckPayment(ctx, dup.ID, later); !errors.Is(err, store.ErrPaymentFinal) {
		t.Errorf("recheck of a duplicate: %v", err)
	}
	if err := pays[1].RecheckPayment(ctx, 1<<60, later); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("recheck of nothing: %v", err)
	}
	got2, err := pays[0].ClaimPayments(ctx, later, time.Minute, 100, nil)
	if err != nil || len(got2) != 1 || got2[0].ID != r || got2[0].Attempts != 1 {
		t.Errorf("claim after recheck %+v %v, want payment %d, attempt 1", got2, err, r)
	}

	// A node claims only the chains it has a rail for.
	sol, err := ss[0].Ingest(ctx, msg("sol@a.test", "s@a.test", "pay_sol", func(in *store.Incoming) {
		in.ProofFingerprint = "fp-pay-sol"
		in.Proof = &store.ProofFacts{Chain: "solana", Tx: "sig", Check: true}
	}))
	if err != nil {
		t.Fatal(err)
	}
	for _, chains := range [][]string{{"base"}, {}} {
		if ps, err := pays[1].ClaimPayments(ctx, later, time.Minute, 100, chains); err != nil || len(ps) != 0 {
			t.Errorf("claim on %q: %+v %v, want none", chains, ps, err)
		}
	}
	if ps, err := pays[1].ClaimPayments(ctx, later, time.Minute, 100, []string{"base", "solana"}); err != nil || len(ps) != 1 || ps[0].ID != sol.ID {
		t.Errorf("claim on base and solana: %+v %v, want the solana payment", ps, err)
	}

	// The courtesy OOPS of a rejected payment: decided once per message,
	// by the store's limits, queued when allowed.
	rejected := r // settled not_found above, then rechecked: its message has no decision yet
	plan := &store.OOPSPlan{Code: protocols.CodeTxNotFound, To: "s1@a.test", From: "agent@here.test"}
	rec, err := pays[0].OwePaymentOOPS(ctx, rejected, plan, store.OOPSLimits{}, later)
	if err != nil || rec == nil || !rec.Pending {
		t.Errorf("payment OOPS: %+v %v, want owed", rec, err)
	}
	// The owed-OOPS worker queues it.
	out := store.Outcome{ID: rejected, OOPS: rec}
	settleOwed(t, ss[0], &out, func(o store.OwedOOPS) *store.Outgoing {
		raw := []byte("Message-ID: <oops.pay@here.test>\r\nSubject: OOPS | tx_not_found\r\n\r\n{}\r\n")
		return &store.Outgoing{From: o.From, Recipients: []string{o.To}, Raw: raw, MessageID: "oops.pay@here.test", Kind: "oops"}
	}, `{"type":"oops"}`)
	if rec = out.OOPS; rec == nil || !rec.Sent || rec.QueueID == 0 {
		t.Errorf("payment OOPS: %+v, want sent", rec)
	}
	if rec, err := pays[1].OwePaymentOOPS(ctx, rejected, plan, store.OOPSLimits{}, later); err != nil || rec != nil {
		t.Errorf("payment OOPS again: %+v %v, want no second decision", rec, err)
	}
	sup := &store.OOPSPlan{Code: protocols.CodeTxNotFound, To: "x@a.test", Suppressed: store.OOPSSenderUnverified, Detail: "not verified"}
	if rec, err := pays[1].OwePaymentOOPS(ctx, pend, sup, store.OOPSLimits{}, later); err != nil || rec == nil || rec.Sent || rec.Reason != store.OOPSSenderUnverified {
		t.Errorf("suppressed payment OOPS: %+v %v", rec, err)
	}
	if m, err := ss[0].Message(ctx, pend); err != nil || m.OOPS == nil || !m.Warnings.Has(protocols.CodeOOPSSuppressed) {
		t.Errorf("suppressed payment OOPS on the message: %+v %v", m, err)
	}
}
