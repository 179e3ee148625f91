// Package payments checks the payment proofs envelopd received on the
// chains they name (Envelopay v0.2.0, "Verification": "Payment proof per
// the rail's verification method (tx exists, amount matches, recipient
// matches)"), after the mail is committed, never inside the SMTP
// transaction.
//
// The store writes one payment row per received message with a proof in
// the message's ingest transaction (store.Payments); a Runner claims the
// due rows with a lease (once per proof across every node sharing the
// store; a crash or kill -9 retries after the lease), works out what the
// proof must show (Want: the mail's amount, token and chain — or our
// INVOICE's / OFFER's when the mail answers one — paid to one of our
// wallets), asks the chain's rail.Rail, and settles the row: verified,
// mismatch, failed, not_found after the deadline, or pending again with
// backoff. Hostile input is bounded by budgets: checks per sender and in
// all per minute, authenticated senders first, and "not (yet) on the
// chain" answers cached. docs/payments.md has the rules.
package payments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/envelopd/envelopd/payments/proof"
	"github.com/envelopd/envelopd/payments/rail"
	"github.com/envelopd/envelopd/runner"
	"github.com/envelopd/envelopd/store"
)

// Store is what the runner needs of the store.
type Store interface {
	store.Payments
	Message(ctx context.Context, id int64) (*store.Message, error)
	Thread(ctx context.Context, ref string) ([]store.Message, error)
}

// Config configures a Runner. Zero fields take the defaults.
type Config struct {
	// Rails serve chains, by normalised chain name.
	Rails map[string]rail.Rail
	// Wallets are our receiving addresses per chain (besides those we
	// published in a METHODS, INVOICE or OFFER of the thread).
	Wallets map[string][]string
	// Deadline: a transaction not seen this long after the mail arrived
	// is not_found (default 1 h).
	Deadline time.Duration
	// Lease is how long a claimed check is ours (default 2 min).
	Lease time.Duration
	// Interval is how often due checks are looked for (default 2 s).
	Interval time.Duration
	// Batch bounds the checks claimed at once (default 16).
	Batch int
	// MinBackoff and MaxBackoff bound the wait before a pending check is
	// tried again (defaults 5 s and 10 min; doubled per attempt).
	MinBackoff, MaxBackoff time.Duration
	// PerSender and Global bound the chain lookups per minute: of one
	// sender's payments (authenticated senders get four times as many),
	// and in all (defaults 20 and 300). A check over budget waits.
	PerSender, Global int
	// NegativeTTL is how long "not on the chain yet" for a transaction
	// is believed without asking again (default 15 s).
	NegativeTTL time.Duration
	// CheckTimeout bounds one rail call (default 30 s).
	CheckTimeout time.Duration
	// OnRejected, when set, is called after a payment settles mismatch,
	// failed or not_found (serve: the courtesy OOPS,
	// mailin.Pipeline.PaymentOOPS).
	OnRejected func(ctx context.Context, p store.Payment)
	// Metrics, when set, counts claims and outcomes as "payments".
	Metrics *runner.Metrics
	Now     func() time.Time
	Logger  *slog.Logger
}

