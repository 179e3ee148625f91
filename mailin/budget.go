package mailin

import (
	"bytes"
	"context"
	"io"
	"sync"
	"time"

	"github.com/emersion/go-smtp"
)

// Defaults of the in-flight budget: message bytes being
// received or analysed at once, across all sessions.
const (
	DefaultMaxInFlightBytes = 128 << 20
	DefaultInFlightWait     = time.Minute
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

// readBudgeted reads r to its end into buf under the in-flight budget and
// returns the bytes it holds (to release when the message is done, also on
// error), or ErrBusy.
//
// A session waits only while it holds nothing, so sessions never wait on
// each other while holding bytes (no hold-and-wait, no deadlock): with
// declared > 0 (the SIZE the client announced in MAIL FROM, RFC 1870; at
// most the largest message) it reserves that much before reading, waiting
// up to wait for it; otherwise its first chunk may wait. Once it holds
// bytes, a chunk that does not fit is ErrBusy at once. wait ≤ 0 never
// waits. What a reservation did not use is returned when the data ends.
func readBudgeted(ctx context.Context, budget *byteBudget, wait time.Duration, declared int64, buf *bytes.Buffer, r io.Reader) (held int64, err error) {
	take := func(n int64) error {
		if budget.tryAcquire(n) {
			return nil
		}
		if held > 0 || wait <= 0 {
			return ErrBusy
		}
		wctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		if budget.acquire(wctx, n) != nil {
			return ErrBusy
		}
		return nil
	}
	if declared > 0 {
		if err := take(declared); err != nil {
			return 0, err
		}
		held = declared
		if declared <= 64<<20 {
			buf.Grow(int(declared)) // no doubling past the size announced
		}
	}
	var used int64
	const chunk = 32 << 10
	// Past segment bytes without a SIZE, a full buffer is set aside and
	// the next one starts empty, rather than buf doubling: a DATA that
	// ends over the limit then never held more than the limit (doubling
	// holds the old array beside one twice its size), and one that is
	// stored is joined once at its end.
	const segment = 1 << 20
	var full [][]byte
	for {
		// Read straight into buf's spare room (a 32 KiB array here
		// escaped to the heap: one allocation per message), at most a
		// chunk beyond what the budget covers.
		if buf.Available() < 4<<10 {
			if buf.Cap() >= segment {
				full = append(full, buf.Bytes())
				*buf = *bytes.NewBuffer(make([]byte, 0, segment))
			} else {
				buf.Grow(chunk)
			}
		}
		spare := buf.AvailableBuffer()
		spare = spare[:min(cap(spare), chunk)]
		n, rerr := r.Read(spare)
		if n > 0 {
			if need := used + int64(n) - held; need > 0 {
				if err := take(need); err != nil {
					return held, err
				}
				held += need
			}
			used += int64(n)
			buf.Write(spare[:n]) // in place
		}
		if rerr == io.EOF {
			budget.release(held - used)
			if full != nil {
				all := make([]byte, 0, used)
				for _, b := range full {
					all = append(all, b...)
				}
				*buf = *bytes.NewBuffer(append(all, buf.Bytes()...))
			}
			return used, nil
		}
		if rerr != nil {
			return held, rerr
		}
	}
}
