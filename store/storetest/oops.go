package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/store"
)

// testOOPSLimits: the courtesy OOPS rules — at most
// PerThreadCode OOPS per thread and error code, PerRecipientHour to one
// address in any hour, counted in the store so that a reopen does not
// reset them; a suppressed OOPS (by the caller or by a limit) is recorded
// on the message with its reason and the warning oops_suppressed, and
// queues nothing.
func testOOPSLimits(t *testing.T, open func(t *testing.T) Rules) {
	ctx := context.Background()
	lim := store.OOPSLimits{PerRecipientHour: 2, PerThreadCode: 1}
	// bad is a quarantined unknown_type mail from x@peer.test, at
	// seconds after base, replying to irt when not "".
	bad := func(mid, irt string, at int64, suppress string) *store.Incoming {
		return msg(mid, "x@peer.test", "", func(in *store.Incoming) {
			in.Type, in.Subject, in.Status = "", "REFUND | x", store.StatusQuarantined
			in.Errors = protocols.Problems{protocols.New(protocols.CodeUnknownType, "subject", "unknown type")}
			in.ReceivedAt = base.Add(time.Duration(at) * time.Second)
			if irt != "" {
				in.InReplyTo = []string{irt}
			}
			in.OOPSLimits = lim
			in.OOPS = &store.OOPSTerms{Codes: []protocols.Code{protocols.CodeUnknownType}, To: "x@peer.test", From: "agent@here.test",
				Suppressed: suppress}
		})
	}
	type step struct {
		in     *store.Incoming
		reason string // "" = sent
	}
	check := func(s Rules, name string, st step) {
		t.Helper()
		out, err := s.Ingest(ctx, st.in)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		settleOwed(t, s, &out, func(o store.OwedOOPS) *store.Outgoing { return oopsMail(st.in, o.Code) }, `{"v":"0.2.0","type":"oops"}`)
		if out.Status != store.StatusQuarantined || out.OOPS == nil {
			t.Fatalf("%s: outcome %+v, want quarantined with an OOPS decision", name, out)
		}
		sent := st.reason == ""
		if out.OOPS.Sent != sent || out.OOPS.Reason != st.reason || (out.QueuedOOPS != 0) != sent ||
			out.Warnings.Has(protocols.CodeOOPSSuppressed) == sent {
			t.Errorf("%s: OOPS %+v queued %d warnings %v; want sent=%v reason %q", name, out.OOPS, out.QueuedOOPS, out.Warnings, sent, st.reason)
		}
		m, err := s.Message(ctx, out.ID)
		if err != nil {
			t.Fatal(err)
		}
		if m.OOPS == nil || m.OOPS.Sent != sent || m.OOPS.Reason != st.reason || m.OOPS.Code != protocols.CodeUnknownType ||
			m.OOPS.To != "x@peer.test" || m.Warnings.Has(protocols.CodeOOPSSuppressed) == sent {
			t.Errorf("%s: stored decision %+v, warnings %v; want sent=%v reason %q", name, m.OOPS, m.Warnings, sent, st.reason)
		}
		if sent && (m.OOPS.QueueID != out.QueuedOOPS || m.OOPS.MessageID != "oops."+st.in.MessageID ||
			string(m.OOPS.Body) != `{"v":"0.2.0","type":"oops"}`) {
			t.Errorf("%s: stored decision %+v does not name the queued OOPS %d", name, m.OOPS, out.QueuedOOPS)
		}
	}
	s := open(t)
	check(s, "first", step{bad("o1@peer.test", "", 0, ""), ""})
	check(s, "same thread and code", step{bad("o2@peer.test", "o1@peer.test", 1, ""), store.OOPSRateThread})
	check(s, "unverified", step{bad("o3@peer.test", "", 2, store.OOPSSenderUnverified), store.OOPSSenderUnverified})
	check(s, "second thread", step{bad("o4@peer.test", "", 3, ""), ""})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t) // a restart keeps the counts
	defer s.Close()
	check(s, "third thread, same hour, after reopen", step{bad("o5@peer.test", "", 600, ""), store.OOPSRateRecipient})
	check(s, "first thread again, after reopen", step{bad("o6@peer.test", "o1@peer.test", 700, ""), store.OOPSRateThread})
	check(s, "an hour after the first", step{bad("o7@peer.test", "", 3601, ""), ""})
	if n := queuedOOPS(t, s); n != 3 {
		t.Errorf("%d OOPS queued, want 3", n)
	}
}

