package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/envelopd/envelopd/internal/evmfake"
	"github.com/envelopd/envelopd/mailin"
	"github.com/envelopd/envelopd/store"
)

// TestServePayments: serve with a rail checks a received PAY on the
// chain after the 250 and settles it verified (a payment.verified event);
// a replay of the same transaction written differently is
// duplicate_proof, its payment duplicate; `payments --json` lists both.
func TestServePayments(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "envelopd.db")
	node := evmfake.Start(t, "usdc-transfer.json")
	addr := startServe(t, db, "--rail", "base="+node.URL, "--wallet", "base=0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
		"--confirmations", "base=3")
	for i, proof := range []string{`{"tx":"0x2e8fb1fc86185752427960708abce56e55c7511c82adcf4dd9dbfe30ccffdd34"}`,
		`" 0x2E8FB1FC86185752427960708ABCE56E55C7511C82ADCF4DD9DBFE30CCFFDD34"`} {
		smtpSend(t, addr, "payer@x.test", "shop@y.test", []byte(fmt.Sprintf("From: payer@x.test\r\nTo: shop@y.test\r\n"+
			"Subject: PAY | 30 USDC\r\nMessage-ID: <sp%d@x.test>\r\n\r\n"+
			`{"v":"0.2.0","type":"pay","id":"pay_%d","amount":"30000000","token":"USDC","chain":"base","proof":%s}`+"\r\n", i, i, proof)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := store.OpenSQLite(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var after int64
	for {
		top, err := st.LastEventID(ctx) // before the query: no payment event up to it is missed
		if err != nil {
			t.Fatal(err)
		}
		evs, err := st.Events(ctx, store.EventFilter{After: after, Types: []string{store.EventPaymentVerified, store.EventPaymentRejected}})
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) > 0 {
			if evs[0].Type != store.EventPaymentVerified {
				t.Fatalf("event %+v, want payment.verified", evs[0])
			}
			break
		}
		after = top
		if err := st.WaitEvents(ctx, after); err != nil {
			t.Fatalf("no payment event: %v", err)
		}
	}
	out, _ := cli(t, "payments", "--json", "--db", db)
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var p store.Payment
		if err := json.Unmarshal([]byte(l), &p); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		got = append(got, p.State+" "+p.Paid)
	}
	if strings.Join(got, ",") != "verified 30000000,duplicate " {
		t.Errorf("payments %q", got)
	}
}

// TestPaymentsCheckNow: `payments check ID` with rail flags checks a
// stored payment at once (an unverified one from before the rail was
// configured here), prints it, and refuses a chain it has no rail for.
func TestPaymentsCheckNow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "envelopd.db")
	st, err := store.OpenSQLite(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	p := &mailin.Pipeline{Store: st}
	var ids []int64
	for i, chain := range []string{"base", "ethereum"} {
		raw := fmt.Sprintf("From: payer@x.test\r\nTo: shop@y.test\r\nSubject: PAY | x\r\nMessage-ID: <cn%d@x.test>\r\n\r\n"+
			`{"v":"0.2.0","type":"pay","id":"pay_%d","amount":"30000000","token":"USDC","chain":%q,"proof":{"tx":"0x2e8fb1fc86185752427960708abce56e55c7511c82adcf4dd9dbfe30ccffdd34"}}`+"\r\n", i, i, chain)
		out, err := p.Ingest(ctx, []byte(raw), mailin.Meta{Source: "smtp"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, out.ID)
	}
	st.Close()
	node := evmfake.Start(t, "usdc-transfer.json")
	railArgs := []string{"--rail", "base=" + node.URL, "--wallet", "base=0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed", "--confirmations", "base=3"}
	code, out, errs := runCmd(t, "", append([]string{"payments", "check", fmt.Sprint(ids[0]), "--db", db, "--json"}, railArgs...)...)
	var got store.Payment
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil || got.State != store.PaymentVerified || got.Paid != "30000000" {
		t.Errorf("check with a rail: exit %d, %s %s", code, out, errs)
	}
	if code, _, errs := runCmd(t, "", append([]string{"payments", "check", fmt.Sprint(ids[1]), "--db", db}, railArgs...)...); code != 1 || !strings.Contains(errs, "no rail") {
		t.Errorf("check on a chain without a rail: exit %d %s, want 1", code, errs)
	}
}
