package storetest

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/store"
)

// testEnqueueChecked: a send checked and queued in one transaction
// reports what Check reports, refuses an Envelopay message with errors
// (writing nothing) unless forced, is idempotent per Message-ID, and
// writes the raw bytes once: the queue entry reads them, byte for byte,
// from its stored copy.
func testEnqueueChecked(ctx context.Context, t *testing.T, s Rules) {
	now := time.Now().UTC()
	body := strings.Repeat("a line of text that compresses well\r\n", 40)
	send := func(mid string, refs map[string]string) *store.Outgoing {
		out := outgoing(mid, "b@b.test")
		out.Raw = []byte("Message-ID: <" + mid + ">\r\nSubject: PAY | x\r\n\r\n" + body)
		out.Copy.Raw, out.Copy.Type, out.Copy.Subject, out.Copy.Refs = out.Raw, "pay", "PAY | x", refs
		return out
	}
	count := func() (int, int) {
		t.Helper()
		ms, err := s.Messages(ctx, store.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		q, err := s.Queue(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		return len(ms), len(q)
	}

	// A clean message: queued with its copy, the outcome Check's.
	ok1 := send("ec1@here.test", nil)
	q, err := s.EnqueueChecked(ctx, ok1, false)
	if err != nil || q.ID <= 0 || q.Copy.ID <= 0 || q.Copy.Status != store.StatusAccepted || len(q.Copy.Errors) != 0 || q.Copy.ThreadID == "" {
		t.Fatalf("EnqueueChecked of a clean message: %+v, %v", q, err)
	}
	if m, n := count(); m != 1 || n != 1 {
		t.Fatalf("%d messages, %d queue entries after one send; want 1, 1", m, n)
	}
	first := q.ID

	// A typed ref naming nothing: refused, nothing written.
	bad := send("ec2@here.test", map[string]string{"order_ref": "ord_missing"})
	want, err := s.Check(ctx, bad.Copy)
	if err != nil || len(want.Errors) != 1 || want.Errors[0].Code != protocols.CodeUnknownRef {
		t.Fatalf("Check of the unknown ref: %+v, %v", want, err)
	}
	_, err = s.EnqueueChecked(ctx, bad, false)
	var refused *store.RefusedError
	if !errors.As(err, &refused) || !slices.Equal(refused.Outcome.Errors, want.Errors) || refused.Outcome.Status != want.Status {
		t.Fatalf("EnqueueChecked of an unknown ref: %v; want a refusal with %+v", err, want)
	}
	if m, n := count(); m != 1 || n != 1 {
		t.Fatalf("a refused send wrote: %d messages, %d queue entries; want 1, 1", m, n)
	}

	// Forced: queued and stored; the answer is Check's, the stored copy
	// keeps the errors Ingest finds (unknown_ref is the sender's alone).
	q, err = s.EnqueueChecked(ctx, bad, true)
	if err != nil || q.ID <= 0 || !slices.Equal(q.Copy.Errors, want.Errors) || q.Copy.Status != want.Status || q.Copy.ThreadID != want.ThreadID {
		t.Fatalf("forced EnqueueChecked: %+v, %v; want the outcome %+v", q, err, want)
	}
	if m, n := count(); m != 2 || n != 2 {
		t.Fatalf("%d messages, %d queue entries after a forced send; want 2, 2", m, n)
	}
	stored, err := s.Message(ctx, q.Copy.ID)
	if err != nil || len(stored.Errors) != 0 || stored.MessageID != "ec2@here.test" {
		t.Fatalf("forced copy %+v, %v; want it stored without unknown_ref", stored, err)
	}

	// The same Message-ID again: the first entry, nothing new written,
	// the outcome as Check reports it now.
	again, err := s.EnqueueChecked(ctx, send("ec1@here.test", nil), false)
	if err != nil || again.ID != first || again.Copy.ID != 0 || again.Copy.ThreadID == "" {
		t.Fatalf("EnqueueChecked of a queued Message-ID: %+v, %v", again, err)
	}
	if m, n := count(); m != 2 || n != 2 {
		t.Fatalf("a repeated send wrote: %d messages, %d queue entries; want 2, 2", m, n)
	}

	// A copy holding other bytes than the entry (a withheld body): the
	// entry keeps its own.
	other := send("ec3@here.test", nil)
	other.Copy.Raw = []byte("Message-ID: <ec3@here.test>\r\nSubject: PAY | x\r\n\r\n[withheld]\r\n")
	if _, err := s.EnqueueChecked(ctx, other, false); err != nil {
		t.Fatal(err)
	}

	// Every entry is delivered with its bytes exactly as queued.
	ds, err := s.ClaimDue(ctx, now.Add(time.Second), time.Minute, 10)
	if err != nil || len(ds) != 3 {
		t.Fatalf("ClaimDue: %d, %v; want 3", len(ds), err)
	}
	byID := map[int64][]byte{}
	qs, _ := s.Queue(ctx, "")
	for i, e := range qs {
		byID[e.ID] = [][]byte{ok1.Raw, bad.Raw, other.Raw}[i]
	}
	for _, d := range ds {
		if !bytes.Equal(d.Raw, byID[d.QueueID]) {
			t.Errorf("entry %d delivers %q, want %q", d.QueueID, d.Raw, byID[d.QueueID])
		}
	}
}