// testProblemTexts: a duplicate's problem text (which a courtesy OOPS
// carries to the peer) names the earlier message by its Envelopay id and
// Message-ID, never by the store's internal row id.
func testProblemTexts(ctx context.Context, t *testing.T, s Rules) {
	first, err := s.Ingest(ctx, msg("first@a.test", "a@a.test", "pay_1", func(in *store.Incoming) { in.ProofFingerprint = "fp" }))
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []*store.Incoming{
		msg("again@a.test", "a@a.test", "pay_1", nil),                                                     // duplicate_id
		msg("other@b.test", "b@b.test", "pay_2", func(in *store.Incoming) { in.ProofFingerprint = "fp" }), // duplicate_proof
	} {
		out, err := s.Ingest(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Errors) != 1 {
			t.Fatalf("%s: errors %v, want one duplicate", in.MessageID, out.Errors)
		}
		m := out.Errors[0].Message
		if !strings.Contains(m, "pay_1") || !strings.Contains(m, "<first@a.test>") || strings.Contains(m, "stored message") ||
			strings.Contains(m, fmt.Sprintf("message %d", first.ID)) {
			t.Errorf("%s: %q, want the earlier message named as pay_1 <first@a.test>, not by row id %d", in.MessageID, m, first.ID)
		}
	}
}

// settleOwed plays the owed-OOPS worker after an ingest whose outcome out
// owes an OOPS: it claims the owed row and queues mail(owed) for it, and
// fills out's OOPS record and queue id as ResolveOOPS leaves them.
func settleOwed(t *testing.T, ow store.OOPSLog, out *store.Outcome, mail func(store.OwedOOPS) *store.Outgoing, body string) {
	t.Helper()
	if out.OOPS == nil || !out.OOPS.Pending {
		return
	}
	ctx := context.Background()
	owed, err := ow.ClaimOwedOOPS(ctx, time.Now(), time.Minute, 10)
	if err != nil || len(owed) != 1 || owed[0].MessageID != out.ID {
		t.Fatalf("claim owed OOPS: %+v %v, want the one of message %d", owed, err, out.ID)
	}
	rec, err := ow.ResolveOOPS(ctx, owed[0], mail(owed[0]), json.RawMessage(body), "")
	if err != nil || rec == nil {
		t.Fatalf("resolve owed OOPS: %+v %v", rec, err)
	}
	out.OOPS, out.QueuedOOPS = rec, rec.QueueID
}

