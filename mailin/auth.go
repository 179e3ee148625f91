package mailin

import (
	"crypto/subtle"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emersion/go-sasl"
)

// loginServer is the server side of the LOGIN SASL mechanism
// (draft-murchison-sasl-login), which go-sasl only has as a client.
type loginServer struct {
	check func(user, pass string) error
	user  string
	step  int
}

func newLoginServer(check func(user, pass string) error) sasl.Server {
	return &loginServer{check: check}
}

func (l *loginServer) Next(resp []byte) ([]byte, bool, error) {
	switch l.step {
	case 0:
		l.step = 1
		if resp == nil {
			return []byte("Username:"), false, nil
		}
		fallthrough // initial response carries the user name
	case 1:
		l.user = string(resp)
		l.step = 2
		return []byte("Password:"), false, nil
	case 2:
		l.step = 3
		return nil, true, l.check(l.user, string(resp))
	}
	return nil, true, errors.New("sasl login: unexpected response")
}

func constantTimeEqual(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// limitListener refuses connections beyond max politely: the client gets
// "421 4.7.0 Too many connections" (RFC 5321 §3.8) and is closed.
type limitListener struct {
	net.Listener
	max    int
	active atomic.Int64
	rate   *ipRate // nil: no per-IP rate limit
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.rate != nil && !l.rate.allow(c.RemoteAddr(), time.Now()) {
			refuse(c, "421 4.7.0 Too many connections from your address, slow down\r\n")
			continue
		}
		if l.active.Add(1) > int64(l.max) {
			l.active.Add(-1)
			refuse(c, "421 4.7.0 Too many connections, try again later\r\n")
			continue
		}
		return &countedConn{Conn: c, l: l}, nil
	}
}

func refuse(c net.Conn, line string) {
	go func() {
		c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		c.Write([]byte(line))
		c.Close()
	}()
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

func newIPRate(rate float64) *ipRate {
	if rate <= 0 {
		return nil
	}
	return &ipRate{rate: rate, buckets: map[string]*bucket{}}
}

func (r *ipRate) allow(addr net.Addr, now time.Time) bool {
	ip := addr.String()
	if ta, ok := addr.(*net.TCPAddr); ok {
		ip = ta.IP.String()
	}
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

type countedConn struct {
	net.Conn
	l    *limitListener
	done atomic.Bool
}

func (c *countedConn) Close() error {
	if c.done.CompareAndSwap(false, true) {
		c.l.active.Add(-1)
	}
	return c.Conn.Close()
}
