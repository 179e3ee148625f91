package mailin

import (
	"crypto/subtle"
	"errors"
	"net"
	"sync/atomic"

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
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.active.Add(1) > int64(l.max) {
			l.active.Add(-1)
			go func() {
				c.Write([]byte("421 4.7.0 Too many connections, try again later\r\n"))
				c.Close()
			}()
			continue
		}
		return &countedConn{Conn: c, l: l}, nil
	}
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
