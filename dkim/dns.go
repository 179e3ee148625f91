package dkim

import (
	"context"
	"net"
	"sync"
	"time"
)

// maxCacheEntries bounds the DNSResolver cache.
const maxCacheEntries = 4096

// DNSResolver looks keys up in the real DNS through a net.Resolver, with a
// timeout per lookup and a small cache: answers and "no such record" are
// kept for the TTL (negative caching, RFC 2308 in spirit), temporary
// failures are never cached. It is safe for concurrent use.
type DNSResolver struct {
	timeout time.Duration
	ttl     time.Duration

	// lookup and now are net.Resolver.LookupTXT and time.Now, replaced by
	// tests.
	lookup func(ctx context.Context, name string) ([]string, error)
	now    func() time.Time

	mu    sync.Mutex
	cache map[string]cacheEntry
}

type cacheEntry struct {
	txts    []string
	err     error // a permanent *LookupError, or nil
	expires time.Time
}

// NewDNSResolver returns a resolver using the system's DNS configuration.
// timeout bounds each lookup (0 means 10 s); ttl is how long answers,
// including "not found", are cached (0 disables the cache).
func NewDNSResolver(timeout, ttl time.Duration) *DNSResolver {
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	return &DNSResolver{
		timeout: timeout,
		ttl:     ttl,
		lookup:  (&net.Resolver{}).LookupTXT,
		now:     time.Now,
		cache:   make(map[string]cacheEntry),
	}
}

// LookupTXT implements Resolver.
func (r *DNSResolver) LookupTXT(ctx context.Context, name string) ([]string, error) {
	key := normName(name)
	if txts, err, ok := r.cached(key); ok {
		return txts, err
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	txts, err := r.lookup(ctx, key)
	if err != nil {
		le := classify(name, err)
		if !le.Temp {
			r.store(key, nil, le)
		}
		return nil, le
	}
	r.store(key, txts, nil)
	return append([]string(nil), txts...), nil
}

func (r *DNSResolver) cached(key string) ([]string, error, bool) {
	if r.ttl <= 0 {
		return nil, nil, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.cache[key]
	if !ok || !r.now().Before(e.expires) {
		return nil, nil, false
	}
	if e.err != nil {
		return nil, e.err, true
	}
	return append([]string(nil), e.txts...), nil, true
}

func (r *DNSResolver) store(key string, txts []string, err error) {
	if r.ttl <= 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if len(r.cache) >= maxCacheEntries {
		for k, e := range r.cache {
			if !now.Before(e.expires) {
				delete(r.cache, k)
			}
		}
		for k := range r.cache {
			if len(r.cache) < maxCacheEntries {
				break
			}
			delete(r.cache, k)
		}
	}
	r.cache[key] = cacheEntry{txts: append([]string(nil), txts...), err: err, expires: now.Add(r.ttl)}
}