func (c *Config) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.Deadline, time.Hour)
	def(&c.Lease, 2*time.Minute)
	def(&c.Interval, 2*time.Second)
	def(&c.MinBackoff, 5*time.Second)
	def(&c.MaxBackoff, 10*time.Minute)
	def(&c.NegativeTTL, 15*time.Second)
	def(&c.CheckTimeout, 30*time.Second)
	if c.Batch <= 0 {
		c.Batch = 16
	}
	if c.PerSender <= 0 {
		c.PerSender = 20
	}
	if c.Global <= 0 {
		c.Global = 300
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Runner checks due payments. It is safe to run one per process; several
// processes (nodes) share the work through the store's claims.
type Runner struct {
	st  Store
	cfg Config

	chains []string // those with a rail: the only ones this runner claims

	mu       sync.Mutex
	global   window
	senders  map[string]*window
	negative map[string]time.Time // chain NUL tx → not before
	down     map[string]circuit   // chain → its rail's node is not answering
}

// circuit is a rail whose node did not answer (unreachable, an HTTP
// error status, the wrong chain): until then its payments are not
// claimed at all, so a node that is down costs one call per backoff, not
// one per waiting payment. fails is how many calls in a row failed.
type circuit struct {
	until time.Time
	fails int
}

// New returns a runner over st.
func New(st Store, cfg Config) *Runner {
	cfg.defaults()
	rails := map[string]rail.Rail{}
	for chain, r := range cfg.Rails {
		rails[proof.NormChain(chain)] = r
	}
	cfg.Rails = rails
	wallets := map[string][]string{}
	for chain, ws := range cfg.Wallets {
		wallets[proof.NormChain(chain)] = append(wallets[proof.NormChain(chain)], ws...)
	}
	cfg.Wallets = wallets
	chains := []string{}
	for c := range rails {
		chains = append(chains, c)
	}
	slices.Sort(chains)
	return &Runner{st: st, cfg: cfg, chains: chains, senders: map[string]*window{}, negative: map[string]time.Time{},
		down: map[string]circuit{}}
}

// Serves reports whether a rail serves chain: mailin.Pipeline's
// PaymentChains (a payment on it is pending, not unverified).
func (r *Runner) Serves(chain string) bool {
	_, ok := r.cfg.Rails[proof.NormChain(chain)]
	return ok
}

// Run checks due payments until ctx ends.
//
// It claims again at once while claimed checks are settled; a batch
// given back whole (budgets, the negative cache) waits for the next
// Interval, so that a flood costs one batch per interval, not a claim of
// every waiting row (runner.Loop).
func (r *Runner) Run(ctx context.Context) error {
	return r.loop().Run(ctx)
}

// RunOnce claims the payments due now and checks them; it returns how
// many it claimed.
func (r *Runner) RunOnce(ctx context.Context) (int, error) {
	_, claimed, err := r.loop().Once(ctx)
	return claimed, err
}

// loop is the runner over the payment rows: a batch claimed, all checked
// at once.
func (r *Runner) loop() *runner.Loop[store.Payment] {
	return &runner.Loop[store.Payment]{Name: "payments", Worker: paymentJobs{r}, Batch: r.cfg.Batch, Parallel: r.cfg.Batch,
		Interval: r.cfg.Interval, Now: r.cfg.Now, Metrics: r.cfg.Metrics, Logger: r.cfg.Logger}
}

// paymentJobs is the payment checks as a runner.Worker.
type paymentJobs struct{ r *Runner }

// Claim takes no more than the global budget has room for (a flood waits
// in the store, not in claims given back again and again), and only
// payments on chains whose rail is not backed off.
func (j paymentJobs) Claim(ctx context.Context, now time.Time, limit int) ([]store.Payment, error) {
	r := j.r
	limit = min(limit, r.room(now))
	if limit <= 0 {
		return nil, nil
	}
	chains := r.upChains(now)
	if len(chains) == 0 {
		return nil, nil
	}
	ps, err := r.st.ClaimPayments(ctx, now, r.cfg.Lease, limit, chains)
	if err != nil {
		return nil, fmt.Errorf("payments: claim: %w", err)
	}
	return ps, nil
}

// Attempt checks one claimed payment and settles it.
func (j paymentJobs) Attempt(ctx context.Context, p store.Payment) (runner.Outcome, error) {
	return j.r.check(ctx, p), nil
}

// check checks one claimed payment and settles it: Retried when it is
// pending again, Succeeded when it is settled for good, Released when it
// gave the claim back unchecked (a budget, the negative cache) or left it
// to its lease.
func (r *Runner) check(ctx context.Context, p store.Payment) runner.Outcome {
	now := r.cfg.Now()
	o := runner.Released
	log := r.cfg.Logger.With("payment", p.ID, "chain", p.Chain, "tx", p.Tx)
	settle := func(s store.Settlement) {
		s.CheckedAt = now
		if err := r.st.SettlePayment(context.WithoutCancel(ctx), p.ID, s); err != nil {
			log.Warn("payments: settle failed (checked again after the lease)", "err", err)
			return
		}
		log.Debug("payments: checked", "state", s.State, "reason", s.Reason)
		o = runner.Succeeded
		if s.State == store.PaymentPending {
			o = runner.Retried
		}
		switch s.State {
		case store.PaymentMismatch, store.PaymentFailed, store.PaymentNotFound:
			if r.cfg.OnRejected != nil {
				q := p
				q.State, q.Reason, q.Paid, q.To, q.From = s.State, s.Reason, s.Paid, s.To, s.From
				q.CheckedAt = &now
				r.cfg.OnRejected(context.WithoutCancel(ctx), q)
			}
		}
	}
	retry := func(reason string, at time.Time) {
		settle(store.Settlement{State: store.PaymentPending, Reason: reason, Next: at})
	}
	rl, ok := r.cfg.Rails[p.Chain]
	if !ok {
		retry(fmt.Sprintf("no rail serves chain %q now", p.Chain), now.Add(r.cfg.MaxBackoff))
		return o
	}
	if id := proof.Identify(p.Chain, mustString(p.Tx)); id.Warning == proof.WarnMalformed {
		settle(store.Settlement{State: store.PaymentNotFound, Reason: id.Detail})
		return o
	}
	// The cheap refusals first, before the store is read for the thread.
	key := p.Chain + "\x00" + p.Tx
	if at, ok := r.notSeen(key, now); ok {
		r.release(ctx, p, at, log)
		return runner.Released
	}
	if at, ok := r.budget(p, now, false); !ok {
		r.release(ctx, p, at, log)
		return runner.Released
	}
	want, reason, err := r.want(ctx, p)
	if err != nil {
		retry("reading the thread failed: "+err.Error(), now.Add(r.backoff(p.Attempts)))
		return o
	}
	if reason != "" {
		settle(store.Settlement{State: store.PaymentMismatch, Reason: reason})
		return o
	}
	if at, ok := r.budget(p, now, true); !ok {
		r.release(ctx, p, at, log)
		return runner.Released
	}
	cctx, cancel := context.WithTimeout(ctx, r.cfg.CheckTimeout)
	res, err := rl.Check(cctx, want)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return runner.Released // stopping: the lease ends and another try comes
		}
		retry("the rail failed: "+err.Error(), now.Add(r.backoff(p.Attempts)))
		if nodeDown(err) {
			r.trip(p.Chain, now, log)
		}
		return o
	}
	r.mend(p.Chain)
	s := store.Settlement{State: string(res.State), Reason: res.Reason, Token: res.Token, Paid: res.Paid, To: res.To,
		From: res.From, Block: res.Block, Confirmations: res.Confirmations, Warnings: res.Warnings}
	switch res.State {
	case rail.Verified, rail.Mismatch, rail.Failed:
	case rail.Pending:
		if res.Block == 0 {
			r.markNotSeen(key, now.Add(r.cfg.NegativeTTL))
		}
		if res.Block == 0 && now.Sub(p.CreatedAt) >= r.cfg.Deadline {
			s.State = store.PaymentNotFound
			s.Reason = fmt.Sprintf("the transaction was not seen on %s within %s of the mail", p.Chain, r.cfg.Deadline)
			break
		}
		if s.Reason == "" {
			s.Reason = "not on the chain yet"
		}
		s.Next = now.Add(r.backoff(p.Attempts))
	default:
		retry(fmt.Sprintf("the rail answered the unknown state %q", res.State), now.Add(r.backoff(p.Attempts)))
		return o
	}
	settle(s)
	return o
}

