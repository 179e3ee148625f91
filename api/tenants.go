package api

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/envelopd/envelopd/store"
)

// TenantLimits bound what one API key (one tenant) may use at once, so
// that no key can slow another down: its request rate (a token bucket:
// RequestsPerSecond, bursts of Burst) and its open websockets. Zero
// fields take the defaults.
type TenantLimits struct {
	RequestsPerSecond float64 // default 1,000
	Burst             int     // default 2,000
	Websockets        int     // open websockets of one key; default 16
	// RefusalDelay holds the answer to a request whose authentication
	// failed (401) or was refused (429: its address locked out, or the
	// global budget of failures spent) about that long, at most Tarpit
	// such answers at once (beyond, they are answered at once). The
	// failure is counted before the hold, so attempts in flight still
	// count; what is held is only the answer, at the cost of a sleeping
	// goroutine and a timer, never of a valid key's time. A stranger
	// looping on the API, with or without a key, is slowed to about one
	// request a RefusalDelay per connection — a hundred of them to a
	// hundred requests a second, not thousands of failed key lookups
	// before their lockouts. Each hold is drawn uniformly from ½ to 1½
	// RefusalDelay, so that clients refused together do not all come
	// back together. Defaults 1 s and 1,024.
	RefusalDelay time.Duration
	Tarpit       int
}

// DefaultTenantLimits are the limits of a zero TenantLimits.
var DefaultTenantLimits = TenantLimits{RequestsPerSecond: 1000, Burst: 2000, Websockets: 16, RefusalDelay: time.Second, Tarpit: 1024}

// ErrKeyRevoked ends what a key had open (websockets, MCP requests) when
// the key is revoked or deleted.
var ErrKeyRevoked = errors.New("api: API key revoked")

// Tenants holds the per-key state every front end that takes API keys
// shares (the API, its websocket, MCP over HTTP): the request buckets,
// the count of open websockets, and the watch that ends a revoked key's
// long-lived requests. A key is checked at the start of every request;
// a websocket or an MCP request that outlives that check is watched:
// every WatchEvery, the keys with something open are read again, and a
// revoked (or deleted) key's contexts are cancelled with ErrKeyRevoked —
// revocation takes effect everywhere within WatchEvery. Memory is
// bounded by the keys, which only the operator makes.
type Tenants struct {
	keys   KeyStore
	limits TenantLimits
	// WatchEvery is how often watched keys are read again (default 500 ms).
	WatchEvery time.Duration

	mu       sync.Mutex
	buckets  map[string]*rate.Limiter
	sockets  map[string]int
	watched  map[string]map[*watch]struct{}
	watching bool
	tarpit   chan struct{}
}

type watch struct{ cancel context.CancelCauseFunc }

// NewTenants returns the per-key state over keys with limits l (zero
// fields: DefaultTenantLimits).
func NewTenants(keys KeyStore, l TenantLimits) *Tenants {
	d := DefaultTenantLimits
	if l.RequestsPerSecond > 0 {
		d.RequestsPerSecond = l.RequestsPerSecond
	}
	if l.Burst > 0 {
		d.Burst = l.Burst
	}
	if l.Websockets > 0 {
		d.Websockets = l.Websockets
	}
	if l.RefusalDelay != 0 {
		d.RefusalDelay = max(0, l.RefusalDelay) // < 0: none
	}
	if l.Tarpit > 0 {
		d.Tarpit = l.Tarpit
	}
	return &Tenants{keys: keys, limits: d, buckets: map[string]*rate.Limiter{}, sockets: map[string]int{},
		watched: map[string]map[*watch]struct{}{}, tarpit: make(chan struct{}, d.Tarpit)}
}

// Refused holds e, the answer of Authenticate to a request whose
// authentication failed (401) or was refused (429), about RefusalDelay
// (see TenantLimits) when a tarpit slot is free, or returns at once.
// Other answers (a store failure: 500) are not held.
func (t *Tenants) Refused(ctx context.Context, e *Error) {
	if e == nil || e.Status != http.StatusUnauthorized && e.Status != http.StatusTooManyRequests {
		return
	}
	if t.limits.RefusalDelay <= 0 {
		return
	}
	select {
	case t.tarpit <- struct{}{}:
	default:
		return
	}
	defer func() { <-t.tarpit }()
	tm := time.NewTimer(t.hold())
	defer tm.Stop()
	select {
	case <-tm.C:
	case <-ctx.Done():
	}
}

