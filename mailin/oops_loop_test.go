package mailin

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/envelopd/envelopd/dkim"
	"github.com/envelopd/envelopd/mailout"
	"github.com/envelopd/envelopd/parse"
	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/store"
)

const oopsData = "../testdata/mailin-oops/"

// oopsRecorder wraps mailout.ComposeOOPS (what serve uses, unsigned) and
// remembers the code of every OOPS composed.
type oopsRecorder struct {
	mu    sync.Mutex
	codes []protocols.Code
}

func (o *oopsRecorder) compose(r *parse.Result, code protocols.Code, note, from string) ([]byte, error) {
	o.mu.Lock()
	o.codes = append(o.codes, code)
	o.mu.Unlock()
	return mailout.ComposeOOPS(r, code, note, from)
}

func (o *oopsRecorder) take() []protocols.Code {
	o.mu.Lock()
	defer o.mu.Unlock()
	c := o.codes
	o.codes = nil
	return c
}

// oopsServer is an SMTP test server whose pipeline sends courtesy OOPS
// (and verifies DKIM with v, when not nil).
func oopsServer(t *testing.T, v *dkim.Verifier) (*testServer, *oopsRecorder) {
	t.Helper()
	rec := &oopsRecorder{}
	ts := startServer(t, SMTPConfig{}, func(p *Pipeline) {
		p.OOPS = rec.compose
		p.Verifier = v
	})
	return ts, rec
}

// queuedOOPS returns the recipients of the pending OOPS queue entries.
func (ts *testServer) queuedOOPS(t *testing.T) []string {
	t.Helper()
	q, err := ts.store.Queue(context.Background(), store.QueuePending)
	if err != nil {
		t.Fatal(err)
	}
	var to []string
	for _, e := range q {
		if e.Kind != "oops" {
			continue
		}
		for _, r := range e.Recipients {
			to = append(to, r.Rcpt)
		}
	}
	return to
}

// TestCourtesyOOPSLoopSafety: an unknown type is owed an OOPS, except
// when the mail is automated (RFC 3834 Auto-Submitted other than "no",
// RFC 2369 List-*, Precedence bulk/list/junk, RFC 6522 multipart/report).
// Every case goes through SMTP, the pipeline and the store.
func TestCourtesyOOPSLoopSafety(t *testing.T) {
	for _, tc := range []struct {
		file string
		oops bool
	}{
		{"plain", true},
		{"auto-submitted-no", true},
		{"auto-replied", false},
		{"auto-generated-params", false},
		{"list-id", false},
		{"precedence-bulk", false},
		{"precedence-list", false},
		{"precedence-junk", false},
		{"multipart-report", false},
	} {
		t.Run(tc.file, func(t *testing.T) {
			ts, rec := oopsServer(t, nil)
			ts.deliver(t, oopsData+tc.file+".eml")
			msgs := ts.all(t)
			if len(msgs) == 0 || !strings.Contains(codes(msgs[0].Errors), string(protocols.CodeUnknownType)) {
				t.Fatalf("stored %+v, want the mail with unknown_type", msgs)
			}
			codes, queued := rec.take(), ts.queuedOOPS(t)
			if !tc.oops {
				if len(codes) != 0 || len(queued) != 0 || len(msgs) != 1 {
					t.Errorf("automated mail got an OOPS: composed %v, queued to %v, %d messages stored", codes, queued, len(msgs))
				}
				return
			}
			if len(codes) != 1 || codes[0] != protocols.CodeUnknownType || len(queued) != 1 || queued[0] != "alice@buyer.test" {
				t.Errorf("OOPS composed %v, queued to %v; want one unknown_type OOPS to alice@buyer.test", codes, queued)
			}
			if len(msgs) != 2 || msgs[1].Direction != store.DirOut || msgs[1].Type != "oops" || msgs[1].ThreadID != msgs[0].ThreadID {
				t.Errorf("stored %d messages, want the mail and its OOPS in one thread: %+v", len(msgs), msgs)
			}
		})
	}
}

