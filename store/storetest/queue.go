package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/envelopd/envelopd/store"
)

func outgoing(mid string, rcpts ...string) *store.Outgoing {
	raw := []byte("Message-ID: <" + mid + ">\r\nSubject: ORDER | x\r\n\r\n{}\r\n")
	return &store.Outgoing{
		From: "agent@here.test", Recipients: rcpts, Raw: raw, MessageID: mid, Kind: "send",
		Copy: &store.Incoming{
			Direction: store.DirOut, Raw: raw, MessageID: mid, Sender: "agent@here.test", Recipients: rcpts,
			Subject: "ORDER | x", Type: "order", EnvelopayID: "ord_" + mid, Status: store.StatusAccepted,
		},
	}
}

func dueKeys(ds []store.Due) []string {
	return each(ds, func(d store.Due) string { return d.Rcpt })
}

func testQueue(ctx context.Context, t *testing.T, s Rules) {
	now := time.Now().UTC()

	id, err := s.Enqueue(ctx, outgoing("q1@here.test", "a@a.test", "b@b.test"))
	if err != nil {
		t.Fatal(err)
	}
	// Idempotent per Message-ID.
	again, err := s.Enqueue(ctx, outgoing("q1@here.test", "a@a.test", "b@b.test"))
	if err != nil || again != id {
		t.Fatalf("second Enqueue of the same Message-ID: %d, %v; want %d", again, err, id)
	}
	// The copy is stored as an outgoing message, once.
	ms, err := s.Messages(ctx, store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 || ms[0].Direction != store.DirOut || ms[0].MessageID != "q1@here.test" || ms[0].Status != store.StatusAccepted {
		t.Fatalf("stored copies %+v, want one outgoing q1", ms)
	}
	// A reply to it threads with it: threads show both directions.
	out, err := s.Ingest(ctx, msg("reply@a.test", "a@a.test", "inv_1", func(in *store.Incoming) {
		in.InReplyTo = []string{"q1@here.test"}
		in.Handoff = nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	if out.ThreadID != ms[0].ThreadID {
		t.Errorf("reply thread %s, want the outgoing copy's %s", out.ThreadID, ms[0].ThreadID)
	}

	// ClaimDue leases: attempts recorded before returning.
	ds, err := s.ClaimDue(ctx, now.Add(time.Second), time.Minute, 10)
	if err != nil {
		t.Fatal(err)
	}
	if got := dueKeys(ds); !slices.Equal(got, []string{"a@a.test", "b@b.test"}) {
		t.Fatalf("due %v, want a and b", got)
	}
	for _, d := range ds {
		if d.QueueID != id || d.Attempts != 1 || d.From != "agent@here.test" || len(d.Raw) == 0 || d.Expires.IsZero() {
			t.Errorf("due %+v", d)
		}
	}
	if ds, err := s.ClaimDue(ctx, now.Add(30*time.Second), time.Minute, 10); err != nil || len(ds) != 0 {
		t.Fatalf("within the lease: %v, %v; want nothing due", dueKeys(ds), err)
	}
	if err := s.RecordDelivery(ctx, id, "a@a.test", store.QueueSent, "", now); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordDelivery(ctx, id, "b@b.test", store.QueuePending, "451 try later", now.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if ds, err := s.ClaimDue(ctx, now.Add(90*time.Second), time.Minute, 10); err != nil || len(ds) != 0 {
		t.Fatalf("before the retry time: %v, %v; want nothing due", dueKeys(ds), err)
	}
	ds, err = s.ClaimDue(ctx, now.Add(3*time.Minute), time.Minute, 10)
	if err != nil || len(ds) != 1 || ds[0].Rcpt != "b@b.test" || ds[0].Attempts != 2 {
		t.Fatalf("retry: %+v, %v; want b with 2 attempts", ds, err)
	}
	if err := s.RecordDelivery(ctx, id, "b@b.test", store.QueueFailed, "550 no such user", now); err != nil {
		t.Fatal(err)
	}
	es, err := s.Queue(ctx, store.QueueFailed)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 || es[0].ID != id || len(es[0].Recipients) != 2 {
		t.Fatalf("failed entries %+v", es)
	}
	r := es[0].Recipients
	if r[0].Rcpt != "a@a.test" || r[0].State != store.QueueSent || r[1].State != store.QueueFailed ||
		r[1].LastError != "550 no such user" || r[1].Attempts != 2 {
		t.Errorf("recipients %+v", r)
	}
	// Sent and failed recipients have no next attempt: zero, and null in
	// JSON (not a zero time through UnixNano, year 1754).
	for _, x := range r {
		b, err := json.Marshal(x)
		if !x.NextAttempt.IsZero() || err != nil || !strings.Contains(string(b), `"next_attempt_at":null`) {
			t.Errorf("%s recipient: next attempt %v, JSON %s %v; want zero and null", x.State, x.NextAttempt, b, err)
		}
	}
	if es, _ := s.Queue(ctx, store.QueuePending); len(es) != 0 {
		t.Errorf("pending entries %+v, want none", es)
	}
	// Retry makes the failed recipient due again, never the sent one.
	if err := s.QueueRetry(ctx, id); err != nil {
		t.Fatal(err)
	}
	ds, err = s.ClaimDue(ctx, time.Now().Add(time.Second), time.Minute, 10)
	if err != nil || len(ds) != 1 || ds[0].Rcpt != "b@b.test" || ds[0].Attempts != 3 {
		t.Fatalf("after QueueRetry: %+v, %v; want b with 3 attempts", ds, err)
	}
	if err := s.QueueDrop(ctx, id); err != nil {
		t.Fatal(err)
	}
	es, _ = s.Queue(ctx, store.QueueDropped)
	if len(es) != 1 || es[0].Recipients[0].State != store.QueueSent || es[0].Recipients[1].State != store.QueueDropped {
		t.Errorf("after QueueDrop: %+v", es)
	}

	// Expiry: a pending recipient past Expires fails instead of being tried.
	o := outgoing("q2@here.test", "c@c.test")
	o.Expires = now.Add(time.Hour)
	id2, err := s.Enqueue(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if ds, err := s.ClaimDue(ctx, now.Add(2*time.Hour), time.Minute, 10); err != nil || len(ds) != 0 {
		t.Fatalf("expired entry was due: %+v, %v", ds, err)
	}
	es, _ = s.Queue(ctx, store.QueueFailed)
	if len(es) != 1 || es[0].ID != id2 || es[0].Recipients[0].LastError == "" {
		t.Errorf("expired entry: %+v", es)
	}

	for _, c := range []struct {
		name string
		err  error
	}{
		{"RecordDelivery", s.RecordDelivery(ctx, 999, "x@x.test", store.QueueSent, "", now)},
		{"RecordDelivery rcpt", s.RecordDelivery(ctx, id, "nobody@x.test", store.QueueSent, "", now)},
		{"QueueRetry", s.QueueRetry(ctx, 999)},
		{"QueueDrop", s.QueueDrop(ctx, 999)},
	} {
		if !errors.Is(c.err, store.ErrNotFound) {
			t.Errorf("%s of unknown entry: %v, want ErrNotFound", c.name, c.err)
		}
	}
}

func testDeliveries(ctx context.Context, t *testing.T, s Rules) {
	var ids []int64
	for _, m := range []string{"d1@a.test", "d2@a.test", "d3@a.test"} {
		out, err := s.Ingest(ctx, msg(m, "a@a.test", "", func(in *store.Incoming) {
			in.Handoff = []string{"exec", "webhook", "exec"}
			in.Result = []byte(`{"message_id":"` + m + `"}`)
		}))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, out.ID)
	}
	now := base.Add(time.Minute)
	ds, err := s.ClaimDeliveries(ctx, "exec", now, time.Minute, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 2 || ds[0].MessageID != ids[0] || ds[1].MessageID != ids[1] || ds[0].Attempts != 1 ||
		ds[0].Target != "exec" {
		t.Fatalf("first claim %+v", ds)
	}
	// The hand-off reads the claimed message once, without its raw bytes.
	if m, err := s.MessageInfo(ctx, ds[0].MessageID); err != nil || string(m.Result) != `{"message_id":"d1@a.test"}` || m.Raw != nil {
		t.Fatalf("claimed message %+v, %v", m, err)
	}
	rest, err := s.ClaimDeliveries(ctx, "exec", now, time.Minute, 10)
	if err != nil || len(rest) != 1 || rest[0].MessageID != ids[2] {
		t.Fatalf("second claim %+v, %v; want only the third", rest, err)
	}
	if err := s.DeliveryDone(ctx, ds[0].ID); err != nil {
		t.Fatal(err)
	}
	if err := s.DeliveryRetry(ctx, ds[1].ID, now.Add(10*time.Minute), "exit status 1"); err != nil {
		t.Fatal(err)
	}
	// After the lease: the third (lease ran out, no answer) is back; the
	// retried one waits for its time; the done one never returns.
	ds2, err := s.ClaimDeliveries(ctx, "exec", now.Add(2*time.Minute), time.Minute, 10)
	if err != nil || len(ds2) != 1 || ds2[0].MessageID != ids[2] || ds2[0].Attempts != 2 {
		t.Fatalf("after the lease: %+v, %v", ds2, err)
	}
	ds3, err := s.ClaimDeliveries(ctx, "exec", now.Add(11*time.Minute), time.Minute, 10)
	if err != nil || len(ds3) != 2 || ds3[0].MessageID != ids[1] || ds3[0].Attempts != 2 {
		t.Fatalf("after the retry time: %+v, %v", ds3, err)
	}
	wh, err := s.ClaimDeliveries(ctx, "webhook", now, time.Minute, 10)
	if err != nil || len(wh) != 3 {
		t.Fatalf("webhook: %+v, %v; want 3", wh, err)
	}
	// A claim released unattempted (the worker stopped first) is due
	// again at once and its attempt does not count.
	if err := s.DeliveryRelease(ctx, wh[0].ID, now); err != nil {
		t.Fatal(err)
	}
	again, err := s.ClaimDeliveries(ctx, "webhook", now, time.Minute, 10)
	if err != nil || len(again) != 1 || again[0].ID != wh[0].ID || again[0].Attempts != 1 {
		t.Fatalf("after a release: %+v, %v; want the released one at attempt 1", again, err)
	}
	if err := s.DeliveryRelease(ctx, 999, now); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("DeliveryRelease(999): %v, want ErrNotFound", err)
	}
	if err := s.DeliveryDone(ctx, 999); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("DeliveryDone(999): %v, want ErrNotFound", err)
	}
	if err := s.DeliveryRetry(ctx, 999, now, "x"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("DeliveryRetry(999): %v, want ErrNotFound", err)
	}
}

// testRestart closes the store and opens it again: messages, uniqueness
// facts, the queue and the hand-off log survive and resume.
func testRestart(t *testing.T, open func(t *testing.T) Rules) {
	ctx := context.Background()
	s := open(t)
	first, err := s.Ingest(ctx, msg("r1@a.test", "a@a.test", "pay_1", func(in *store.Incoming) { in.ProofFingerprint = "fp" }))
	if err != nil {
		t.Fatal(err)
	}
	qid, err := s.Enqueue(ctx, outgoing("rq@here.test", "a@a.test"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ClaimDue(ctx, time.Now(), time.Minute, 10); err != nil { // in flight at the "crash"
		t.Fatal(err)
	}
	if err := s.SetIMAPState(ctx, "acct/INBOX", 7, 42); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := s.Ingest(ctx, msg("late@a.test", "a@a.test", "", nil)); err == nil {
		t.Errorf("Ingest after Close succeeded")
	}

	s = open(t)
	defer s.Close()
	m, err := s.Message(ctx, first.ID)
	if err != nil || m.MessageID != "r1@a.test" || m.Status != store.StatusAccepted {
		t.Fatalf("after restart: %+v, %v", m, err)
	}
	again, err := s.Ingest(ctx, msg("r1@a.test", "a@a.test", "pay_1", func(in *store.Incoming) { in.ProofFingerprint = "fp" }))
	if err != nil || !again.Redelivery || again.ID != first.ID {
		t.Errorf("redelivery after restart: %+v, %v", again, err)
	}
	dup, err := s.Ingest(ctx, msg("r2@a.test", "b@b.test", "pay_2", func(in *store.Incoming) { in.ProofFingerprint = "fp" }))
	if err != nil || dup.Status != store.StatusDuplicate || !dup.Errors.Has("duplicate_proof") {
		t.Errorf("proof replay after restart: %+v, %v", dup, err)
	}
	ds, err := s.ClaimDeliveries(ctx, "exec", base, time.Minute, 10)
	if err != nil || len(ds) != 1 || ds[0].MessageID != first.ID {
		t.Errorf("hand-off after restart: %+v, %v", ds, err)
	}
	due, err := s.ClaimDue(ctx, time.Now().Add(2*time.Minute), time.Minute, 10)
	if err != nil || len(due) != 1 || due[0].QueueID != qid || due[0].Attempts != 2 {
		t.Errorf("queue after restart: %+v, %v; want the in-flight entry again, attempt 2", due, err)
	}
	v, u, err := s.IMAPState(ctx, "acct/INBOX")
	if err != nil || v != 7 || u != 42 {
		t.Errorf("IMAP state after restart: %d %d %v", v, u, err)
	}
}
