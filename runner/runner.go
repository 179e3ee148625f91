// Package runner owns the loop every durable worker of envelopd runs:
// wake (on a commit signal or a timer) → claim a batch of due rows with a
// lease → attempt each, a bounded number at once → settle each in the
// store (done, retried after a backoff, dropped, or given back) → claim
// again. The rows, the claim SQL and the settle SQL stay in package
// store; a worker (the outbound queue, the agent hand-off, webhook
// deliveries, payment checks, courtesy OOPS) implements the small Worker
// interface over them, and a Loop runs it.
//
// A lease makes the claim safe across processes (nodes sharing a store)
// and crashes: a claimed row is hidden until its lease ends, so a worker
// killed mid-attempt leaves it to be tried again (at least once). On
// context cancel a Loop starts nothing new, gives unstarted claims back
// (Releaser) and waits for the attempts in flight.
//
// One Backoff policy (exponential with a cap and jitter, RFC 5321
// section 4.5.4.1's "retry, then give up" shape) and one set of counters
// per worker name (Metrics: claimed, succeeded, retried, dropped,
// released), without Prometheus so that packages agents import stay
// light: cmd/envelopd exports them.
package runner

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"
)

// Worker is one kind of durable job J (a claimed row).
type Worker[J any] interface {
	// Claim leases up to limit jobs due at now (limit ≥ 1). Fewer than
	// limit (or none) means nothing more is due now.
	Claim(ctx context.Context, now time.Time, limit int) ([]J, error)
	// Attempt tries one claimed job and settles it in the store; it
	// returns what happened to the job, and an error when settling
	// failed (the job is then tried again when its lease ends).
	Attempt(ctx context.Context, j J) (Outcome, error)
}

// Releaser is a Worker that gives claimed but unattempted jobs back,
// due at once, so that a stopping worker's claims need not wait out
// their lease.
type Releaser[J any] interface {
	Release(ctx context.Context, jobs []J)
}

// Outcome is what one attempt did to its job.
type Outcome int

const (
	Succeeded Outcome = iota // settled done
	Retried                  // settled pending again, after a backoff
	Dropped                  // settled failed for good (permanent error, given up)
	Released                 // given back unattempted (a budget): no attempt counted
)

func (o Outcome) String() string {
	switch o {
	case Succeeded:
		return "succeeded"
	case Retried:
		return "retried"
	case Dropped:
		return "dropped"
	case Released:
		return "released"
	}
	return "unknown"
}

// Loop runs a Worker. Zero fields take the defaults.
type Loop[J any] struct {
	// Name names the worker in logs and Metrics ("queue", "handoff_exec", …).
	Name   string
	Worker Worker[J]
	// Batch is the most jobs claimed and not yet settled at once
	// (default 16); Parallel the most attempts in flight (default 1:
	// attempts in claim order).
	Batch, Parallel int
	// Interval is how long an idle loop waits before it claims again
	// (default 1 s).
	Interval time.Duration
	// Wake, when set, returns a channel that receives (or is closed)
	// when new work may be due, such as a commit; it is called before
	// each claim, so a commit after it is never missed.
	Wake func() <-chan struct{}
	// Now is the clock (default time.Now), After the timer (default a
	// time.Timer); tests inject both.
	Now   func() time.Time
	After func(time.Duration) <-chan time.Time
	// Metrics, when set, counts the worker's outcomes under Name.
	Metrics *Metrics
	Logger  *slog.Logger
}

func (l *Loop[J]) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}

func (l *Loop[J]) log() *slog.Logger {
	if l.Logger != nil {
		return l.Logger
	}
	return slog.New(slog.DiscardHandler)
}

func (l *Loop[J]) batch() int {
	if l.Batch > 0 {
		return l.Batch
	}
	return 16
}

func (l *Loop[J]) parallel() int {
	if l.Parallel > 0 {
		return l.Parallel
	}
	return 1
}

func (l *Loop[J]) counters() *Counters {
	if l.Metrics == nil {
		return nil
	}
	return l.Metrics.For(l.Name)
}

// result is one finished attempt.
type result struct {
	o   Outcome
	err error
}

// attempt runs one job and counts its outcome.
func (l *Loop[J]) attempt(ctx context.Context, j J) result {
	o, err := l.Worker.Attempt(ctx, j)
	l.counters().add(o)
	return result{o, err}
}

func (l *Loop[J]) claim(ctx context.Context, limit int) ([]J, error) {
	js, err := l.Worker.Claim(ctx, l.now(), limit)
	if c := l.counters(); c != nil && len(js) > 0 {
		c.Claimed.Add(int64(len(js)))
	}
	return js, err
}

func (l *Loop[J]) release(ctx context.Context, js []J) {
	if len(js) == 0 {
		return
	}
	if r, ok := l.Worker.(Releaser[J]); ok {
		r.Release(context.WithoutCancel(ctx), js)
		if c := l.counters(); c != nil {
			c.Released.Add(int64(len(js)))
		}
	}
}

