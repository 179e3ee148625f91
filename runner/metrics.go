package runner

import (
	"slices"
	"sync"
	"sync/atomic"
)

// Counters are one worker's outcomes since the process started.
type Counters struct {
	Claimed   atomic.Int64 // jobs claimed (leased)
	Succeeded atomic.Int64 // attempts settled done
	Retried   atomic.Int64 // attempts settled pending again, after a backoff
	Dropped   atomic.Int64 // attempts settled failed for good
	Released  atomic.Int64 // claims given back unattempted
}

func (c *Counters) add(o Outcome) {
	if c == nil {
		return
	}
	switch o {
	case Succeeded:
		c.Succeeded.Add(1)
	case Retried:
		c.Retried.Add(1)
	case Dropped:
		c.Dropped.Add(1)
	case Released:
		c.Released.Add(1)
	}
}

// Metrics holds the Counters of every worker of a process, by name. It
// depends on no metrics library: cmd/envelopd exports Snapshot (as
// envelopd_worker_jobs_total{worker,outcome}). The zero value is ready;
// a nil *Metrics counts nothing.
type Metrics struct {
	mu sync.Mutex
	m  map[string]*Counters
}

// For returns name's counters, created on first use (nil for a nil m).
func (m *Metrics) For(name string) *Counters {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = map[string]*Counters{}
	}
	c := m.m[name]
	if c == nil {
		c = &Counters{}
		m.m[name] = c
	}
	return c
}

// Count is one counter's value in a Snapshot.
type Count struct {
	Worker  string // the Loop's Name
	Outcome string // claimed, succeeded, retried, dropped, released
	Value   int64
}

// Snapshot returns every counter, by worker name then outcome.
func (m *Metrics) Snapshot() []Count {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	names := make([]string, 0, len(m.m))
	for n := range m.m {
		names = append(names, n)
	}
	cs := make([]*Counters, len(names))
	slices.Sort(names)
	for i, n := range names {
		cs[i] = m.m[n]
	}
	m.mu.Unlock()
	var out []Count
	for i, n := range names {
		c := cs[i]
		out = append(out,
			Count{n, "claimed", c.Claimed.Load()},
			Count{n, "succeeded", c.Succeeded.Load()},
			Count{n, "retried", c.Retried.Load()},
			Count{n, "dropped", c.Dropped.Load()},
			Count{n, "released", c.Released.Load()})
	}
	return out
}
