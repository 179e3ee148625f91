// Package connlimit bounds the connections a TCP front end accepts: a
// global cap, a cap per client IP (IPv6 per /64), and an optional rate of
// new connections per IP (a token bucket). A refused client gets one line
// (SMTP "421 4.7.0 …", RFC 5321 §3.8; IMAP "* BYE …", RFC 9051 §7.1.5)
// and is closed (one address must not take every slot).
package connlimit

import (
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/envelopd/envelopd/authguard"
)

// Reason says why a connection was refused.
type Reason string

// Refusal reasons; also the label values of a metric.
const (
	TooMany       Reason = "max_connections"
	TooManyFromIP Reason = "max_connections_per_ip"
	TooFast       Reason = "max_conn_rate"
)

// Listener accepts connections within its limits. Accept returns *Conn.
type Listener struct {
	net.Listener
	Max   int     // concurrent connections in all; ≤ 0: no limit
	PerIP int     // concurrent connections per client IP; ≤ 0: no limit
	Rate  float64 // new connections per second per IP, burst 2×; 0: none
	// Refuse returns the line sent to a refused client (with its line end).
	Refuse func(Reason) string
	// Refused, when set, is told of each refusal (metrics, logs).
	Refused func(r Reason, remote string)

	active atomic.Int64
	mu     sync.Mutex
	perIP  map[string]int
	rate   *ipRate
	once   sync.Once
}

func (l *Listener) init() {
	l.once.Do(func() {
		l.perIP = map[string]int{}
		if l.Rate > 0 {
			l.rate = &ipRate{rate: l.Rate, buckets: map[string]*bucket{}}
		}
	})
}

// Active is the number of open accepted connections.
func (l *Listener) Active() int { return int(l.active.Load()) }

// Accept waits for a connection within the limits; the others are
// answered with Refuse's line and closed.
func (l *Listener) Accept() (net.Conn, error) {
	l.init()
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := authguard.IPKey(c.RemoteAddr().String())
		if l.rate != nil && !l.rate.allow(ip, time.Now()) {
			l.refuse(c, TooFast)
			continue
		}
		if n := l.active.Add(1); l.Max > 0 && n > int64(l.Max) {
			l.active.Add(-1)
			l.refuse(c, TooMany)
			continue
		}
		l.mu.Lock()
		if l.PerIP > 0 && l.perIP[ip] >= l.PerIP {
			l.mu.Unlock()
			l.active.Add(-1)
			l.refuse(c, TooManyFromIP)
			continue
		}
		l.perIP[ip]++
		l.mu.Unlock()
		return &Conn{Conn: c, l: l, ip: ip}, nil
	}
}

func (l *Listener) release(ip string) {
	l.active.Add(-1)
	l.mu.Lock()
	if l.perIP[ip]--; l.perIP[ip] <= 0 {
		delete(l.perIP, ip)
	}
	l.mu.Unlock()
}

func (l *Listener) refuse(c net.Conn, r Reason) {
	if l.Refused != nil {
		l.Refused(r, c.RemoteAddr().String())
	}
	line := ""
	if l.Refuse != nil {
		line = l.Refuse(r)
	}
	go func() {
		c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if line != "" {
			c.Write([]byte(line))
		}
		c.Close()
	}()
}

// Conn is an accepted connection; closing it frees its slots.
type Conn struct {
	net.Conn
	l    *Listener
	ip   string
	done atomic.Bool

	closeAfter atomic.Bool
}

// IP is the key the connection is counted under (its IP, or IPv6 /64).
func (c *Conn) IP() string { return c.ip }

// CloseAfterWrite makes the connection close right after its next Write:
// a front end returns its final reply ("421 …", "NO …") as usual and the
// connection ends once it is on the wire.
func (c *Conn) CloseAfterWrite() { c.closeAfter.Store(true) }

// ClosingAfterWrite reports whether CloseAfterWrite was called: a
// wrapper that holds writes back must pass the next one on at once.
func (c *Conn) ClosingAfterWrite() bool { return c.closeAfter.Load() }

func (c *Conn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if c.closeAfter.Load() {
		c.Close()
	}
	return n, err
}

func (c *Conn) Close() error {
	if c.done.CompareAndSwap(false, true) {
		c.l.release(c.ip)
	}
	return c.Conn.Close()
}

// ipRate is a token bucket per client IP: rate tokens a second, a burst
// of twice that. Idle buckets are forgotten so the map stays small.
type ipRate struct {
	mu      sync.Mutex
	rate    float64
	buckets map[string]*bucket
	swept   time.Time
}

type bucket struct {
	tokens float64
	last   time.Time
}

func (r *ipRate) allow(ip string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	burst := 2 * r.rate
	if now.Sub(r.swept) > time.Minute {
		for k, b := range r.buckets {
			if now.Sub(b.last).Seconds()*r.rate >= burst {
				delete(r.buckets, k)
			}
		}
		r.swept = now
	}
	b, ok := r.buckets[ip]
	if !ok {
		b = &bucket{tokens: burst, last: now}
		r.buckets[ip] = b
	}
	b.tokens = min(burst, b.tokens+now.Sub(b.last).Seconds()*r.rate)
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
