package mailin

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/emersion/go-sasl"

	"github.com/envelopd/envelopd/connlimit"
)

// loginServer is the server side of the LOGIN SASL mechanism
// (draft-murchison-sasl-login), which go-sasl only has as a client.
type loginServer struct {
	check checkFunc
	user  string
	step  int
}

func newLoginServer(check checkFunc) sasl.Server {
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
		return nil, true, l.check("", l.user, string(resp))
	}
	return nil, true, errors.New("sasl login: unexpected response")
}

// checkFunc checks credentials for a SASL server: identity is the
// authorization identity ("" when none), user and pass the credentials.
type checkFunc func(identity, user, pass string) error

// fileUsers checks the --auth-file users. The passwords are compared as
// HMAC-SHA256 values under a per-process random key, in constant time, and
// an unknown user is compared against a random value: every failure costs
// one HMAC and one 32-byte comparison, whichever user was named and however
// long the password. mac is replaceable in tests to count calls.
type fileUsers struct {
	key   []byte
	macs  map[string][]byte
	dummy []byte
	mac   func(key []byte, pass string) []byte
}

func hmacSHA256(key []byte, pass string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(pass))
	return h.Sum(nil)
}

func newFileUsers(users map[string]string) *fileUsers {
	f := &fileUsers{key: make([]byte, 32), macs: make(map[string][]byte, len(users)), dummy: make([]byte, 32), mac: hmacSHA256}
	rand.Read(f.key)
	rand.Read(f.dummy)
	for u, p := range users {
		f.macs[u] = hmacSHA256(f.key, p)
	}
	return f
}

func (f *fileUsers) check(user, pass string) error {
	want, ok := f.macs[user]
	if !ok {
		want = f.dummy
	}
	if subtle.ConstantTimeCompare(f.mac(f.key, pass), want) != 1 || !ok {
		return ErrBadPassword
	}
	return nil
}

// smtpConn is a connection of the SMTP front end; it enforces the idle
// limits. go-smtp sets the read deadline once before it
// reads each command line or SASL response (Conn.readLine), in the clear
// and under STARTTLS alike (tls.Conn passes SetReadDeadline down), so that
// is where commands are counted:
//   - outside a mail transaction, at most maxIdle commands since the last
//     progress (a delivered message or a successful AUTH), and each waited
//     for at most idleTimeout;
//   - a transaction (MAIL to the end of DATA) must finish within txTimeout.
//
// Past a limit the read fails as a timeout and go-smtp answers "421 4.4.2"
// and closes the connection: a session of NOOP/RSET/VRFY cannot keep a
// slot forever.
type smtpConn struct {
	*connlimit.Conn
	idleTimeout, txTimeout time.Duration
	maxIdle                int
	log                    *slog.Logger

	mu      sync.Mutex
	idle    int
	inTx    bool
	txStart time.Time

	rcpt rcptFilter // postmaster.go

	wmu  sync.Mutex // coalesce.go: the replies not written yet
	wbuf []byte
	werr error
}

// errNoProgress is what SetReadDeadline returns past maxIdle: a timeout,
// so go-smtp answers 421 and closes.
type errNoProgress struct{}

func (errNoProgress) Error() string   { return "too many commands without progress" }
func (errNoProgress) Timeout() bool   { return true }
func (errNoProgress) Temporary() bool { return false }

func (c *smtpConn) SetReadDeadline(t time.Time) error {
	if t.IsZero() {
		return c.Conn.SetReadDeadline(t)
	}
	now := time.Now()
	c.mu.Lock()
	if !c.inTx {
		c.idle++
		if c.maxIdle > 0 && c.idle > c.maxIdle {
			n := c.idle
			c.mu.Unlock()
			c.log.Info("smtp session closed: no progress", "remote", c.RemoteAddr().String(), "commands", n-1)
			return errNoProgress{}
		}
		if c.idleTimeout > 0 {
			t = earliest(t, now.Add(c.idleTimeout))
		}
	} else if c.txTimeout > 0 {
		t = earliest(t, c.txStart.Add(c.txTimeout))
	}
	c.mu.Unlock()
	return c.Conn.SetReadDeadline(t)
}

// progress resets the idle command count.
func (c *smtpConn) progress() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.idle = 0
	c.mu.Unlock()
}

// transaction marks the start (MAIL accepted) or end (RSET, delivery) of
// a mail transaction.
func (c *smtpConn) transaction(on bool) {
	if c == nil {
		return
	}
	c.mu.Lock()
	if on && !c.inTx {
		c.txStart = time.Now()
	}
	c.inTx = on
	c.mu.Unlock()
}

// dataDeadline gives the message body a full read timeout from now.
func (c *smtpConn) dataDeadline(d time.Duration) {
	if c != nil && d > 0 {
		c.Conn.SetReadDeadline(time.Now().Add(d))
	}
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