// Held is the number of answers being held now (see Refused).
func (t *Tenants) Held() int { return len(t.tarpit) }

// hold is how long one refusal is held: uniformly from ½ to 1½
// RefusalDelay.
func (t *Tenants) hold() time.Duration {
	d := t.limits.RefusalDelay
	return d/2 + rand.N(d)
}

// Limits are the effective limits.
func (t *Tenants) Limits() TenantLimits { return t.limits }

// Allow takes one request of key from its bucket; a refusal is the 429
// to answer.
func (t *Tenants) Allow(key string) *Error {
	t.mu.Lock()
	b := t.buckets[key]
	if b == nil {
		b = rate.NewLimiter(rate.Limit(t.limits.RequestsPerSecond), t.limits.Burst)
		t.buckets[key] = b
	}
	t.mu.Unlock()
	if b.Allow() {
		return nil
	}
	return &Error{Status: http.StatusTooManyRequests, Name: "RateLimitError", RetryAfter: 1,
		Message: fmt.Sprintf("this API key's request rate is over %g a second", t.limits.RequestsPerSecond)}
}

// OpenSocket counts an open websocket of key; release uncounts it. A
// key with Websockets open already is refused (the 429 to answer).
func (t *Tenants) OpenSocket(key string) (release func(), e *Error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sockets[key] >= t.limits.Websockets {
		return nil, &Error{Status: http.StatusTooManyRequests, Name: "RateLimitError", RetryAfter: 1,
			Message: fmt.Sprintf("this API key has %d websockets open already", t.limits.Websockets)}
	}
	t.sockets[key]++
	var once sync.Once
	return func() {
		once.Do(func() {
			t.mu.Lock()
			defer t.mu.Unlock()
			if t.sockets[key]--; t.sockets[key] <= 0 {
				delete(t.sockets, key)
			}
		})
	}, nil
}

// Watch returns a context derived from ctx that is cancelled, with
// cause ErrKeyRevoked, within WatchEvery of key's revocation; stop ends
// the watch (call it when the request ends).
func (t *Tenants) Watch(ctx context.Context, key string) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	w := &watch{cancel: cancel}
	t.mu.Lock()
	m := t.watched[key]
	if m == nil {
		m = map[*watch]struct{}{}
		t.watched[key] = m
	}
	m[w] = struct{}{}
	if !t.watching {
		t.watching = true
		go t.watchLoop()
	}
	t.mu.Unlock()
	return ctx, func() {
		t.mu.Lock()
		if m := t.watched[key]; m != nil {
			delete(m, w)
			if len(m) == 0 {
				delete(t.watched, key)
			}
		}
		t.mu.Unlock()
		cancel(context.Canceled)
	}
}

// watchLoop reads the watched keys again every WatchEvery while any is
// watched, and ends the contexts of those revoked or gone.
func (t *Tenants) watchLoop() {
	every := t.WatchEvery
	if every <= 0 {
		every = 500 * time.Millisecond
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for range tick.C {
		t.mu.Lock()
		if len(t.watched) == 0 {
			t.watching = false
			t.mu.Unlock()
			return
		}
		keys := make([]string, 0, len(t.watched))
		for k := range t.watched {
			keys = append(keys, k)
		}
		t.mu.Unlock()
		for _, k := range keys {
			ctx, cancel := context.WithTimeout(context.Background(), every)
			sk, err := t.keys.APIKeyByID(ctx, k)
			cancel()
			switch {
			case errors.Is(err, store.ErrNotFound), err == nil && sk.RevokedAt != nil:
			default:
				continue // valid, or the store failed this once
			}
			t.mu.Lock()
			for w := range t.watched[k] {
				w.cancel(ErrKeyRevoked)
			}
			delete(t.watched, k)
			t.mu.Unlock()
		}
	}
}

// Watched reports whether anything of key is being watched.
func (t *Tenants) Watched(key string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.watched[key]) > 0
}
