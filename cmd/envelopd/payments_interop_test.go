package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math/big"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/envelopd/envelopd/internal/gethtest"
	"github.com/envelopd/envelopd/store"
)

// TestInteropPayments: serve checks received PAY mails against a real
// geth --dev, after the 250: an exact token payment and a native one are
// verified, a payment to someone else, an underpaid one and one in
// another token contract of the same symbol are mismatch, a reverted one
// failed, a made-up hash not_found after the deadline; the same
// transaction written differently is duplicate_proof; a payment arriving
// while the node is down stays pending (the rail's error kept) and is
// verified once the node is back.
func TestInteropPayments(t *testing.T) {
	n := gethtest.Start(t)
	token := n.DeployToken()
	lookalike := n.DeployToken()
	ours, stranger := gethtest.NewAddress(), gethtest.NewAddress()
	five := big.NewInt(5_000_000)
	exact := n.TransferToken(token, ours, five)
	late := n.TransferToken(token, ours, five)
	cases := []struct {
		name, tx, token, amount, want string
	}{
		{"exact", exact, "TUSD", "5000000", store.PaymentVerified},
		{"replay, upper case", strings.ToUpper(exact), "TUSD", "5000000", store.PaymentDuplicate},
		{"wrong recipient", n.TransferToken(token, stranger, five), "TUSD", "5000000", store.PaymentMismatch},
		{"underpaid", n.TransferToken(token, ours, big.NewInt(4_999_999)), "TUSD", "5000000", store.PaymentMismatch},
		{"wrong token contract", n.TransferToken(lookalike, ours, five), "TUSD", "5000000", store.PaymentMismatch},
		{"native", n.SendNative(ours, big.NewInt(1_000_000_000_000_000)), "ETH", "1000000000000000", store.PaymentVerified},
		{"reverted", n.SendReverting(token, ours), "TUSD", "5000000", store.PaymentFailed},
		{"missing", randomHash(), "TUSD", "5000000", store.PaymentNotFound},
	}
	db := filepath.Join(t.TempDir(), "envelopd.db")
	addr := startServe(t, db, append(n.RailFlags("devchain", token, ours), "--payment-deadline", "3s")...)
	ids := map[string]int64{}
	send := func(i int, name, tx, tok, amount string) {
		t.Helper()
		smtpSend(t, addr, "payer@x.test", "shop@y.test", []byte(fmt.Sprintf("From: payer@x.test\r\nTo: shop@y.test\r\n"+
			"Subject: PAY | %s\r\nMessage-ID: <geth%d@x.test>\r\n\r\n"+
			`{"v":"0.2.0","type":"pay","id":"pay_%d","amount":%q,"token":%q,"chain":"devchain","proof":{"tx":%q}}`+"\r\n",
			name, i, i, amount, tok, tx)))
	}
	for i, c := range cases {
		send(i, c.name, c.tx, c.token, c.amount)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, msgs := storedPays(t, ctx, db, len(cases))
	for i, m := range msgs {
		ids[cases[i].name] = m.ID
	}
	// Every case but the duplicate settles with an event.
	waitSettled(t, ctx, st, len(cases)-1)
	for _, c := range cases {
		p, err := st.GetPayment(ctx, ids[c.name])
		if err != nil {
			t.Fatal(err)
		}
		if p.State != c.want {
			t.Errorf("%s: payment %s (%s), want %s", c.name, p.State, p.Reason, c.want)
		}
		if c.want == store.PaymentVerified && (p.From != n.Dev || p.To != ours || p.Confirmations < 1 || p.CheckedAt == nil) {
			t.Errorf("%s: verified payment %+v", c.name, p)
		}
	}

	// The node goes down: a new PAY is stored (250) and stays pending
	// with the rail's error; back up, it is verified.
	n.Stop()
	send(len(cases), "while down", late, "TUSD", "5000000")
	down, err := st.Messages(ctx, store.Filter{Type: "pay", AfterID: msgs[len(msgs)-1].ID})
	if err != nil || len(down) != 1 {
		t.Fatalf("PAY while down: %d %v", len(down), err)
	}
	waitRailFailed(t, ctx, st, down[0].ID)
	n.Restart()
	waitSettled(t, ctx, st, len(cases))
	if p, err := st.GetPayment(ctx, down[0].ID); err != nil || p.State != store.PaymentVerified {
		t.Errorf("after the node is back: %+v %v, want verified", p, err)
	}
}

// storedPays opens the database serve writes (closed when t ends) and
// returns its PAY mails, which must be n.
func storedPays(t *testing.T, ctx context.Context, db string, n int) (*store.SQLite, []store.Message) {
	t.Helper()
	st, err := store.OpenSQLite(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	msgs, err := st.Messages(ctx, store.Filter{Type: "pay"})
	if err != nil || len(msgs) != n {
		t.Fatalf("stored %d PAY mails (%v), want %d", len(msgs), err, n)
	}
	return st, msgs
}

// waitRailFailed waits until payment id is pending after a failed rail
// call. A pending retry writes no event: the row is polled.
func waitRailFailed(t *testing.T, ctx context.Context, st *store.SQLite, id int64) {
	t.Helper()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		p, err := st.GetPayment(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if p.State != store.PaymentPending {
			t.Fatalf("while the node is down: %s (%s), want pending", p.State, p.Reason)
		}
		if strings.HasPrefix(p.Reason, "the rail failed") {
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("no failed check while the node is down: %+v", p)
		}
	}
}

// waitSettled waits until the event log holds n payment events.
func waitSettled(t *testing.T, ctx context.Context, st *store.SQLite, n int) {
	t.Helper()
	for {
		top, err := st.LastEventID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		evs, err := st.Events(ctx, store.EventFilter{Types: []string{store.EventPaymentVerified, store.EventPaymentRejected}, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) >= n {
			return
		}
		if err := st.WaitEvents(ctx, top); err != nil {
			t.Fatalf("%d of %d payments settled: %v", len(evs), n, err)
		}
	}
}

func randomHash() string {
	b := make([]byte, 32)
	rand.Read(b)
	return "0x" + hex.EncodeToString(b)
}

// TestInteropPaymentsKill: a payment pending because the node is down
// survives serve killed with SIGKILL: the serve started again on the same
// database verifies it once the node is back (durable rows, leased
// claims).
func TestInteropPaymentsKill(t *testing.T) {
	n := gethtest.Start(t)
	token := n.DeployToken()
	ours := gethtest.NewAddress()
	tx := n.TransferToken(token, ours, big.NewInt(5_000_000))
	bin := filepath.Join(t.TempDir(), "envelopd")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	db := filepath.Join(t.TempDir(), "envelopd.db")
	flags := n.RailFlags("devchain", token, ours)
	n.Stop()
	first := startPGNode(t, bin, db, flags...)
	smtpSend(t, first.addr, "payer@x.test", "shop@y.test", []byte("From: payer@x.test\r\nTo: shop@y.test\r\n"+
		"Subject: PAY | 5 TUSD\r\nMessage-ID: <kill@x.test>\r\n\r\n"+
		`{"v":"0.2.0","type":"pay","id":"pay_kill","amount":"5000000","token":"TUSD","chain":"devchain","proof":{"tx":"`+tx+`"}}`+"\r\n"))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	st, msgs := storedPays(t, ctx, db, 1)
	id := msgs[0].ID
	waitRailFailed(t, ctx, st, id)
	first.kill()
	n.Restart()
	second := startPGNode(t, bin, db, flags...)
	waitSettled(t, ctx, st, 1)
	if p, err := st.GetPayment(ctx, id); err != nil || p.State != store.PaymentVerified {
		t.Errorf("after kill -9 and restart: %+v %v, want verified\n%s", p, err, second.logs())
	}
}
