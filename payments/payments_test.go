package payments_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/envelopd/envelopd/mailin"
	"github.com/envelopd/envelopd/message"
	"github.com/envelopd/envelopd/payments"
	"github.com/envelopd/envelopd/payments/rail"
	"github.com/envelopd/envelopd/store"
)

const (
	ourWallet = "0x00000000000000000000000000000000000000aa"
	invWallet = "0x00000000000000000000000000000000000000bb"
)

// fakeRail answers from a table by transaction and records the calls.
type fakeRail struct {
	mu      sync.Mutex
	results map[string]rail.Result
	errs    map[string]error
	calls   []rail.Want
}

func (f *fakeRail) Chain() string { return "base" }

func (f *fakeRail) Check(_ context.Context, w rail.Want) (rail.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, w)
	if err := f.errs[w.Tx]; err != nil {
		return rail.Result{}, err
	}
	r, ok := f.results[w.Tx]
	if !ok {
		return rail.Result{State: rail.Pending, Chain: w.Chain, Tx: w.Tx}, nil
	}
	r.Chain, r.Tx = w.Chain, w.Tx
	return r, nil
}

func (f *fakeRail) callsFor(tx string) []rail.Want {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []rail.Want
	for _, c := range f.calls {
		if c.Tx == tx {
			out = append(out, c)
		}
	}
	return out
}

func tx(n int) string { return fmt.Sprintf("0x%064x", n) }

type env struct {
	t    *testing.T
	st   *store.SQLite
	p    *mailin.Pipeline
	rail *fakeRail
	now  time.Time
	r    *payments.Runner
	n    int
}

func newEnv(t *testing.T, cfg payments.Config) *env {
	t.Helper()
	st, err := store.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "envelopd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := &env{t: t, st: st, rail: &fakeRail{results: map[string]rail.Result{}, errs: map[string]error{}},
		now: time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)}
	cfg.Rails = map[string]rail.Rail{"base": e.rail}
	if cfg.Wallets == nil {
		cfg.Wallets = map[string][]string{"base": {ourWallet}}
	}
	cfg.Now = func() time.Time { return e.now }
	e.r = payments.New(st, cfg)
	e.p = &mailin.Pipeline{Store: st, PaymentChains: e.r.Serves, Now: cfg.Now, Handoff: []string{"exec"}, HandoffVerified: true}
	return e
}

