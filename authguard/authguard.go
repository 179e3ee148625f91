// Package authguard is the one gate every password check of envelopd goes
// through, whatever the front end (SMTP AUTH, the IMAP view's LOGIN and
// AUTHENTICATE, later the HTTP API). It knows nothing of those protocols:
// a front end describes an Attempt and hands over the verification as a
// function; Guard.Check decides whether it may run at all and records how
// it ended.
//
//   - Throttle: failures are counted per client IP (IPv6 per /64) and per
//     account. Before any password hash is computed, an IP that failed
//     waits a delay that doubles with each failure (BaseDelay, 2×, 4×, …
//     up to MaxDelay); an account that failed often (from any IP) makes
//     every attempt on it wait a bounded delay; an IP with LockoutAfter
//     failures in Window is locked out for Lockout, without hashing
//     anything. Lockouts are per IP: another client is not affected.
//   - Gate: at most N password hashes run at once (default NumCPU); further
//     attempts wait in a bounded queue, or are refused at once with ErrBusy
//     (SMTP 454 4.7.0, IMAP NO [UNAVAILABLE]) — a flood of wrong passwords
//     costs at most N cores.
//   - Every failure is logged (service, ip, account, mechanism — never the
//     password) and counted in Metrics.
//
// Time is injectable (Throttle.Now, Guard.Sleep) so tests never sleep.
package authguard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/envelopd/envelopd/internal/defaults"
)

// Errors of Check, with stable string codes.
var (
	// ErrFailed: the credentials were wrong (or the user unknown, or the
	// SASL exchange malformed — the caller cannot tell, by design).
	ErrFailed = errors.New("auth_failed")
	// ErrLockedOut: the client IP failed too often; nothing was checked.
	ErrLockedOut = errors.New("auth_locked_out")
	// ErrBusy: every hashing slot and the queue are taken; try later.
	ErrBusy = errors.New("auth_busy")
)

// Attempt describes one authentication attempt. Service is the front end
// ("smtp", "submission", "imap", "api"), Mechanism the SASL mechanism or
// command ("PLAIN", "LOGIN", "LOGIN-CMD").
type Attempt struct {
	Service, IP, Account, Mechanism string
}

// Guard combines a Throttle and a Gate. The zero value is usable: no
// throttle, a gate of NumCPU slots, nothing logged.
type Guard struct {
	Throttle *Throttle // nil: no throttling
	Gate     *Gate     // nil: a default gate is made on first use
	// SessionFailures is how many failures one session (connection) may
	// have before the front end closes it; default 3.
	SessionFailures int
	Logger          *slog.Logger
	Metrics         Metrics
	// Sleep waits d or until ctx ends; nil means a real timer. Tests
	// inject one that advances a fake clock.
	Sleep func(ctx context.Context, d time.Duration) error

	once sync.Once
}

// New returns a Guard with the default policy and a gate of concurrency
// slots (≤ 0: NumCPU).
func New(concurrency int, logger *slog.Logger, m Metrics) *Guard {
	return &Guard{Throttle: NewThrottle(Policy{}), Gate: NewGate(concurrency, 0, 0), Logger: logger, Metrics: m}
}

// MaxSessionFailures is the number of failures after which a front end
// closes the session.
func (g *Guard) MaxSessionFailures() int {
	if g == nil || g.SessionFailures <= 0 {
		return 3
	}
	return g.SessionFailures
}

func (g *Guard) gate() *Gate {
	g.once.Do(func() {
		if g.Gate == nil {
			g.Gate = NewGate(0, 0, 0)
		}
	})
	return g.Gate
}

func (g *Guard) log() *slog.Logger {
	if g.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return g.Logger
}

