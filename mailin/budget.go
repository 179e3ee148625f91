package mailin

import (
	"context"
	"io"
	"sync"
	"time"

	"github.com/emersion/go-smtp"
)

// Defaults of the in-flight budget (issue 17 §2): message bytes being
// received or analysed at once, across all sessions.
const (
	DefaultMaxInFlightBytes = 128 << 20
	DefaultInFlightWait     = 30 * time.Second
)

// ErrBusy is the reply to DATA when the in-flight budget stays exhausted
// for longer than the wait (RFC 3463 4.3.2: system not accepting network
// messages); the client retries later, nothing was stored.
var ErrBusy = &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 2}, Message: "Too much mail in flight; try again later"}

// byteBudget is a counting semaphore over bytes: acquire blocks until n
// bytes are free (or ctx ends), release returns them. Waiters are woken
// on every release.
type byteBudget struct {
	mu      sync.Mutex
	free    int64
	changed chan struct{} // closed and replaced on each release
}

func newByteBudget(n int64) *byteBudget {
	return &byteBudget{free: n, changed: make(chan struct{})}
}

func (b *byteBudget) acquire(ctx context.Context, n int64) error {
	for {
		b.mu.Lock()
		if b.free >= n {
			b.free -= n
			b.mu.Unlock()
			return nil
		}
		ch := b.changed
		b.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (b *byteBudget) tryAcquire(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.free < n {
		return false
	}
	b.free -= n
	return true
}

func (b *byteBudget) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.free += n
	close(b.changed)
	b.changed = make(chan struct{})
	b.mu.Unlock()
}

// available is for tests: bytes free now.
func (b *byteBudget) available() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.free
}

// readBudgeted reads r to its end into buf, taking each chunk's size from
// budget before keeping it and waiting at most wait in all (from the first
// wait) for room; wait ≤ 0 does not wait. It returns the bytes taken (to
// release when the message is done, also on error) and ErrBusy when the
// budget stayed full.
func readBudgeted(ctx context.Context, budget *byteBudget, wait time.Duration, buf io.Writer, r io.Reader) (taken int64, err error) {
	var chunk [32 << 10]byte
	var wctx context.Context // set on the first wait
	for {
		n, rerr := r.Read(chunk[:])
		if n > 0 {
			if !budget.tryAcquire(int64(n)) {
				if wait <= 0 {
					return taken, ErrBusy
				}
				if wctx == nil {
					var cancel context.CancelFunc
					wctx, cancel = context.WithTimeout(ctx, wait)
					defer cancel()
				}
				if budget.acquire(wctx, int64(n)) != nil {
					return taken, ErrBusy
				}
			}
			taken += int64(n)
			buf.Write(chunk[:n])
		}
		if rerr == io.EOF {
			return taken, nil
		}
		if rerr != nil {
			return taken, rerr
		}
	}
}