// nodeDown reports whether err says the rail's node as a whole is not
// answering, rather than something about one transaction (a malformed or
// oversized answer, a JSON-RPC error for that hash).
func nodeDown(err error) bool {
	return errors.Is(err, rail.ErrUnreachable) || errors.Is(err, rail.ErrHTTPStatus) || errors.Is(err, rail.ErrChainID)
}

// upChains is the chains whose rails are not backed off at now.
func (r *Runner) upChains(now time.Time) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.down) == 0 {
		return r.chains
	}
	up := make([]string, 0, len(r.chains))
	for _, c := range r.chains {
		if d, ok := r.down[c]; !ok || !now.Before(d.until) {
			up = append(up, c)
		}
	}
	return up
}

// trip backs chain's rail off after a failed call: MinBackoff doubled per
// failure in a row, at most MaxBackoff.
func (r *Runner) trip(chain string, now time.Time, log *slog.Logger) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := r.down[chain]
	if now.Before(d.until) {
		return // calls of one batch failing together count once
	}
	d.fails++
	d.until = now.Add(r.backoff(d.fails))
	r.down[chain] = d
	log.Warn("payments: the rail's node is not answering; its checks wait", "until", d.until, "failures", d.fails)
}

// mend closes chain's circuit after an answer from its node.
func (r *Runner) mend(chain string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.down, chain)
}

// release puts a claimed payment back for later without counting the try.
func (r *Runner) release(ctx context.Context, p store.Payment, at time.Time, log *slog.Logger) {
	if err := r.st.ReleasePayment(context.WithoutCancel(ctx), p.ID, at); err != nil {
		log.Warn("payments: release failed (checked again after the lease)", "err", err)
	}
}