// Check runs verify for a unless the throttle refuses it first: a locked
// out IP gets ErrLockedOut, an IP or account with recent failures waits
// its delay, then verify runs inside the gate (ErrBusy when full). A
// failing verify is recorded and returned as ErrFailed (also matching
// ErrLockedOut when this failure locked the IP out). verify should cost
// the same whatever is wrong (see the package doc of mailin's Relay).
func (g *Guard) Check(ctx context.Context, a Attempt, verify func() error) error {
	a.Account = normAccount(a.Account)
	if g.Throttle != nil {
		delay, err := g.Throttle.Admit(a.IP, a.Account)
		if err != nil {
			g.refused(a.Service, "locked_out")
			g.log().Warn("auth refused: client locked out", "service", a.Service, "ip", a.IP,
				"account", a.Account, "mechanism", a.Mechanism)
			return err
		}
		if delay > 0 {
			if err := g.sleep(ctx, delay); err != nil {
				return err
			}
		}
	}
	var verr error
	if err := g.gate().Do(ctx, func() { verr = verify() }); err != nil {
		if errors.Is(err, ErrBusy) {
			g.refused(a.Service, "busy")
			g.log().Warn("auth refused: hashing busy", "service", a.Service, "ip", a.IP,
				"account", a.Account, "mechanism", a.Mechanism)
		}
		return err
	}
	if verr == nil {
		return nil
	}
	n := 0
	if g.Throttle != nil {
		n = g.Throttle.Fail(a.IP, a.Account)
	}
	g.failed(a.Service, a.Mechanism)
	g.log().Warn("auth failed", "service", a.Service, "ip", a.IP, "account", a.Account,
		"mechanism", a.Mechanism, "ip_failures", n)
	if g.Throttle != nil && g.Throttle.Locked(a.IP) {
		g.log().Warn("auth: client locked out", "service", a.Service, "ip", a.IP,
			"for", g.Throttle.Policy().Lockout.String())
		return fmt.Errorf("%w (%w)", ErrFailed, ErrLockedOut)
	}
	return ErrFailed
}

