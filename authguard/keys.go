package authguard

import (
	"context"
	"time"
)

// KeyThrottle applies a Guard's throttle to a front end whose secrets are
// random keys checked at no real cost (the HTTP API's bearer keys, issue
// 19: failed keys count toward the same per-IP throttling as failed SMTP
// and IMAP authentication). Its methods are those of api.AuthThrottle.
// No hashing gate applies: a key check is one SHA-256.
type KeyThrottle struct {
	Guard     *Guard
	Service   string // "http"
	Mechanism string // "bearer"
}

// Allow refuses a locked-out IP (with the lockout's length as the wait),
// and otherwise waits out the IP's current delay, as Check does before a
// password check, then allows the attempt.
func (k KeyThrottle) Allow(ip string) (time.Duration, bool) {
	g := k.Guard
	if g == nil || g.Throttle == nil {
		return 0, true
	}
	delay, err := g.Throttle.Admit(ip, "")
	if err != nil {
		g.refused(k.Service, "locked_out")
		g.log().Warn("auth refused: client locked out", "service", k.Service, "ip", ip, "mechanism", k.Mechanism)
		return g.Throttle.Policy().Lockout, false
	}
	if delay > 0 && g.sleep(context.Background(), delay) != nil {
		return delay, false
	}
	return 0, true
}

// Fail records a failed key (account is the key id presented), logs and
// counts it like a failed password.
func (k KeyThrottle) Fail(ip, account string) {
	g := k.Guard
	if g == nil {
		return
	}
	account = normAccount(account)
	n := 0
	if g.Throttle != nil {
		n = g.Throttle.Fail(ip, account)
	}
	g.failed(k.Service, k.Mechanism)
	g.log().Warn("auth failed", "service", k.Service, "ip", ip, "account", account,
		"mechanism", k.Mechanism, "ip_failures", n)
}

// Succeed forgives the IP's earlier failures (not a lockout): a client
// that presented a valid 256-bit key is not guessing, and a person who
// mistyped the key once must not wait before every later request of the
// web inbox. Passwords keep their window (Check never forgives): a
// success there does not prove the other guesses were not guesses.
func (k KeyThrottle) Succeed(ip, account string) {
	if k.Guard != nil && k.Guard.Throttle != nil {
		k.Guard.Throttle.Forgive(ip)
	}
}