// testOwedOOPS: the ingest records an allowed OOPS as owed, a row in its
// transaction, and composes nothing. When the process dies before a
// worker composes it (here: the store is closed right after the commit),
// the mail is stored, the OOPS stays owed (its rate slot taken, its record
// pending), and a worker settles it later: a claim leases it to one
// worker at a time (again after the lease, when that worker died), and
// ResolveOOPS settles it exactly once, even when two nodes' workers race
// for it.
func testOwedOOPS(t *testing.T, open func(t *testing.T) Rules) {
	ctx := context.Background()
	s := open(t)
	in := msg("owed@peer.test", "x@peer.test", "", func(in *store.Incoming) {
		in.Type, in.Subject, in.Status = "", "REFUND | x", store.StatusQuarantined
		in.Errors = protocols.Problems{protocols.New(protocols.CodeUnknownType, "subject", "unknown type")}
		in.OOPS = &store.OOPSTerms{Codes: []protocols.Code{protocols.CodeUnknownType}, To: "x@peer.test", From: "agent@here.test"}
	})
	out, err := s.Ingest(ctx, in)
	if err != nil {
		t.Fatalf("the mail must be stored even though its OOPS was not queued: %v", err)
	}
	s.Close() // the process dies after the commit, before any worker ran
	if out.OOPS == nil || !out.OOPS.Pending || out.OOPS.Sent || out.QueuedOOPS != 0 {
		t.Fatalf("outcome OOPS %+v queued %d, want pending", out.OOPS, out.QueuedOOPS)
	}
	ns := openNodes(t, open)
	m, err := ns[0].Message(ctx, out.ID)
	if err != nil {
		t.Fatal(err)
	}
	if m.OOPS == nil || !m.OOPS.Pending {
		t.Fatalf("stored record %+v, want pending", m.OOPS)
	}
	ow := ns[0]
	if got, err := ow.OwedOOPSList(ctx, base.Add(-time.Second), 10); err != nil || len(got) != 0 {
		t.Fatalf("owed before its decision time: %v %v, want none", got, err)
	}
	listed, err := ow.OwedOOPSList(ctx, base.Add(time.Hour), 10)
	if err != nil || len(listed) != 1 || listed[0].MessageID != out.ID || listed[0].Code != protocols.CodeUnknownType ||
		listed[0].To != "x@peer.test" || listed[0].From != "agent@here.test" {
		t.Fatalf("owed %+v %v, want the one for message %d", listed, err, out.ID)
	}
	// Two nodes' workers claim at once: one gets it, leased.
	now := time.Now()
	claims := make([][]store.OwedOOPS, len(ns))
	errs := make([]error, len(ns))
	race(len(ns), func(i int) {
		claims[i], errs[i] = ns[i].ClaimOwedOOPS(ctx, now, time.Minute, 10)
	})
	claimed := 0
	for i, c := range claims {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		claimed += len(c)
	}
	if claimed != 1 {
		t.Fatalf("claimed %d times, want 1: %+v", claimed, claims)
	}
	if again, err := ow.ClaimOwedOOPS(ctx, now.Add(59*time.Second), time.Minute, 10); err != nil || len(again) != 0 {
		t.Fatalf("claimed within the lease: %+v %v", again, err)
	}
	// The worker that claimed it died: after the lease it is claimed again.
	owed, err := ow.ClaimOwedOOPS(ctx, now.Add(time.Minute), time.Minute, 10)
	if err != nil || len(owed) != 1 || owed[0].ID != listed[0].ID || owed[0].Attempts != 2 || owed[0].From != "agent@here.test" {
		t.Fatalf("claim after the lease: %+v %v, want the row again, attempt 2", owed, err)
	}
	// Two nodes' workers settle it at once: once.
	recs := make([]*store.OOPSRecord, len(ns))
	race(len(ns), func(i int) {
		recs[i], errs[i] = ns[i].ResolveOOPS(ctx, owed[0], oopsMail(in, owed[0].Code), json.RawMessage(`{"type":"oops"}`), "")
	})
	settled := 0
	for i, r := range recs {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if r != nil {
			settled++
			if !r.Sent || r.Pending || r.QueueID == 0 || r.MessageID != "oops."+in.MessageID {
				t.Errorf("record %+v", r)
			}
		}
	}
	if settled != 1 {
		t.Errorf("settled %d times, want 1", settled)
	}
	q, err := ns[1].Queue(ctx, "")
	if err != nil || len(q) != 1 || q[0].Kind != "oops" {
		t.Errorf("queue %+v %v, want the one OOPS", q, err)
	}
	if got, err := ow.OwedOOPSList(ctx, base.Add(time.Hour), 10); err != nil || len(got) != 0 {
		t.Errorf("still owed: %v %v", got, err)
	}
	if got, err := ow.ClaimOwedOOPS(ctx, now.Add(time.Hour), time.Minute, 10); err != nil || len(got) != 0 {
		t.Errorf("claimable after it was queued: %v %v", got, err)
	}
	m, err = ns[2].Message(ctx, out.ID)
	if err != nil || m.OOPS == nil || !m.OOPS.Sent || m.OOPS.Pending || m.OOPS.QueueID != q[0].ID {
		t.Errorf("stored record %+v %v, want sent as queue %d", m.OOPS, err, q[0].ID)
	}
}