// backoff is the wait after attempt n (1: the first): MinBackoff doubled
// per attempt, at most MaxBackoff, without jitter.
func (r *Runner) backoff(n int) time.Duration {
	return runner.Backoff{Initial: r.cfg.MinBackoff, Max: r.cfg.MaxBackoff}.Delay(n)
}

// window counts events in the current minute.
type window struct {
	start time.Time
	n     int
}

// left is how many more the window takes at now, and when it starts
// again.
func (w *window) left(now time.Time, limit int) (int, time.Time) {
	if now.Sub(w.start) >= time.Minute {
		w.start, w.n = now, 0
	}
	return max(0, limit-w.n), w.start.Add(time.Minute)
}

// room is how many lookups the global budget still allows this minute.
func (r *Runner) room(now time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, _ := r.global.left(now, r.cfg.Global)
	return n
}

// budget reports whether the global budget and p's sender's allow one
// more chain lookup now, and takes it when take is set; when not, it
// returns when to try again.
func (r *Runner) budget(p store.Payment, now time.Time, take bool) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	per := r.cfg.PerSender
	if p.Authenticated {
		per *= 4
	}
	w := r.senders[p.Sender]
	if w == nil {
		if len(r.senders) > 10000 {
			for k, v := range r.senders {
				if now.Sub(v.start) >= time.Minute {
					delete(r.senders, k)
				}
			}
		}
		w = &window{start: now}
		r.senders[p.Sender] = w
	}
	if n, at := w.left(now, per); n == 0 {
		return at, false
	}
	if n, at := r.global.left(now, r.cfg.Global); n == 0 {
		return at, false
	}
	if take {
		w.n++
		r.global.n++
	}
	return time.Time{}, true
}

func (r *Runner) notSeen(key string, now time.Time) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.negative[key]
	if ok && now.Before(at) {
		return at, true
	}
	delete(r.negative, key)
	return time.Time{}, false
}

func (r *Runner) markNotSeen(key string, until time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.negative) > 100000 {
		clear(r.negative)
	}
	r.negative[key] = until
}

func mustString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// body is the Envelopay fields the runner reads from a stored message.
type body struct {
	Type       string          `json:"type"`
	ID         string          `json:"id"`
	Amount     string          `json:"amount"`
	Token      string          `json:"token"`
	Chain      string          `json:"chain"`
	Wallet     string          `json:"wallet"`
	InvoiceRef string          `json:"invoice_ref"`
	OfferRef   string          `json:"offer_ref"`
	Give       *store.Asset    `json:"give"`
	Want       *store.Asset    `json:"want"`
	Rails      json.RawMessage `json:"rails"`
}

func bodyOf(m *store.Message) body {
	var r struct {
		Body json.RawMessage `json:"body"`
	}
	var b body
	if json.Unmarshal(m.Result, &r) == nil {
		_ = json.Unmarshal(r.Body, &b)
	}
	if b.Type == "" {
		b.Type = m.Type
	}
	return b
}

// want works out what p's proof must show, or why the mail disagrees
// with what we asked for (a mismatch, in words).
func (r *Runner) want(ctx context.Context, p store.Payment) (rail.Want, string, error) {
	w := rail.Want{Chain: p.Chain, Tx: p.Tx, Token: p.Token, Amount: p.Amount}
	m, err := r.st.Message(ctx, p.ID)
	if err != nil {
		return w, "", err
	}
	thread, err := r.st.Thread(ctx, m.ThreadID)
	if err != nil {
		return w, "", err
	}
	b := bodyOf(m)
	wallets := slices.Clone(r.cfg.Wallets[p.Chain])
	var ours []struct {
		m store.Message
		b body
	}
	for _, t := range thread {
		if t.Direction != store.DirOut {
			continue
		}
		tb := bodyOf(&t)
		ours = append(ours, struct {
			m store.Message
			b body
		}{t, tb})
		wallets = append(wallets, published(tb, p.Chain)...)
	}
	switch {
	case b.Type == "pay" && b.InvoiceRef != "":
		for _, o := range ours {
			if o.b.Type != "invoice" || o.b.ID != b.InvoiceRef {
				continue
			}
			if !slices.Contains(o.m.Recipients, strings.ToLower(p.Sender)) {
				return w, fmt.Sprintf("the PAY comes from %s, but our INVOICE %s was sent to %s", p.Sender, b.InvoiceRef, strings.Join(o.m.Recipients, ", ")), nil
			}
			if why := disagree("INVOICE "+b.InvoiceRef, store.Asset{Amount: p.Amount, Token: p.Token, Chain: p.Chain},
				store.Asset{Amount: o.b.Amount, Token: o.b.Token, Chain: o.b.Chain}); why != "" {
				return w, why, nil
			}
			if o.b.Wallet == "" {
				return w, fmt.Sprintf("our INVOICE %s names no wallet", b.InvoiceRef), nil
			}
			w.To = []string{o.b.Wallet}
			return w, "", nil
		}
	case b.Type == "accept" && b.OfferRef != "":
		for _, o := range ours {
			if o.b.Type != "offer" || o.b.ID != b.OfferRef || o.b.Want == nil {
				continue
			}
			if why := disagree("OFFER "+b.OfferRef+" want", store.Asset{Amount: p.Amount, Token: p.Token, Chain: p.Chain}, *o.b.Want); why != "" {
				return w, why, nil
			}
			if o.b.Wallet != "" {
				w.To = []string{o.b.Wallet}
				return w, "", nil
			}
		}
	}
	w.To = dedupe(wallets)
	if len(w.To) == 0 {
		return w, fmt.Sprintf("no receiving wallet of ours is known on %s (--wallet, or one we published in a METHODS, INVOICE or OFFER of the thread)", p.Chain), nil
	}
	return w, "", nil
}