func (l *Loop[J]) after(d time.Duration) (<-chan time.Time, func()) {
	if l.After != nil {
		return l.After(d), func() {}
	}
	t := time.NewTimer(d)
	return t.C, func() { t.Stop() }
}

// Run claims and attempts until ctx ends; it then gives unstarted claims
// back, waits for the attempts in flight and returns ctx.Err().
//
// It claims when started, when woken, when the timer fires and when an
// attempt ends that was not given back (its row may have held others
// back, such as a webhook's next event, and the next batch may be due),
// and only while no claimed job waits to start and an attempt slot is
// free. A batch given back whole (Released: a budget) waits for the
// timer or a wake, so a flood costs one claim per Interval, not a claim
// of every waiting row.
func (l *Loop[J]) Run(ctx context.Context) error {
	interval := l.Interval
	if interval <= 0 {
		interval = time.Second
	}
	batch, parallel := l.batch(), l.parallel()
	finished := make(chan result, parallel)
	var pending []J
	inflight := 0
	want := true
	for {
		var wake <-chan struct{}
		if l.Wake != nil {
			wake = l.Wake() // taken before looking, so no commit is missed
		}
		if want && len(pending) == 0 && inflight < parallel && ctx.Err() == nil {
			want = false
			// Not cut short by cancellation: a claim committed but
			// reported as cancelled would hide its jobs for the whole
			// lease. Claimed jobs not started when ctx ends are given
			// back below.
			js, err := l.claim(context.WithoutCancel(ctx), batch-inflight)
			if err != nil && ctx.Err() == nil {
				l.log().Error("claim", "worker", l.Name, "err", err)
			}
			pending = js
		}
		for len(pending) > 0 && inflight < parallel && ctx.Err() == nil {
			j := pending[0]
			pending = pending[1:]
			inflight++
			go func() { finished <- l.attempt(ctx, j) }()
		}
		timer, stop := l.after(interval)
		select {
		case <-ctx.Done():
			stop()
			l.release(ctx, pending)
			for ; inflight > 0; inflight-- {
				l.report(<-finished)
			}
			return ctx.Err()
		case r := <-finished:
			stop()
			inflight--
			l.report(r)
			if r.o != Released {
				want = true
			}
		case <-wake:
			stop()
			want = true
		case <-timer:
			want = true
		}
	}
}

// report logs a settle that failed.
func (l *Loop[J]) report(r result) {
	if r.err != nil {
		l.log().Error("settle", "worker", l.Name, "outcome", r.o.String(), "err", r.err)
	}
}

// Once claims one batch, attempts it (Parallel at once) and returns how
// many attempts it started and how many jobs it claimed. When ctx ends
// before every job has started, the rest are given back (Releaser) and
// ctx.Err() is returned; settle errors are joined.
func (l *Loop[J]) Once(ctx context.Context) (tried, claimed int, err error) {
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	// A claim committed but reported as cancelled would hide its jobs
	// for the whole lease: the claim itself is not cut short.
	js, err := l.claim(context.WithoutCancel(ctx), l.batch())
	if err != nil {
		return 0, 0, err
	}
	sem := make(chan struct{}, l.parallel())
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for i, j := range js {
		sem <- struct{}{}
		if ctx.Err() != nil {
			<-sem
			l.release(ctx, js[i:])
			errs = append(errs, ctx.Err())
			break
		}
		tried++
		wg.Go(func() {
			defer func() { <-sem }()
			if r := l.attempt(ctx, j); r.err != nil {
				mu.Lock()
				errs = append(errs, r.err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return tried, len(js), errors.Join(errs...)
}

// Backoff is the retry policy of a worker: the delay after the n-th
// failed attempt (1-based) is Initial·2^(n−1), capped at Max, of which the
// fraction Jitter is drawn at random so that the retries of many jobs
// spread out: the delay is d·(1 − Jitter + Jitter·r), r in [0, 1).
type Backoff struct {
	Initial, Max time.Duration
	// Jitter is in [0, 1]; 0 is none (the exact doubling).
	Jitter float64
	// Rand returns r in [0, 1) (default math/rand/v2.Float64); a value
	// out of range counts as 0.
	Rand func() float64
}

// Or is b with an unset (zero or negative) Initial or Max replaced by
// initial or max: the policy of a worker whose settings may be left out.
func (b Backoff) Or(initial, max time.Duration) Backoff {
	if b.Initial <= 0 {
		b.Initial = initial
	}
	if b.Max <= 0 {
		b.Max = max
	}
	return b
}

// Delay is the wait after the n-th failed attempt (n < 1 counts as 1).
func (b Backoff) Delay(n int) time.Duration {
	d := b.Initial
	for i := 1; i < n && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	if b.Jitter <= 0 {
		return d
	}
	rnd := rand.Float64
	if b.Rand != nil {
		rnd = b.Rand
	}
	r := rnd()
	if r < 0 || r >= 1 {
		r = 0
	}
	j := min(b.Jitter, 1)
	return time.Duration(float64(d) * (1 - j + j*r))
}
