package payments_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/envelopd/envelopd/internal/evmfake"
	"github.com/envelopd/envelopd/mailin"
	"github.com/envelopd/envelopd/payments"
	"github.com/envelopd/envelopd/payments/rail"
	"github.com/envelopd/envelopd/store"
)

// TestRunnerEVMRail: PAY mails through the pipeline, checked by the real
// EVM rail against a JSON-RPC node (in-process, canned answers of a USDC
// transfer on Base): the exact payment is verified with the chain's
// facts, an underpaying one is a mismatch, and while the node is down a
// check stays pending with the rail's error and is verified once it is
// back.
func TestRunnerEVMRail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := evmfake.Start(t, "usdc-transfer.json")
	const ours = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"
	const tx = "0x2e8fb1fc86185752427960708abce56e55c7511c82adcf4dd9dbfe30ccffdd34"
	cfg, err := rail.ParseConfig([]string{"base=" + node.URL}, nil, []string{"base=" + ours}, nil, []string{"base=3"}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	set, err := rail.Open(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := set.Rail("base")
	st, err := store.OpenSQLite(ctx, filepath.Join(t.TempDir(), "envelopd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Now()
	run := payments.New(st, payments.Config{Rails: map[string]rail.Rail{"base": r}, Wallets: map[string][]string{"base": set.Wallets("base")},
		Now: func() time.Time { return now }})
	p := &mailin.Pipeline{Store: st, PaymentChains: run.Serves, Now: func() time.Time { return now }}
	pay := func(n int, mailbox, amount string) int64 {
		raw := fmt.Sprintf("From: payer@x.test\r\nTo: shop@y.test\r\nSubject: PAY | x\r\nMessage-ID: <evm%d@x.test>\r\n\r\n"+
			`{"v":"0.2.0","type":"pay","id":"pay_%d","amount":%q,"token":"USDC","chain":"base","proof":{"tx":%q}}`+"\r\n", n, n, amount, tx)
		out, err := p.Ingest(ctx, []byte(raw), mailin.Meta{Source: "smtp", Mailbox: mailbox})
		if err != nil || out.Status != store.StatusAccepted {
			t.Fatalf("PAY %d: %+v %v", n, out, err)
		}
		return out.ID
	}
	state := func(id int64) *store.Payment {
		t.Helper()
		pm, err := st.GetPayment(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return pm
	}
	// The node is down: pending, the rail's error kept, nothing lost.
	node.SetDown(true)
	exact := pay(1, "a@y.test", "30000000")
	if _, err := run.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if pm := state(exact); pm.State != store.PaymentPending || pm.Reason == "" || pm.Attempts != 1 {
		t.Fatalf("node down: %+v", pm)
	}
	// Back up, after the backoff: verified, with what the chain showed.
	node.SetDown(false)
	now = now.Add(time.Minute)
	under := pay(2, "b@y.test", "30000001") // the same transaction in another mailbox (relay mode)
	if _, err := run.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	pm := state(exact)
	if pm.State != store.PaymentVerified || pm.Paid != "30000000" || pm.To != "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed" ||
		pm.From != "0xfb6916095ca1df60bb79ce92ce3ea74c37c5d359" || pm.Block != 20000000 || pm.Confirmations != 3 ||
		pm.Token != "0x833589fcd6edb6e08f4c7c32d4f71b54bda02913" || pm.Reason != "" {
		t.Errorf("verified payment %+v", pm)
	}
	if pm := state(under); pm.State != store.PaymentMismatch || pm.Reason != "underpaid: 30 USDC paid, 30.000001 wanted" {
		t.Errorf("underpaid payment %+v", pm)
	}
}