// published is the wallets our message b names on chain: a METHODS
// rail's, an INVOICE's, an OFFER's (for its want's chain).
func published(b body, chain string) []string {
	var out []string
	switch b.Type {
	case "methods":
		var rails []struct {
			Chain  string `json:"chain"`
			Wallet string `json:"wallet"`
		}
		_ = json.Unmarshal(b.Rails, &rails)
		for _, rl := range rails {
			if proof.NormChain(rl.Chain) == chain && rl.Wallet != "" {
				out = append(out, rl.Wallet)
			}
		}
	case "invoice":
		if proof.NormChain(b.Chain) == chain && b.Wallet != "" {
			out = append(out, b.Wallet)
		}
	case "offer":
		if b.Want != nil && proof.NormChain(b.Want.Chain) == chain && b.Wallet != "" {
			out = append(out, b.Wallet)
		}
	}
	return out
}

// disagree says how got differs from what (want), or "".
func disagree(what string, got, want store.Asset) string {
	var d []string
	if strings.TrimSpace(got.Amount) != strings.TrimSpace(want.Amount) {
		d = append(d, fmt.Sprintf("amount %q, not %q", got.Amount, want.Amount))
	}
	if !strings.EqualFold(strings.TrimSpace(got.Token), strings.TrimSpace(want.Token)) {
		d = append(d, fmt.Sprintf("token %q, not %q", got.Token, want.Token))
	}
	if proof.NormChain(got.Chain) != proof.NormChain(want.Chain) {
		d = append(d, fmt.Sprintf("chain %q, not %q", got.Chain, want.Chain))
	}
	if len(d) == 0 {
		return ""
	}
	return "the payment disagrees with our " + what + ": " + strings.Join(d, "; ")
}

func dedupe(ws []string) []string {
	var out []string
	for _, w := range ws {
		w = strings.TrimSpace(w)
		if w != "" && !slices.ContainsFunc(out, func(o string) bool { return strings.EqualFold(o, w) }) {
			out = append(out, w)
		}
	}
	return out
}

// ErrNoRail is returned by CheckNow for a chain no rail serves.
var ErrNoRail = errors.New("payments: no rail serves the chain")

// CheckNow checks payment id at once, whatever its state but duplicate
// (envelopd payments check ID with rail flags), and returns it as
// settled (or pending again). It does not wait for a claim: a serving
// runner checking the same payment meanwhile only settles it twice.
func (r *Runner) CheckNow(ctx context.Context, id int64) (*store.Payment, error) {
	p, err := r.st.GetPayment(ctx, id)
	if err != nil {
		return nil, err
	}
	if !r.Serves(p.Chain) {
		return p, fmt.Errorf("%w: %q", ErrNoRail, p.Chain)
	}
	if err := r.st.RecheckPayment(ctx, id, r.cfg.Now()); err != nil {
		return nil, err
	}
	if p, err = r.st.GetPayment(ctx, id); err != nil {
		return nil, err
	}
	r.check(ctx, *p)
	return r.st.GetPayment(ctx, id)
}
