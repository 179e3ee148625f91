package mailin

import (
	"bytes"
	"context"
	"crypto"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/envelopd/envelopd/dkim"
	"github.com/envelopd/envelopd/mailout"
	"github.com/envelopd/envelopd/message"
	"github.com/envelopd/envelopd/parse"
	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/store"
)

const oopsData = "../testdata/mailin-oops/"

// oopsRecorder wraps mailout.ComposeOOPSFor (what serve uses, unsigned)
// and remembers the code of every OOPS composed.
type oopsRecorder struct {
	mu    sync.Mutex
	codes []protocols.Code
}

func (o *oopsRecorder) compose(r *parse.Result, p protocols.Problem, from string) ([]byte, error) {
	o.mu.Lock()
	o.codes = append(o.codes, p.Code)
	o.mu.Unlock()
	return mailout.ComposeOOPSFor(r, p, from)
}

func (o *oopsRecorder) take() []protocols.Code {
	o.mu.Lock()
	defer o.mu.Unlock()
	c := o.codes
	o.codes = nil
	return c
}

// senderDomains are the From domains of the fixtures the OOPS tests sign.
var senderDomains = []string{"buyer.test", "signed.test", "desk.test", "traders.test", "example.test", "peer.test", "payer.test"}

// dkimKit is a DKIM key published (selector "t") for senderDomains in a
// static resolver, so that tests can make a sender verified by signing.
type dkimKit struct {
	key crypto.Signer
	res *dkim.StaticResolver
	v   *dkim.Verifier
}

func newDKIMKit(t *testing.T) *dkimKit {
	t.Helper()
	k, err := dkim.GenerateKey("ed25519")
	if err != nil {
		t.Fatal(err)
	}
	res := dkim.NewStaticResolver()
	for _, d := range senderDomains {
		line, err := dkim.TXTRecord(d, "t", k.Public())
		if err != nil {
			t.Fatal(err)
		}
		name, txt, _ := strings.Cut(line, " ")
		res.Add(name, txt)
	}
	return &dkimKit{key: k, res: res, v: &dkim.Verifier{Resolver: res}}
}