func (g *Guard) sleep(ctx context.Context, d time.Duration) error {
	if g.Sleep != nil {
		return g.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// normAccount lower-cases an account name and bounds its length (it is
// attacker-chosen and ends up in logs and map keys).
func normAccount(s string) string {
	if len(s) > 256 {
		s = s[:256]
	}
	return strings.ToLower(s)
}

// Policy is the throttle's configuration; zero fields take the defaults.
type Policy struct {
	BaseDelay    time.Duration // delay after an IP's first failure; default 250ms
	MaxDelay     time.Duration // cap of the per-IP delay; default 8s
	LockoutAfter int           // failures of one IP in Window that lock it out; default 10
	Lockout      time.Duration // how long; default 15 min
	Window       time.Duration // failures older than this are forgotten; default 15 min
	// AccountFree failures of one account (from all IPs together) cost
	// nothing; each further one doubles a delay (from BaseDelay) that every
	// attempt on the account waits, up to AccountMaxDelay. Defaults 5 and
	// 2s: bounded so that a guesser cannot lock the owner out.
	AccountFree     int
	AccountMaxDelay time.Duration
	MaxTracked      int // IPs and accounts remembered each; default 100,000
	// GlobalFailures is the budget of failures without a valid credential
	// from all clients together in one minute (default 600). Past it,
	// requests that present no usable credential are refused at once and
	// single failures are no longer logged one by one (KeyThrottle): a
	// flood of strangers degrades strangers only.
	GlobalFailures int
}

func (p *Policy) defaults() {
	defaults.Positive(&p.BaseDelay, 250*time.Millisecond)
	defaults.Positive(&p.MaxDelay, 8*time.Second)
	defaults.Positive(&p.LockoutAfter, 10)
	defaults.Positive(&p.Lockout, 15*time.Minute)
	defaults.Positive(&p.Window, 15*time.Minute)
	defaults.Positive(&p.AccountFree, 5)
	defaults.Positive(&p.AccountMaxDelay, 2*time.Second)
	defaults.Positive(&p.MaxTracked, 100_000)
	defaults.Positive(&p.GlobalFailures, 600)
}

// Throttle counts authentication failures per client IP and per account.
type Throttle struct {
	p   Policy
	Now func() time.Time // nil: time.Now

	// mu guards the maps and the budget; the checks every request makes
	// (LockedFor, Saturated, Locked) only read, under RLock, so that a
	// crowd of refused clients does not queue a valid key's check
	// behind its own.
	mu       sync.RWMutex
	ips      map[string]*record
	accounts map[string]*record
	swept    time.Time
	// global counts failures of every client in the minute from
	// globalStart (the unauthenticated budget).
	global      int
	globalStart time.Time
}

type record struct {
	fails       int
	first       time.Time // start of the current window
	lockedUntil time.Time
}

// NewThrottle returns a Throttle with policy p (zero fields: defaults).
func NewThrottle(p Policy) *Throttle {
	p.defaults()
	return &Throttle{p: p, ips: map[string]*record{}, accounts: map[string]*record{}}
}

// Policy returns the effective policy.
func (t *Throttle) Policy() Policy { return t.p }

func (t *Throttle) now() time.Time {
	if t.Now != nil {
		return t.Now()
	}
	return time.Now()
}

// IPKey is the key an address is throttled under: the IP without port;
// an IPv6 address by its /64 (one host usually holds a whole /64).
func IPKey(addr string) string {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}

// live returns the record of key if its window is still open.
func (t *Throttle) live(m map[string]*record, key string, now time.Time) *record {
	r := m[key]
	if r == nil {
		return nil
	}
	if now.Sub(r.first) > t.p.Window && !now.Before(r.first) {
		r.fails = 0
	}
	return r
}

// Admit says whether an attempt from ip on account may be checked, and
// how long it must wait first.
func (t *Throttle) Admit(ip, account string) (time.Duration, error) {
	ip, account = IPKey(ip), normAccount(account)
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	var d time.Duration
	if r := t.live(t.ips, ip, now); r != nil {
		if now.Before(r.lockedUntil) {
			return 0, ErrLockedOut
		}
		d = t.grow(r.fails, t.p.MaxDelay)
	}
	if r := t.live(t.accounts, account, now); account != "" && r != nil && r.fails > t.p.AccountFree {
		d = max(d, t.grow(r.fails-t.p.AccountFree, t.p.AccountMaxDelay))
	}
	return d, nil
}

// grow is BaseDelay·2^(n-1), capped; 0 for n ≤ 0.
func (t *Throttle) grow(n int, limit time.Duration) time.Duration {
	if n <= 0 {
		return 0
	}
	d := t.p.BaseDelay
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// Fail records a failure of ip on account and returns the IP's failure
// count in the current window (0 when this failure locked it out).
func (t *Throttle) Fail(ip, account string) int {
	ip, account = IPKey(ip), normAccount(account)
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sweepLocked(now)
	bump := func(m map[string]*record, key string) *record {
		r := t.live(m, key, now)
		if r == nil {
			r = &record{first: now}
			m[key] = r
		}
		if r.fails == 0 {
			r.first = now
		}
		r.fails++
		return r
	}
	// An attempt without an account name (a malformed SASL exchange) is
	// an attacker's: counted against its IP only. A shared "" account
	// would make every client's attempts wait for a stranger's failures.
	if account != "" {
		bump(t.accounts, account)
	}
	t.countGlobalLocked(now)
	r := bump(t.ips, ip)
	if r.fails >= t.p.LockoutAfter {
		r.lockedUntil = now.Add(t.p.Lockout)
		r.fails = 0
		return 0
	}
	return r.fails
}

// countGlobalLocked counts a failure in the global budget's minute.
func (t *Throttle) countGlobalLocked(now time.Time) {
	if now.Sub(t.globalStart) >= time.Minute || now.Before(t.globalStart) {
		t.global, t.globalStart = 0, now
	}
	t.global++
}

// Saturated reports whether the failures of all clients together are
// over the global budget in the current minute, and until when.
func (t *Throttle) Saturated() (bool, time.Duration) {
	now := t.now()
	t.mu.RLock()
	defer t.mu.RUnlock()
	if now.Sub(t.globalStart) >= time.Minute || now.Before(t.globalStart) {
		return false, 0
	}
	return t.global >= t.p.GlobalFailures, t.globalStart.Add(time.Minute).Sub(now)
}

// FailIP records a failure of ip that names no account (an API key: a
// random key id is not an account a guesser could slow down for its
// owner). It returns how long ip is locked out after it: 0 when it is
// not, the rest of the lockout when an earlier failure — one that was
// still in flight when this attempt was admitted included — locked it
// (this failure then does not count again), the whole lockout when this
// failure reached LockoutAfter. It counts in the global budget, and
// over reports whether the global budget is spent (with this failure
// the first one over it when first).
func (t *Throttle) FailIP(ip string) (locked time.Duration, over, first bool) {
	ip = IPKey(ip)
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sweepLocked(now)
	t.countGlobalLocked(now)
	over = t.global >= t.p.GlobalFailures
	first = t.global == t.p.GlobalFailures
	r := t.live(t.ips, ip, now)
	if r != nil && now.Before(r.lockedUntil) {
		return r.lockedUntil.Sub(now), over, first
	}
	if r == nil {
		r = &record{first: now}
		t.ips[ip] = r
	}
	if r.fails == 0 {
		r.first = now
	}
	r.fails++
	if r.fails >= t.p.LockoutAfter {
		r.lockedUntil = now.Add(t.p.Lockout)
		r.fails = 0
		return t.p.Lockout, over, first
	}
	return 0, over, first
}

// LockedFor is how much longer ip is locked out (0: it is not).
func (t *Throttle) LockedFor(ip string) time.Duration {
	ip = IPKey(ip)
	now := t.now()
	t.mu.RLock()
	defer t.mu.RUnlock()
	if r := t.ips[ip]; r != nil && now.Before(r.lockedUntil) {
		return r.lockedUntil.Sub(now)
	}
	return 0
}

// Forgive clears the failures of ip unless it is locked out: the client
// has just proved it holds a valid random key (KeyThrottle.Succeed).
func (t *Throttle) Forgive(ip string) {
	ip = IPKey(ip)
	now := t.now()
	// Most valid requests come from an address with nothing to forgive:
	// they only read.
	t.mu.RLock()
	r := t.ips[ip]
	none := r == nil || r.fails == 0
	t.mu.RUnlock()
	if none {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if r := t.ips[ip]; r != nil && !now.Before(r.lockedUntil) {
		r.fails = 0
	}
}

// Locked reports whether ip is locked out now.
func (t *Throttle) Locked(ip string) bool {
	ip = IPKey(ip)
	now := t.now()
	t.mu.RLock()
	defer t.mu.RUnlock()
	r := t.ips[ip]
	return r != nil && now.Before(r.lockedUntil)
}

// sweepLocked forgets expired records once a minute, and everything when
// the maps outgrow MaxTracked even so (a flood of distinct addresses must
// not grow memory without bound; forgetting only makes the throttle
// milder).
func (t *Throttle) sweepLocked(now time.Time) {
	full := len(t.ips) >= t.p.MaxTracked || len(t.accounts) >= t.p.MaxTracked
	if !full && now.Sub(t.swept) < time.Minute {
		return
	}
	t.swept = now
	for _, m := range []map[string]*record{t.ips, t.accounts} {
		for k, r := range m {
			if now.Sub(r.first) > t.p.Window && !now.Before(r.lockedUntil) {
				delete(m, k)
			}
		}
	}
	if len(t.accounts) >= t.p.MaxTracked {
		clear(t.accounts)
	}
	if len(t.ips) >= t.p.MaxTracked {
		for k, r := range t.ips {
			if !now.Before(r.lockedUntil) {
				delete(t.ips, k)
			}
		}
	}
}

// Gate bounds how many password hashes run at once.
type Gate struct {
	slots chan struct{}
	queue chan struct{}
	wait  time.Duration
}

// NewGate returns a gate of n slots (≤ 0: NumCPU) with room for queue
// waiters (< 0: none; 0: 4·n) who wait at most wait (0: 10s) for a slot.
func NewGate(n, queue int, wait time.Duration) *Gate {
	if n <= 0 {
		n = runtime.NumCPU()
	}
	if queue == 0 {
		queue = 4 * n
	}
	if queue < 0 {
		queue = 0
	}
	if wait <= 0 {
		wait = 10 * time.Second
	}
	return &Gate{slots: make(chan struct{}, n), queue: make(chan struct{}, queue), wait: wait}
}

// Slots is the number of hashes that may run at once.
func (g *Gate) Slots() int { return cap(g.slots) }

// Do runs f in a slot: at once if one is free, else after waiting in the
// queue; ErrBusy when the queue is full or the wait runs out.
func (g *Gate) Do(ctx context.Context, f func()) error {
	select {
	case g.slots <- struct{}{}:
	default:
		select {
		case g.queue <- struct{}{}:
		default:
			return ErrBusy
		}
		t := time.NewTimer(g.wait)
		select {
		case g.slots <- struct{}{}:
			<-g.queue
			t.Stop()
		case <-t.C:
			<-g.queue
			return ErrBusy
		case <-ctx.Done():
			<-g.queue
			t.Stop()
			return ctx.Err()
		}
	}
	defer func() { <-g.slots }()
	f()
	return nil
}

// Metrics count authentication failures and refusals; package
// authguard/authmetrics implements it with Prometheus (kept apart so that
// mailin, and the relaytest helper agents import, do not depend on the
// Prometheus client). A nil Metrics records nothing.
type Metrics interface {
	// Failed counts a failed authentication (service "smtp",
	// "submission", "imap"; mechanism "PLAIN", "LOGIN", …).
	Failed(service, mechanism string)
	// Refused counts an attempt refused before any check (reason
	// "locked_out" or "busy").
	Refused(service, reason string)
}

func (g *Guard) failed(service, mech string) {
	if g.Metrics != nil {
		g.Metrics.Failed(service, mech)
	}
}

func (g *Guard) refused(service, reason string) {
	if g.Metrics != nil {
		g.Metrics.Refused(service, reason)
	}
}
