package mailin

import (
	"testing"

	"github.com/envelopd/envelopd/store"
)

// TestNaiveRetry: the same PAY resent under a new Message-ID after a lost
// 250 (as smtplib users do; here re-serialised too) is stored as a
// duplicate with code retry and gets no OOPS; the same id with other
// content stays duplicate_id.
func TestNaiveRetry(t *testing.T) {
	ts, rec, kit := oopsServer(t)
	const dir = "../testdata/flows/replay/"
	for _, f := range []string{"01-pay.eml", "04-pay-retry.eml", "03-pay-same-id.eml"} {
		ts.deliverSigned(t, kit, dir+f) // signed: a verified sender would be owed an OOPS
	}
	msgs := ts.all(t)
	if len(msgs) != 3 {
		t.Fatalf("stored %d messages, want 3 (no OOPS copy)", len(msgs))
	}
	for i, want := range []struct{ status, codes string }{
		{store.StatusAccepted, ""},
		{store.StatusDuplicate, "retry"},
		{store.StatusDuplicate, "duplicate_id"},
	} {
		if m := msgs[i]; m.Status != want.status || codes(m.Errors) != want.codes {
			t.Errorf("message %d (%s): %s %q, want %s %q", i+1, m.MessageID, m.Status, codes(m.Errors), want.status, want.codes)
		}
	}
	if c, q := rec.take(), ts.queuedOOPS(t); len(c) != 0 || len(q) != 0 {
		t.Errorf("OOPS composed %v, queued to %v; want none", c, q)
	}
}
