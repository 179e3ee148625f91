package main

import (
	"flag"
	goruntime "runtime"
	"time"

	"github.com/envelopd/envelopd/authguard"
	"github.com/envelopd/envelopd/authguard/authmetrics"
	"github.com/envelopd/envelopd/mailin"
)

// abuseFlags are serve's limits against hostile clients:
// connections per IP, idle sessions, and the authentication
// throttle and hashing bound shared by SMTP, submission and the IMAP view.
type abuseFlags struct {
	hashConcurrency, hashQueue int
	lockoutAfter               int
	lockout, maxDelay          time.Duration
}

func (a *abuseFlags) register(fs *flag.FlagSet, cfg *mailin.SMTPConfig) {
	fs.IntVar(&cfg.MaxConnectionsPerIP, "max-connections-per-ip", 20, "concurrent connections from one client IP (IPv6: one /64), SMTP and IMAP each (more → 421 / BYE); -1: no cap")
	fs.DurationVar(&cfg.IdleTimeout, "idle-timeout", time.Minute, "close an SMTP session that sends no command for this long outside a mail transaction")
	fs.IntVar(&cfg.MaxIdleCommands, "max-idle-commands", 20, "close a session after this many commands without progress (SMTP: outside a transaction, since the last message received (whatever its answer) or AUTH; IMAP: before login); -1: no limit")
	fs.IntVar(&a.hashConcurrency, "auth-hash-concurrency", goruntime.NumCPU(), "password hashes computed at once (SMTP AUTH, IMAP LOGIN)")
	fs.IntVar(&a.hashQueue, "auth-hash-queue", 0, "attempts that may wait for a hashing slot (≤ 10 s); more → 454 4.7.0 / NO [UNAVAILABLE]; 0: 4× --auth-hash-concurrency, -1: none")
	fs.IntVar(&a.lockoutAfter, "auth-lockout-after", 10, "failed authentications from one IP within 15 min that lock it out")
	fs.DurationVar(&a.lockout, "auth-lockout", 15*time.Minute, "how long a client IP stays locked out")
	fs.DurationVar(&a.maxDelay, "auth-max-delay", 8*time.Second, "cap of the delay (doubling from 250 ms per failure of the IP) before a client's next attempt")
}

// guard builds the one authguard.Guard of the process, its metrics
// registered with rt's registry.
func (a *abuseFlags) guard(rt *runtime) *authguard.Guard {
	th := authguard.NewThrottle(authguard.Policy{LockoutAfter: a.lockoutAfter, Lockout: a.lockout, MaxDelay: a.maxDelay})
	return &authguard.Guard{Throttle: th, Gate: authguard.NewGate(a.hashConcurrency, a.hashQueue, 0),
		Logger: rt.log, Metrics: authmetrics.New(rt.reg)}
}
