package authguard

import (
	"time"
)

// KeyThrottle applies a Guard's throttle to a front end whose secrets are
// random keys checked at no real cost (the HTTP API's and MCP's bearer
// keys: failed keys count toward the same per-IP lockout as failed SMTP
// and IMAP authentication). Its methods are those of api.AuthThrottle.
//
// What it counts is only what the client controls: its address. A key
// id is not an account (256 random bits cannot be guessed, and counting
// failures per id, or per the empty id of requests without a key, would
// let anyone slow down the key's owner, or everyone). Nothing here
// waits: a valid key is checked and served at once, whoever failed
// before; a failure is decided at once, 401 below the lockout threshold
// and 429 from it on (the front end may then hold the answer: the API's
// tarpit, api.TenantLimits.RefusalDelay). Failures are counted when they
// end, atomically, so attempts sent at once are all counted: past
// LockoutAfter the ones still in flight are answered 429. No hashing
// gate applies: a key check is one SHA-256.
type KeyThrottle struct {
	Guard     *Guard
	Service   string // "http"
	Mechanism string // "bearer"
}

// Allow refuses a locked-out IP (with the rest of its lockout as the
// wait), and, while the global failure budget is spent, a request that
// presents no well-formed key (keyed false) with the rest of the budget's
// minute; a request with a key is always checked.
func (k KeyThrottle) Allow(ip string, keyed bool) (time.Duration, bool) {
	g := k.Guard
	if g == nil || g.Throttle == nil {
		return 0, true
	}
	if d := g.Throttle.LockedFor(ip); d > 0 {
		g.refused(k.Service, "locked_out")
		return d, false
	}
	if !keyed {
		if over, d := g.Throttle.Saturated(); over {
			g.refused(k.Service, "global_budget")
			return d, false
		}
	}
	return 0, true
}

// Fail records a failed key (account is the key id presented, "" when
// none: logged, never counted on its own), logs and counts it like a
// failed password. refused reports that the client is now locked out (by
// this failure or one before it) or that the global budget is spent: the
// answer is then 429 with retryAfter.
func (k KeyThrottle) Fail(ip, account string) (retryAfter time.Duration, refused bool) {
	g := k.Guard
	if g == nil {
		return 0, false
	}
	account = normAccount(account)
	g.failed(k.Service, k.Mechanism)
	if g.Throttle == nil {
		g.log().Warn("auth failed", "service", k.Service, "ip", ip, "account", account, "mechanism", k.Mechanism)
		return 0, false
	}
	locked, over, first := g.Throttle.FailIP(ip)
	switch {
	case first:
		g.log().Warn("auth failures over the global budget: requests without a key refused, failures no longer logged one by one",
			"service", k.Service, "budget_per_minute", g.Throttle.Policy().GlobalFailures)
	case !over:
		g.log().Warn("auth failed", "service", k.Service, "ip", ip, "account", account, "mechanism", k.Mechanism,
			"locked_out", locked > 0)
	}
	if locked > 0 {
		return locked, true
	}
	if over {
		_, d := g.Throttle.Saturated()
		return max(d, time.Second), true
	}
	return 0, false
}

// Succeed forgives the IP's earlier failures (not a lockout): a client
// that presented a valid 256-bit key is not guessing, and a person who
// mistyped the key once must not be locked out by a few more typos
// later. Passwords keep their window (Check never forgives): a success
// there does not prove the other guesses were not guesses.
func (k KeyThrottle) Succeed(ip, account string) {
	if k.Guard != nil && k.Guard.Throttle != nil {
		k.Guard.Throttle.Forgive(ip)
	}
}