// mail ingests an Envelopay mail from `from` with body fields json.
func (e *env) mail(from, typ, fields string, dir string) store.Outcome {
	e.t.Helper()
	e.n++
	subj := strings.ToUpper(typ)
	raw := fmt.Sprintf("From: %s\r\nTo: agent@here.test\r\nSubject: %s | test\r\nMessage-ID: <m%d@test>\r\nContent-Type: text/plain\r\n\r\n"+
		`{"v":"0.2.0","type":%q,"id":"%s_%d",%s}`+"\r\n", from, subj, e.n, typ, typ, e.n, fields)
	if dir == store.DirOut {
		raw = fmt.Sprintf("From: agent@here.test\r\nTo: %s\r\nSubject: %s | test\r\nMessage-ID: <m%d@test>\r\nContent-Type: text/plain\r\n\r\n"+
			`{"v":"0.2.0","type":%q,%s}`+"\r\n", from, subj, e.n, typ, fields)
		a := message.Analyze(context.Background(), []byte(raw), message.AnalyzeOptions{Now: e.now})
		in := message.Incoming(a, []byte(raw), store.DirOut)
		in.ReceivedAt = e.now
		out, err := e.st.Ingest(context.Background(), in)
		if err != nil {
			e.t.Fatal(err)
		}
		return out
	}
	out, err := e.p.Ingest(context.Background(), []byte(raw), mailin.Meta{Source: "smtp"})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

func (e *env) pay(from string, n int, extra string) int64 {
	e.t.Helper()
	out := e.mail(from, "pay", fmt.Sprintf(`"amount":"1000","token":"USDC","chain":"base","proof":{"tx":%q}%s`, tx(n), extra), store.DirIn)
	if out.Status != store.StatusAccepted {
		e.t.Fatalf("PAY %d: %s %v", n, out.Status, out.Errors)
	}
	return out.ID
}

func (e *env) run() {
	e.t.Helper()
	if _, err := e.r.RunOnce(context.Background()); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) payment(id int64) *store.Payment {
	e.t.Helper()
	p, err := e.st.GetPayment(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

// TestRunnerStates: each rail answer ends in its state, with the
// reason and the chain's facts, and only a final one writes its event
// and releases (or drops) the held hand-off.
func TestRunnerStates(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	rejected := map[int64]string{}
	e := newEnv(t, payments.Config{Deadline: time.Hour, OnRejected: func(_ context.Context, p store.Payment) {
		mu.Lock()
		rejected[p.ID] = p.State
		mu.Unlock()
	}})
	e.rail.results[tx(1)] = rail.Result{State: rail.Verified, Paid: "1000", To: ourWallet, From: "0xpayer", Block: 7, Confirmations: 3, Token: "0xusdc"}
	e.rail.results[tx(2)] = rail.Result{State: rail.Mismatch, Reason: "paid 0x01, not ours", Paid: "1000"}
	e.rail.results[tx(3)] = rail.Result{State: rail.Failed, Reason: "reverted"}
	e.rail.errs[tx(5)] = errors.New("connection refused")
	e.rail.results[tx(6)] = rail.Result{State: rail.Pending, Block: 9, Confirmations: 1, Reason: "1 of 3 confirmations"}
	ids := []int64{e.pay("a@x.test", 1, ""), e.pay("b@x.test", 2, ""), e.pay("c@x.test", 3, ""), e.pay("d@x.test", 4, ""),
		e.pay("e@x.test", 5, ""), e.pay("f@x.test", 6, "")}
	short := e.mail("g@x.test", "pay", `"amount":"1","token":"USDC","chain":"base","proof":{"tx":"0xabcdef0123"}`, store.DirIn).ID
	e.run()
	want := []struct{ state, reason string }{
		{"verified", ""}, {"mismatch", "paid 0x01, not ours"}, {"failed", "reverted"}, {"pending", "not on the chain yet"},
		{"pending", "the rail failed: connection refused"}, {"pending", "1 of 3 confirmations"},
	}
	for i, id := range ids {
		p := e.payment(id)
		if p.State != want[i].state || p.Reason != want[i].reason || p.CheckedAt == nil {
			t.Errorf("payment %d: %s %q, want %s %q", i+1, p.State, p.Reason, want[i].state, want[i].reason)
		}
	}
	if p := e.payment(ids[0]); p.Paid != "1000" || p.To != ourWallet || p.From != "0xpayer" || p.Block != 7 || p.Confirmations != 3 || p.Token != "0xusdc" {
		t.Errorf("verified payment %+v", p)
	}
	if p := e.payment(short); p.State != "not_found" || len(e.rail.callsFor("0xabcdef0123")) != 0 {
		t.Errorf("malformed hash: %s %q, %d rail calls; want not_found without a call", p.State, p.Reason, len(e.rail.callsFor("0xabcdef0123")))
	}
	if c := e.rail.callsFor(tx(1)); len(c) != 1 || !slices.Equal(c[0].To, []string{ourWallet}) || c[0].Amount != "1000" || c[0].Token != "USDC" {
		t.Errorf("want sent to the rail: %+v", c)
	}
	// Events: one per final state, none for pending.
	evs, err := e.st.Events(context.Background(), store.EventFilter{Types: []string{store.EventPaymentVerified, store.EventPaymentRejected}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range evs {
		got = append(got, fmt.Sprintf("%s %d %s", ev.Type, ev.MessageID, ev.Inbox))
	}
	wantEv := []string{fmt.Sprintf("payment.verified %d agent@here.test", ids[0]), fmt.Sprintf("payment.rejected %d agent@here.test", ids[1]),
		fmt.Sprintf("payment.rejected %d agent@here.test", ids[2]), fmt.Sprintf("payment.rejected %d agent@here.test", short)}
	slices.Sort(got)
	slices.Sort(wantEv)
	if !slices.Equal(got, wantEv) {
		t.Errorf("events %q, want %q", got, wantEv)
	}
	// OnRejected (serve: the courtesy OOPS) saw each rejection once.
	mu.Lock()
	if len(rejected) != 3 || rejected[ids[1]] != "mismatch" || rejected[ids[2]] != "failed" || rejected[short] != "not_found" {
		t.Errorf("OnRejected saw %v", rejected)
	}
	mu.Unlock()
	// Held hand-offs: the verified one is due, the rejected dropped.
	hs, err := e.st.Handoffs(context.Background(), store.HandoffFilter{State: "all"})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hs {
		switch h.Message.ID {
		case ids[0]:
			if h.State != "pending" || h.NextAttempt == nil || h.NextAttempt.After(e.now) {
				t.Errorf("verified hand-off %+v, want due now", h)
			}
		case ids[1], ids[2], short:
			if h.State != "dropped" {
				t.Errorf("rejected hand-off %+v, want dropped", h)
			}
		default:
			if h.State != "pending" || h.NextAttempt != nil || !h.Held {
				t.Errorf("pending payment's hand-off %+v, want held", h)
			}
		}
	}
	ds, err := e.st.ClaimDeliveries(context.Background(), "exec", e.now, time.Minute, 100)
	if err != nil || len(ds) != 1 || ds[0].MessageID != ids[0] {
		t.Errorf("claimable hand-offs %+v %v, want only the verified payment's", ds, err)
	}

	// Past the deadline a transaction never seen is not_found; one seen
	// but not deep enough stays pending; the failing rail keeps retrying.
	e.now = e.now.Add(2 * time.Hour)
	e.run()
	for i, w := range []string{"not_found", "pending", "pending"} {
		if p := e.payment(ids[3+i]); p.State != w {
			t.Errorf("after the deadline, payment %d: %s %q, want %s", 4+i, p.State, p.Reason, w)
		}
	}
}

// TestRunnerInvoice: a PAY answering our INVOICE must pay the INVOICE's
// amount, token and chain to its wallet, and come from its recipient.
func TestRunnerInvoice(t *testing.T) {
	t.Parallel()
	e := newEnv(t, payments.Config{Wallets: map[string][]string{}})
	e.rail.results[tx(1)] = rail.Result{State: rail.Verified}
	e.rail.results[tx(2)] = rail.Result{State: rail.Verified}
	e.mail("payer@x.test", "invoice", fmt.Sprintf(`"id":"inv_1","amount":"1000","token":"USDC","chain":"base","wallet":%q`, invWallet), store.DirOut)
	thread := `,"invoice_ref":"inv_1"`
	good := e.mail("payer@x.test", "pay", fmt.Sprintf(`"amount":"1000","token":"usdc","chain":"base","proof":{"tx":%q}%s`, tx(1), thread), store.DirIn)
	e.n++
	wrongSender := e.mail("mallory@x.test", "pay", fmt.Sprintf(`"amount":"1000","token":"USDC","chain":"base","proof":{"tx":%q}%s`, tx(2), thread), store.DirIn)
	under := e.mail("payer@x.test", "pay", fmt.Sprintf(`"amount":"999","token":"USDC","chain":"base","proof":{"tx":%q}%s`, tx(3), thread), store.DirIn)
	noWallet := e.mail("other@x.test", "pay", fmt.Sprintf(`"amount":"1","token":"USDC","chain":"base","proof":{"tx":%q}`, tx(4)), store.DirIn)
	e.run()
	for _, c := range []struct {
		id     int64
		state  string
		reason string
	}{
		{good.ID, "verified", ""},
		{wrongSender.ID, "mismatch", "the PAY comes from mallory@x.test, but our INVOICE inv_1 was sent to payer@x.test"},
		{under.ID, "mismatch", `the payment disagrees with our INVOICE inv_1: amount "999", not "1000"`},
		{noWallet.ID, "mismatch", "no receiving wallet of ours is known on base (--wallet, or one we published in a METHODS, INVOICE or OFFER of the thread)"},
	} {
		if p := e.payment(c.id); p.State != c.state || p.Reason != c.reason {
			t.Errorf("payment %d: %s %q, want %s %q", c.id, p.State, p.Reason, c.state, c.reason)
		}
	}
	if c := e.rail.callsFor(tx(1)); len(c) != 1 || !slices.Equal(c[0].To, []string{invWallet}) {
		t.Errorf("want sent to the rail: %+v, want the INVOICE's wallet", c)
	}
	if n := len(e.rail.callsFor(tx(2))) + len(e.rail.callsFor(tx(3))) + len(e.rail.callsFor(tx(4))); n != 0 {
		t.Errorf("%d rail calls for mismatches decided from the mail", n)
	}
}

// TestRunnerBudgets: one sender's flood of random hashes takes at most
// its budget of lookups a minute; the rest wait (released, not counted
// as attempts), another sender's check goes ahead; a transaction not on
// the chain is not asked again within the negative TTL.
func TestRunnerBudgets(t *testing.T) {
	t.Parallel()
	e := newEnv(t, payments.Config{PerSender: 3, Global: 100, Batch: 50, NegativeTTL: time.Minute})
	var flood []int64
	for i := range 10 {
		flood = append(flood, e.pay("flood@x.test", 100+i, ""))
	}
	other := e.pay("other@x.test", 1, "")
	e.run()
	if n := len(e.rail.calls); n != 4 {
		t.Errorf("%d rail calls, want 3 of the flood + 1 other", n)
	}
	if len(e.rail.callsFor(tx(1))) != 1 {
		t.Errorf("the other sender's check did not run")
	}
	waiting := 0
	for _, id := range flood {
		p := e.payment(id)
		if p.CheckedAt == nil {
			waiting++
			if p.Attempts != 0 || p.NextCheck == nil || !p.NextCheck.After(e.now) {
				t.Errorf("waiting payment %+v, want no attempt and a later check", p)
			}
		}
	}
	if waiting != 7 {
		t.Errorf("%d waiting, want 7", waiting)
	}
	// The same transaction in another mailbox (relay mode) within the
	// negative TTL: no second lookup.
	_ = other
	e.now = e.now.Add(30 * time.Second)
	if err := e.st.RecheckPayment(context.Background(), other, e.now); err != nil {
		t.Fatal(err)
	}
	e.run()
	if n := len(e.rail.callsFor(tx(1))); n != 1 {
		t.Errorf("%d lookups of a transaction known absent, want 1", n)
	}
}

// TestRunnerGlobalBudget: with the global budget spent, the runner claims
// nothing more this minute — the waiting payments stay as they are in the
// store (no claim and give-back churn) — and goes on the next minute.
func TestRunnerGlobalBudget(t *testing.T) {
	t.Parallel()
	e := newEnv(t, payments.Config{Global: 2, Batch: 10})
	var ids []int64
	for i := range 5 {
		ids = append(ids, e.pay(fmt.Sprintf("s%d@x.test", i), 200+i, ""))
	}
	e.run()
	e.run()
	if n := len(e.rail.calls); n != 2 {
		t.Errorf("%d rail calls, want 2 (the budget)", n)
	}
	untouched := 0
	for _, id := range ids {
		if p := e.payment(id); p.Attempts == 0 && p.CheckedAt == nil && p.NextCheck != nil && p.NextCheck.Equal(p.CreatedAt) {
			untouched++
		}
	}
	if untouched != 3 {
		t.Errorf("%d payments left as they were, want 3", untouched)
	}
	e.now = e.now.Add(time.Minute)
	e.run()
	if n := len(e.rail.calls); n != 4 {
		t.Errorf("%d rail calls after a minute, want 4", n)
	}
}

// TestRunnerRailDown: a node that does not answer backs its rail off as a
// whole — the payments waiting on it are not claimed again until the
// backoff ends, so a dead node costs one call per backoff — while an
// error about one transaction (a malformed answer) backs off only that
// payment.
func TestRunnerRailDown(t *testing.T) {
	t.Parallel()
	e := newEnv(t, payments.Config{MinBackoff: 5 * time.Second, MaxBackoff: time.Minute})
	var ids []int64
	for n := 1; n <= 4; n++ {
		ids = append(ids, e.pay(fmt.Sprintf("p%d@x.test", n), n, ""))
		e.rail.errs[tx(n)] = fmt.Errorf("%w: connection refused", rail.ErrUnreachable)
	}
	calls := func() int {
		e.rail.mu.Lock()
		defer e.rail.mu.Unlock()
		return len(e.rail.calls)
	}
	claim := func() int {
		t.Helper()
		n, err := e.r.RunOnce(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := claim(); n != 4 || calls() != 4 {
		t.Fatalf("first run: claimed %d, %d rail calls; want 4 and 4", n, calls())
	}
	// Every payment is due again after its own 5 s, and the rail is
	// backed off for 5 s: nothing is claimed before then.
	e.now = e.now.Add(4 * time.Second)
	if n := claim(); n != 0 || calls() != 4 {
		t.Fatalf("rail down: claimed %d, %d rail calls; want none", n, calls())
	}
	// Second failure in a row: 10 s.
	e.now = e.now.Add(time.Second)
	if n := claim(); n != 4 || calls() != 8 {
		t.Fatalf("after the backoff: claimed %d, %d rail calls; want 4 and 8", n, calls())
	}
	e.now = e.now.Add(9 * time.Second)
	if n := claim(); n != 0 {
		t.Fatalf("second backoff (10 s): claimed %d", n)
	}
	// The node answers again: every payment is checked at the next try
	// and the circuit closes.
	e.rail.mu.Lock()
	for n := 1; n <= 4; n++ {
		delete(e.rail.errs, tx(n))
		e.rail.results[tx(n)] = rail.Result{State: rail.Verified, Paid: "1000", To: ourWallet}
	}
	e.rail.mu.Unlock()
	e.now = e.now.Add(10 * time.Second)
	if n := claim(); n != 4 {
		t.Fatalf("node back: claimed %d, want 4", n)
	}
	for _, id := range ids {
		if p := e.payment(id); p.State != store.PaymentVerified {
			t.Errorf("payment %d: %s %q, want verified", id, p.State, p.Reason)
		}
	}
	// An error about one transaction leaves the rail up for the others.
	bad, good := e.pay("q@x.test", 10, ""), e.pay("r@x.test", 11, "")
	e.rail.mu.Lock()
	e.rail.errs[tx(10)] = fmt.Errorf("%w: not JSON", rail.ErrMalformed)
	e.rail.mu.Unlock()
	e.now = e.now.Add(time.Second)
	if n := claim(); n != 2 {
		t.Fatalf("claimed %d, want 2", n)
	}
	late := e.pay("s@x.test", 12, "")
	e.rail.mu.Lock()
	e.rail.results[tx(12)] = rail.Result{State: rail.Verified, Paid: "1000", To: ourWallet}
	e.rail.mu.Unlock()
	if n := claim(); n != 1 {
		t.Fatalf("after a malformed answer: claimed %d, want the new payment (the rail stays up)", n)
	}
	if p := e.payment(late); p.State != store.PaymentVerified {
		t.Errorf("payment after a malformed answer: %s %q", p.State, p.Reason)
	}
	if p := e.payment(bad); p.State != store.PaymentPending || !strings.Contains(p.Reason, "rail_malformed_response") {
		t.Errorf("malformed: %s %q", p.State, p.Reason)
	}
	if p := e.payment(good); p.State != store.PaymentPending || p.Reason != "not on the chain yet" {
		t.Errorf("the other payment of that batch: %s %q, want pending, not on the chain yet", p.State, p.Reason)
	}
}