// TestCourtesyOOPSCodes: dkim_failed (a signed mail tampered in transit),
// amount_mismatch (an ACCEPT short of its OFFER) and missing_field each
// queue one OOPS to the sender through the real ingest path; the intact
// signed mail and the OFFER get none.
func TestCourtesyOOPSCodes(t *testing.T) {
	t.Run("dkim_failed", func(t *testing.T) {
		k, err := dkim.GenerateKey("ed25519")
		if err != nil {
			t.Fatal(err)
		}
		line, err := dkim.TXTRecord("signed.test", "ed1", k.Public())
		if err != nil {
			t.Fatal(err)
		}
		r := dkim.NewStaticResolver()
		name, txt, _ := strings.Cut(line, " ")
		r.Add(name, txt)
		ts, rec := oopsServer(t, &dkim.Verifier{Resolver: r})

		raw := bytes.ReplaceAll(readEML(t, oopsData+"signed-which.eml"), []byte("\n"), []byte("\r\n"))
		signed, err := dkim.Sign(raw, dkim.Signer{Domain: "signed.test", Selector: "ed1", Key: k})
		if err != nil {
			t.Fatal(err)
		}
		if code, text, err := send(t, ts.addr, "alice@signed.test", []string{"bob@worker.test"}, signed); code != 250 {
			t.Fatalf("intact: %d %s %v", code, text, err)
		}
		if c, q := rec.take(), ts.queuedOOPS(t); len(c) != 0 || len(q) != 0 {
			t.Fatalf("intact signed mail got an OOPS: %v %v", c, q)
		}
		tampered := bytes.Replace(signed, []byte("what do you accept?"), []byte("what do you take??"), 1)
		tampered = bytes.Replace(tampered, []byte("<signed-which@"), []byte("<signed-which-2@"), 1)
		if bytes.Equal(tampered, signed) {
			t.Fatal("tampering changed nothing")
		}
		if code, text, err := send(t, ts.addr, "alice@signed.test", []string{"bob@worker.test"}, tampered); code != 250 {
			t.Fatalf("tampered: %d %s %v", code, text, err)
		}
		wantOOPS(t, ts, rec, protocols.CodeDKIMFailed, "alice@signed.test")
	})
	t.Run("amount_mismatch", func(t *testing.T) {
		ts, rec := oopsServer(t, nil)
		ts.deliver(t, "../testdata/flows/exchange/01-offer.eml")
		if c, q := rec.take(), ts.queuedOOPS(t); len(c) != 0 || len(q) != 0 {
			t.Fatalf("OFFER got an OOPS: %v %v", c, q)
		}
		ts.deliver(t, "../testdata/flows/exchange/02-accept-short.eml")
		wantOOPS(t, ts, rec, protocols.CodeAmountMismatch, "dave@desk.test")
	})
	t.Run("missing_field", func(t *testing.T) {
		ts, rec := oopsServer(t, nil)
		ts.deliver(t, oopsData+"missing-field.eml")
		wantOOPS(t, ts, rec, protocols.CodeMissingField, "worker@example.test")
	})
}

// wantOOPS checks that exactly one OOPS with code was composed since the
// last take and that one OOPS entry, to to, is queued.
func wantOOPS(t *testing.T, ts *testServer, rec *oopsRecorder, code protocols.Code, to string) {
	t.Helper()
	c, q := rec.take(), ts.queuedOOPS(t)
	if len(c) != 1 || c[0] != code || len(q) != 1 || q[0] != to {
		t.Errorf("OOPS composed %v, queued to %v; want one %s OOPS to %s", c, q, code, to)
	}
	msgs := ts.all(t)
	last := msgs[len(msgs)-1]
	if last.Direction != store.DirOut || last.Type != "oops" {
		t.Errorf("last stored message %+v, want the outbound OOPS", last)
	}
}
