package mailout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/envelopd/envelopd/runner"
	"github.com/envelopd/envelopd/store"
)

// Sender delivers one message to some recipients; *Submitter is one.
type Sender interface {
	Submit(ctx context.Context, from string, rcpts []string, raw []byte) []RcptResult
}

// Worker delivers the outbound queue kept in the store. Each pass claims the
// due recipients (ClaimDue records the attempt before the try, so a crash
// neither loses nor repeats work beyond one lease), sends each queue entry's
// due recipients in one transaction, and records every recipient's outcome:
// sent; failed at once on a permanent error (5xx); pending with exponential
// backoff and jitter on a temporary one (4xx, network), until the entry's
// Expires, after which it is failed (RFC 5321 section 4.5.4.1: retry, then
// give up).
type Worker struct {
	Store  store.OutboundQueue
	Sender Sender
	// Now is the clock (default time.Now); tests inject one.
	Now func() time.Time
	// Jitter returns a number in [0, 1) (default math/rand/v2.Float64).
	Jitter func() float64
	// Initial is the backoff before the first retry (default 1 min; with
	// jitter the first retry comes within it); each retry doubles it, up to
	// Max (default 1 h).
	Initial, Max time.Duration
	// Lease is how long a claimed recipient is hidden from other workers
	// (default 15 min, longer than a submission can take): after a crash
	// mid-attempt the recipient is tried again when it ends.
	Lease time.Duration
	// SubmitTimeout, when set, bounds one submission (the Sender's context
	// ends then, and the attempt counts as a temporary failure); a Lease
	// longer than it keeps a slow attempt from overlapping its retry.
	SubmitTimeout time.Duration
	// Batch is how many recipients one claim takes (default 100), and
	// Parallel how many queue entries are sent at once (default 4).
	Batch, Parallel int
	// Interval is how long Run waits when the queue is idle (default
	// 15 s); a value on Wake makes it look at once.
	Interval time.Duration
	Wake     <-chan struct{}
	// Metrics, when set, counts the worker's claims and outcomes as
	// "queue".
	Metrics *runner.Metrics
	Logger  *slog.Logger
}

func (w *Worker) now() time.Time {
	if w.Now != nil {
		return w.Now()
	}
	return time.Now()
}