// sign returns raw with CRLF line ends, DKIM-signed for domain d.
func (k *dkimKit) sign(t *testing.T, raw []byte, d string) []byte {
	t.Helper()
	raw = bytes.ReplaceAll(bytes.ReplaceAll(raw, []byte("\r\n"), []byte("\n")), []byte("\n"), []byte("\r\n"))
	out, err := dkim.Sign(raw, dkim.Signer{Domain: d, Selector: "t", Key: k.key})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// oopsServer is an SMTP test server whose pipeline sends courtesy OOPS
// from server.test (the domain of the test RCPT) and verifies DKIM with
// the kit's keys, so that mail signed by kit.sign has a verified sender.
func oopsServer(t *testing.T) (*testServer, *oopsRecorder, *dkimKit) {
	t.Helper()
	rec := &oopsRecorder{}
	kit := newDKIMKit(t)
	ts := startServer(t, SMTPConfig{}, func(p *Pipeline) {
		p.OOPS = rec.compose
		p.Verifier = kit.v
		p.OOPSDomains = []string{"server.test"}
	})
	return ts, rec, kit
}

// deliverSigned sends a testdata file signed for the domain of its From.
func (ts *testServer) deliverSigned(t *testing.T, kit *dkimKit, path string) {
	t.Helper()
	raw := readEML(t, path)
	from, err := headerFrom(bytes.ReplaceAll(raw, []byte("\n"), []byte("\r\n")))
	if err != nil {
		t.Fatal(err)
	}
	code, text, err := send(t, ts.addr, from, []string{"rcpt@server.test"}, kit.sign(t, raw, domainOf(from)))
	if err != nil || code != 250 {
		t.Fatalf("%s: got %d %q %v, want 250", path, code, text, err)
	}
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

// TestCourtesyOOPSLoopSafety: an unknown type from a verified sender is
// owed an OOPS, except when the mail is automated (RFC 3834
// Auto-Submitted other than "no", RFC 2369 List-*, Precedence
// bulk/list/junk, RFC 6522 multipart/report): then the stored record says
// so. Every case goes through SMTP, DKIM, the pipeline and the store.
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
			ts, rec, kit := oopsServer(t)
			ts.deliverSigned(t, kit, oopsData+tc.file+".eml")
			msgs := ts.all(t)
			if len(msgs) == 0 || !strings.Contains(codes(msgs[0].Errors), string(protocols.CodeUnknownType)) {
				t.Fatalf("stored %+v, want the mail with unknown_type", msgs)
			}
			codes, queued := rec.take(), ts.queuedOOPS(t)
			if !tc.oops {
				if len(codes) != 0 || len(queued) != 0 || len(msgs) != 1 {
					t.Errorf("automated mail got an OOPS: composed %v, queued to %v, %d messages stored", codes, queued, len(msgs))
				}
				if d := msgs[0].OOPS; d == nil || d.Sent || d.Reason != store.OOPSAutomated {
					t.Errorf("stored OOPS decision %+v, want suppressed as %s", d, store.OOPSAutomated)
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

// TestCourtesyOOPSCodes: dkim_failed (a mail with a failing signature
// besides a passing aligned one), amount_mismatch (an ACCEPT short of its
// OFFER) and missing_field each queue one OOPS to the verified sender
// through the real ingest path; the intact signed mail and the OFFER get
// none.
func TestCourtesyOOPSCodes(t *testing.T) {
	t.Run("dkim_failed", func(t *testing.T) {
		ts, rec, kit := oopsServer(t)
		raw := readEML(t, oopsData+"signed-which.eml")
		signed := kit.sign(t, raw, "signed.test")
		if code, text, err := send(t, ts.addr, "alice@signed.test", []string{"bob@worker.test"}, signed); code != 250 {
			t.Fatalf("intact: %d %s %v", code, text, err)
		}
		if c, q := rec.take(), ts.queuedOOPS(t); len(c) != 0 || len(q) != 0 {
			t.Fatalf("intact signed mail got an OOPS: %v %v", c, q)
		}
		// A second signature by a key the DNS does not hold fails.
		other, err := dkim.GenerateKey("ed25519")
		if err != nil {
			t.Fatal(err)
		}
		raw = bytes.Replace(raw, []byte("<signed-which@"), []byte("<signed-which-2@"), 1)
		twice, err := dkim.Sign(kit.sign(t, raw, "signed.test"), dkim.Signer{Domain: "signed.test", Selector: "t", Key: other})
		if err != nil {
			t.Fatal(err)
		}
		if code, text, err := send(t, ts.addr, "alice@signed.test", []string{"bob@worker.test"}, twice); code != 250 {
			t.Fatalf("failing signature: %d %s %v", code, text, err)
		}
		wantOOPS(t, ts, rec, protocols.CodeDKIMFailed, "alice@signed.test")
	})
	t.Run("amount_mismatch", func(t *testing.T) {
		ts, rec, kit := oopsServer(t)
		ts.deliverSigned(t, kit, "../testdata/flows/exchange/01-offer.eml")
		if c, q := rec.take(), ts.queuedOOPS(t); len(c) != 0 || len(q) != 0 {
			t.Fatalf("OFFER got an OOPS: %v %v", c, q)
		}
		ts.deliverSigned(t, kit, "../testdata/flows/exchange/02-accept-short.eml")
		wantOOPS(t, ts, rec, protocols.CodeAmountMismatch, "dave@desk.test")
	})
	t.Run("missing_field", func(t *testing.T) {
		ts, rec, kit := oopsServer(t)
		ts.deliverSigned(t, kit, oopsData+"missing-field.eml")
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
	// One truth: the answered message's oops is the body of the OOPS sent.
	orig := msgs[len(msgs)-2]
	var sent struct {
		Body json.RawMessage `json:"body"`
	}
	if err := json.Unmarshal(last.Result, &sent); err != nil {
		t.Fatal(err)
	}
	v, err := message.View(&orig)
	if err != nil {
		t.Fatal(err)
	}
	var view struct {
		OOPS     json.RawMessage   `json:"oops"`
		Decision *store.OOPSRecord `json:"oops_decision"`
	}
	if err := json.Unmarshal(v, &view); err != nil {
		t.Fatal(err)
	}
	if orig.OOPS == nil || !orig.OOPS.Sent || orig.OOPS.Code != code || string(view.OOPS) != string(sent.Body) ||
		view.Decision == nil || view.Decision.MessageID != last.MessageID {
		t.Errorf("stored decision %+v, view oops %s; want the sent OOPS %s (%s)", orig.OOPS, view.OOPS, sent.Body, last.MessageID)
	}
	// One composer: the parser's preview of a stateless error is the sent
	// body but for the id each sent message gets.
	if code == protocols.CodeAmountMismatch {
		return // stateful: the parser cannot know it
	}
	var preview struct {
		OOPS map[string]any `json:"oops"`
	}
	var body map[string]any
	if err := json.Unmarshal(orig.Result, &preview); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(sent.Body, &body); err != nil {
		t.Fatal(err)
	}
	delete(body, "id")
	if p, _ := json.Marshal(preview.OOPS); string(p) != mustJSON(t, body) {
		t.Errorf("preview %s differs from the sent OOPS %s (id aside)", p, mustJSON(t, body))
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
