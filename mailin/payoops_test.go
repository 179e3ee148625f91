package mailin

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/store"
)

// TestPaymentOOPS: a payment rejected after its mail was stored gets the
// courtesy OOPS by the ingest's rules — sent (tx_not_found) to an
// authenticated sender, once; suppressed for an unauthenticated one; none
// for a payment that is not rejected.
func TestPaymentOOPS(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, filepath.Join(t.TempDir(), "envelopd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	rec := &oopsRecorder{}
	p := &Pipeline{Store: st, OOPS: rec.compose, OOPSDomains: []string{"server.test"},
		PaymentChains: func(string) bool { return true }}
	ingest := func(n int, from, user string) int64 {
		raw := fmt.Sprintf("From: %s\r\nTo: shop@server.test\r\nSubject: PAY | x\r\nMessage-ID: <po%d@buyer.test>\r\n\r\n"+
			`{"v":"0.2.0","type":"pay","id":"pay_%d","amount":"5","token":"USDC","chain":"base","proof":"0x%064x"}`+"\r\n", from, n, n, n)
		out, err := p.Ingest(ctx, []byte(raw), Meta{Source: "smtp", MailFrom: from, Rcpts: []string{"shop@server.test"}, User: user})
		if err != nil || out.Status != store.StatusAccepted {
			t.Fatalf("ingest %d: %+v %v", n, out, err)
		}
		return out.ID
	}
	alice := ingest(1, "alice@buyer.test", "alice@buyer.test")
	mallory := ingest(2, "mallory@buyer.test", "")
	paid := ingest(3, "carol@buyer.test", "carol@buyer.test")
	if _, err := st.ClaimPayments(ctx, time.Now().Add(time.Minute), time.Minute, 10, nil); err != nil {
		t.Fatal(err)
	}
	for id, state := range map[int64]string{alice: store.PaymentNotFound, mallory: store.PaymentNotFound, paid: store.PaymentVerified} {
		if err := st.SettlePayment(ctx, id, store.Settlement{State: state, Reason: "gone"}); err != nil {
			t.Fatal(err)
		}
	}
	oops := func(id int64) *store.OOPSRecord {
		t.Helper()
		pay, err := st.GetPayment(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		r, err := p.PaymentOOPS(ctx, st, *pay)
		if err != nil {
			t.Fatal(err)
		}
		if r != nil && r.Pending {
			// Owed: the owed-OOPS worker (serve's, woken by the commit)
			// queues it and records it on the message.
			if _, err := (&OOPSWorker{Pipeline: p, Store: st}).RunOnce(ctx); err != nil {
				t.Fatal(err)
			}
			m, err := st.Message(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			r = m.OOPS
		}
		return r
	}
	if r := oops(alice); r == nil || !r.Sent || r.Code != protocols.CodeTxNotFound || r.QueueID == 0 || r.To != "alice@buyer.test" {
		t.Errorf("authenticated sender: %+v, want an OOPS sent", r)
	}
	if r := oops(alice); r != nil {
		t.Errorf("asked again: %+v, want no second decision", r)
	}
	if r := oops(mallory); r == nil || r.Sent || r.Reason != store.OOPSSenderUnverified {
		t.Errorf("unauthenticated sender: %+v, want suppressed", r)
	}
	if m, err := st.Message(ctx, mallory); err != nil || !m.Warnings.Has(protocols.CodeOOPSSuppressed) || m.OOPS == nil {
		t.Errorf("unauthenticated sender's message: %+v %v", m, err)
	}
	if r := oops(paid); r != nil {
		t.Errorf("verified payment: %+v, want no OOPS", r)
	}
	if c := rec.take(); len(c) != 1 || c[0] != protocols.CodeTxNotFound {
		t.Errorf("composed %v, want one tx_not_found", c)
	}
	q, err := st.Queue(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range q {
		if e.Kind == "oops" && len(e.Recipients) == 1 && e.Recipients[0].Rcpt == "alice@buyer.test" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d OOPS queued to alice, want 1 (queue %+v)", n, q)
	}
}