func (w *Worker) logger() *slog.Logger {
	if w.Logger != nil {
		return w.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// Backoff is the delay after the attempt-th failed attempt (1-based):
// Initial·2^(attempt−1) capped at Max, then scaled by a jitter factor in
// [0.5, 1) so that retries of many messages spread out (runner.Backoff).
func (w *Worker) Backoff(attempt int) time.Duration {
	b := runner.Backoff{Initial: w.Initial, Max: w.Max, Jitter: 0.5, Rand: w.Jitter}
	return b.Or(time.Minute, time.Hour).Delay(attempt)
}

// loop is the runner over w's queue entries; q counts the recipients its
// claims took.
func (w *Worker) loop(q *queueJobs) *runner.Loop[[]store.Due] {
	batch := w.Batch
	if batch <= 0 {
		batch = 100
	}
	par := w.Parallel
	if par <= 0 {
		par = 4
	}
	wake := w.Wake
	return &runner.Loop[[]store.Due]{Name: "queue", Worker: q, Batch: batch, Parallel: par,
		Interval: orDefault(w.Interval, 15*time.Second), Wake: func() <-chan struct{} { return wake },
		Now: w.Now, Metrics: w.Metrics, Logger: w.Logger}
}

// Run delivers until ctx ends; it returns nil on cancellation.
func (w *Worker) Run(ctx context.Context) error {
	if w.Store == nil || w.Sender == nil {
		return errors.New("mailout: worker needs a Store and a Sender")
	}
	w.loop(&queueJobs{w: w}).Run(ctx)
	return nil
}

// RunOnce delivers everything due now and returns how many recipient
// attempts it made.
func (w *Worker) RunOnce(ctx context.Context) (int, error) {
	if w.Store == nil || w.Sender == nil {
		return 0, errors.New("mailout: worker needs a Store and a Sender")
	}
	q := &queueJobs{w: w}
	l := w.loop(q)
	total := 0
	for ctx.Err() == nil {
		q.rcpts = 0
		_, _, err := l.Once(ctx)
		total += q.rcpts
		if err != nil {
			return total, err
		}
		if q.rcpts < l.Batch {
			break
		}
	}
	return total, nil
}

// QueueNotifier tells of commits that may have queued mail
// (store.OutboundQueue has it).
type QueueNotifier interface {
	QueueChanged() <-chan struct{}
}

// WakeOnQueue returns a loop that sends on wake (a Worker's Wake)
// whenever st commits queued mail (on Postgres: on any node, NOTIFY),
// until ctx ends, so that the worker looks at once instead of at its next
// Interval.
func WakeOnQueue(c QueueNotifier, wake chan<- struct{}) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		for {
			select {
			case <-c.QueueChanged():
			case <-ctx.Done():
				return nil
			}
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	}
}

// queueJobs is the queue as a runner.Worker: a job is one queue entry's
// claimed recipients, sent in one transaction.
type queueJobs struct {
	w     *Worker
	rcpts int // recipients claimed by the last Claim
}

// Claim takes the due recipients (ClaimDue records the attempt before
// the try) and groups them by queue entry, oldest entry first.
func (q *queueJobs) Claim(ctx context.Context, now time.Time, limit int) ([][]store.Due, error) {
	due, err := q.w.Store.ClaimDue(ctx, now, orDefault(q.w.Lease, 15*time.Minute), limit)
	if err != nil {
		return nil, fmt.Errorf("mailout: claim due: %w", err)
	}
	q.rcpts = len(due)
	groups := map[int64][]store.Due{}
	var ids []int64
	for _, d := range due {
		if _, ok := groups[d.QueueID]; !ok {
			ids = append(ids, d.QueueID)
		}
		groups[d.QueueID] = append(groups[d.QueueID], d)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	out := make([][]store.Due, len(ids))
	for i, id := range ids {
		out[i] = groups[id]
	}
	return out, nil
}

// Attempt sends one entry to its claimed recipients and records each
// recipient's outcome; the entry is Retried when one of them is pending
// again, Dropped when one failed for good and none is pending.
func (q *queueJobs) Attempt(ctx context.Context, g []store.Due) (runner.Outcome, error) {
	return q.w.deliverEntry(ctx, g)
}

func (w *Worker) deliverEntry(ctx context.Context, g []store.Due) (runner.Outcome, error) {
	rcpts := make([]string, len(g))
	for i, d := range g {
		rcpts[i] = d.Rcpt
	}
	sctx := ctx
	if w.SubmitTimeout > 0 {
		var cancel context.CancelFunc
		sctx, cancel = context.WithTimeout(ctx, w.SubmitTimeout)
		defer cancel()
	}
	res := w.Sender.Submit(sctx, g[0].From, rcpts, g[0].Raw)
	now := w.now()
	// Record outcomes even when ctx was cancelled during the try: the
	// attempt happened.
	rctx := context.WithoutCancel(ctx)
	var errs []error
	o := runner.Succeeded
	for i, d := range g {
		var err error
		if i < len(res) {
			err = res[i].Err
		} else {
			err = &SendError{Stage: "submit", Err: errors.New("sender returned no result")}
		}
		state, lastErr, next := w.outcome(d, err, now)
		switch {
		case state == store.QueuePending:
			o = runner.Retried
		case state == store.QueueFailed && o == runner.Succeeded:
			o = runner.Dropped
		}
		w.logger().Info("outbound delivery", "queue_id", d.QueueID, "rcpt", d.Rcpt,
			"state", state, "attempts", d.Attempts, "next_attempt_at", next, "err", lastErr)
		if err := w.Store.RecordDelivery(rctx, d.QueueID, d.Rcpt, state, lastErr, next); err != nil {
			errs = append(errs, fmt.Errorf("mailout: record delivery %d <%s>: %w", d.QueueID, d.Rcpt, err))
		}
	}
	return o, errors.Join(errs...)
}

// outcome decides a recipient's new state after an attempt.
func (w *Worker) outcome(d store.Due, err error, now time.Time) (state, lastErr string, next time.Time) {
	if err == nil {
		return store.QueueSent, "", time.Time{}
	}
	if IsPermanent(err) {
		return store.QueueFailed, err.Error(), time.Time{}
	}
	if !d.Expires.IsZero() && !now.Before(d.Expires) {
		return store.QueueFailed, fmt.Sprintf("gave up after %d attempts: %v", d.Attempts, err), time.Time{}
	}
	next = now.Add(w.Backoff(max(d.Attempts, 1)))
	if !d.Expires.IsZero() {
		// The store fails entries at their expiry without another try, so
		// the last try comes a second before it.
		last := d.Expires.Add(-time.Second)
		if next.After(last) {
			if !last.After(now) {
				return store.QueueFailed, fmt.Sprintf("gave up after %d attempts: %v", d.Attempts, err), time.Time{}
			}
			next = last
		}
	}
	return store.QueuePending, err.Error(), next
}
