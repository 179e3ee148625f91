package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/envelopd/envelopd/mailin"
	"github.com/envelopd/envelopd/store"
)

// TestPaymentsCommand: `envelopd payments` lists the payments with their
// state (JSON lines with --json), filters by --state, and `payments check
// ID` makes one due now; an unknown id is exit 1, a bad state exit 2.
func TestPaymentsCommand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "envelopd.db")
	st, err := store.OpenSQLite(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	p := &mailin.Pipeline{Store: st, PaymentChains: func(c string) bool { return c == "base" }}
	var ids []int64
	for i, chain := range []string{"base", "ethereum"} {
		raw := "From: a@x.test\r\nTo: b@y.test\r\nSubject: PAY | x\r\nMessage-ID: <p" + strconv.Itoa(i) + "@x.test>\r\n\r\n" +
			`{"v":"0.2.0","type":"pay","id":"pay_` + strconv.Itoa(i) + `","amount":"5","token":"USDC","chain":"` + chain +
			`","proof":{"tx":"0x4a92e3e0ea4bcf085cc879b1b3a0e3ea341013ae803caf1f9443a1fac48c2bfd"}}` + "\r\n"
		out, err := p.Ingest(ctx, []byte(raw), mailin.Meta{Source: "smtp"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, out.ID)
	}
	st.Close()
	code, stdout, stderr := runCmd(t, "", "payments", "--db", db, "--json")
	if code != 0 {
		t.Fatalf("payments: %d %s", code, stderr)
	}
	var states []string
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var p store.Payment
		if err := json.Unmarshal([]byte(line), &p); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		states = append(states, p.State+" "+p.Chain+" "+p.Tx)
	}
	tx := "0x4a92e3e0ea4bcf085cc879b1b3a0e3ea341013ae803caf1f9443a1fac48c2bfd"
	if strings.Join(states, ",") != "pending base "+tx+",unverified ethereum "+tx {
		t.Errorf("payments %q", states)
	}
	if code, stdout, _ := runCmd(t, "", "payments", "--db", db, "--state", "unverified"); code != 0 || !strings.Contains(stdout, "ethereum") || strings.Contains(stdout, "base") {
		t.Errorf("--state unverified: %d %q", code, stdout)
	}
	if code, stdout, stderr := runCmd(t, "", "payments", "--db", db, "check", strconv.FormatInt(ids[1], 10)); code != 0 || !strings.Contains(stdout, "due now") {
		t.Errorf("check: %d %q %q", code, stdout, stderr)
	}
	if code, _, _ := runCmd(t, "", "payments", "--db", db, "check", "999999"); code != 1 {
		t.Errorf("check of an unknown id: exit %d, want 1", code)
	}
	if code, _, _ := runCmd(t, "", "payments", "--db", db, "--state", "paid"); code != 2 {
		t.Errorf("bad state: exit %d, want 2", code)
	}
	// inbox --json carries the payment object.
	code, stdout, _ = runCmd(t, "", "inbox", "--db", db, "--json")
	if code != 0 || !strings.Contains(stdout, `"payment":{"id":`) || !strings.Contains(stdout, `"state":"pending"`) {
		t.Errorf("inbox --json: %d %s", code, stdout)
	}
}

// TestWatchPayments: watch --payments prints a line when a payment
// settles, besides the messages.
func TestWatchPayments(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	db := filepath.Join(t.TempDir(), "envelopd.db")
	st, err := store.OpenSQLite(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p := &mailin.Pipeline{Store: st, PaymentChains: func(string) bool { return true }}
	ingest := func(n int) int64 {
		raw := "From: a@x.test\r\nTo: b@y.test\r\nSubject: PAY | x\r\nMessage-ID: <w" + strconv.Itoa(n) + "@x.test>\r\n\r\n" +
			`{"v":"0.2.0","type":"pay","id":"pay_` + strconv.Itoa(n) + `","amount":"5","token":"USDC","chain":"base","proof":"0x` +
			strings.Repeat(strconv.Itoa(n), 64) + `"}` + "\r\n"
		out, err := p.Ingest(ctx, []byte(raw), mailin.Meta{Source: "smtp"})
		if err != nil {
			t.Fatal(err)
		}
		return out.ID
	}
	first := ingest(1)
	out := &lineWriter{wrote: make(chan struct{}, 1)}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, &env{args: []string{"watch", "--db", db, "--payments", "--since", strconv.FormatInt(first, 10)},
			stdin: strings.NewReader(""), stdout: out, stderr: &strings.Builder{}})
	}()
	waitFor := func(what string) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for !strings.Contains(out.String(), what) {
			select {
			case <-out.wrote:
			case <-deadline:
				t.Fatalf("watch printed %q, want %s", out.String(), what)
			}
		}
	}
	second := ingest(2)
	waitFor(`"id":` + strconv.FormatInt(second, 10)) // watch runs: its payment cursor is set
	if _, err := st.ClaimPayments(ctx, time.Now(), time.Minute, 10, nil); err != nil {
		t.Fatal(err)
	}
	if err := st.SettlePayment(ctx, first, store.Settlement{State: store.PaymentVerified, Paid: "5"}); err != nil {
		t.Fatal(err)
	}
	waitFor(`"event":"payment.verified"`)
	cancel()
	<-done
	var line struct {
		Payment store.Payment `json:"payment"`
	}
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if strings.Contains(l, `"event":"payment.verified"`) {
			if err := json.Unmarshal([]byte(l), &line); err != nil || line.Payment.ID != first || line.Payment.State != "verified" {
				t.Errorf("payment line %s: %v", l, err)
			}
		}
	}
}
