package imapview

import (
	"bytes"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"
	"github.com/emersion/go-sasl"

	"github.com/envelopd/envelopd/authguard"
	"github.com/envelopd/envelopd/connlimit"
)

// Abuse limits of the view: LOGIN and
// AUTHENTICATE PLAIN go through an authguard.Guard (throttled per IP and
// account before any hash, bounded hashing, logged, counted); a session
// is closed after Guard.MaxSessionFailures failures; connections are
// capped in all and per IP; before login, a session may send at most
// MaxIdleCommands command lines (go-imap closes a silent unauthenticated
// session after 30 s by itself).

// imapConn counts the command lines a session sends before it logs in.
// The view speaks IMAP in the clear (no STARTTLS), so the lines read are
// the commands.
type imapConn struct {
	*connlimit.Conn
	maxIdle int

	mu     sync.Mutex
	lines  int
	authed bool
	bye    atomic.Pointer[string]
	// Bad mailbox names (see badNames): the line being read and the tags
	// of commands naming a mailbox go-imap cannot decode.
	line     []byte
	badNames []string
}

func (c *imapConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.scan(b[:n])
	}
	if n > 0 && c.maxIdle > 0 {
		c.mu.Lock()
		if !c.authed {
			c.lines += bytes.Count(b[:n], []byte{'\n'})
		}
		over := !c.authed && c.lines > c.maxIdle
		c.mu.Unlock()
		if over {
			c.Conn.Write([]byte("* BYE Too many commands without logging in\r\n"))
			c.Close()
			return 0, net.ErrClosed
		}
	}
	return n, err
}

// Write sends b; after closeWithBye, it then sends the BYE and closes.
func (c *imapConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(c.fixBadName(b))
	if err == nil {
		n = len(b) // the rewritten reply may differ in length
	}
	if bye := c.bye.Load(); bye != nil {
		c.Conn.Write([]byte("* BYE " + *bye + "\r\n"))
		c.Close()
	}
	return n, err
}

// closeWithBye ends the connection with an untagged BYE (RFC 9051
// §7.1.5) right after the current command's response.
func (c *imapConn) closeWithBye(text string) {
	if c != nil {
		c.bye.Store(&text)
	}
}

func (c *imapConn) loggedIn() {
	if c != nil {
		c.mu.Lock()
		c.authed = true
		c.mu.Unlock()
	}
}

// imapListener wraps accepted connections in imapConn.
type imapListener struct {
	*connlimit.Listener
	maxIdle int
}

func (l *imapListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &imapConn{Conn: c.(*connlimit.Conn), maxIdle: l.maxIdle}, nil
}

func imapRefusal(r connlimit.Reason) string {
	if r == connlimit.TooManyFromIP {
		return "* BYE Too many concurrent connections from your address\r\n"
	}
	return "* BYE Too many connections, try again later\r\n"
}

// Refusals of LOGIN/AUTHENTICATE beyond a wrong password (RFC 5530 codes).
var (
	errAuthBusy = &imap.Error{Type: imap.StatusResponseTypeNo, Code: imap.ResponseCodeUnavailable,
		Text: "Temporary authentication failure, try again later"}
	errAuthLocked = &imap.Error{Type: imap.StatusResponseTypeNo, Code: imap.ResponseCodeUnavailable,
		Text: "Too many authentication failures from your address"}
)

// AuthenticateMechanisms implements imapserver.SessionSASL.
func (ss *session) AuthenticateMechanisms() []string { return []string{sasl.Plain} }

// Authenticate implements imapserver.SessionSASL: PLAIN, with a malformed
// response or a foreign authorization identity costing a full check.
func (ss *session) Authenticate(mech string) (sasl.Server, error) {
	if !strings.EqualFold(mech, sasl.Plain) {
		return nil, &imap.Error{Type: imap.StatusResponseTypeNo, Text: "SASL mechanism not supported"}
	}
	return authguard.NewPlainServer(func(identity, user, pass string) error {
		return ss.login(sasl.Plain, identity, user, pass)
	}), nil
}

// login runs one attempt through the guard; identity other than user is
// refused after the full check.
func (ss *session) login(mech, identity, username, password string) error {
	user := strings.ToLower(username)
	verify := func() error {
		if ss.s.opts.Authenticate == nil {
			return errors.New("no authentication configured")
		}
		err := ss.s.opts.Authenticate(user, password)
		if err == nil && identity != "" && !strings.EqualFold(identity, username) {
			err = errors.New("authorization identity differs")
		}
		return err
	}
	a := authguard.Attempt{Service: "imap", IP: ss.remote, Account: user, Mechanism: mech}
	err := ss.s.guard.Check(ss.ctx(), a, verify)
	switch {
	case err == nil:
	case errors.Is(err, authguard.ErrLockedOut):
		ss.conn.closeWithBye("Too many authentication failures from your address")
		return errAuthLocked
	case errors.Is(err, authguard.ErrFailed):
		ss.fails++
		if ss.fails >= ss.s.guard.MaxSessionFailures() {
			ss.conn.closeWithBye("Too many authentication failures")
		}
		return imapserver.ErrAuthFailed
	default:
		return errAuthBusy
	}
	if _, err := ss.s.opts.Store.EnsureMailbox(ss.ctx(), user); err != nil {
		return err
	}
	ss.user = user
	ss.conn.loggedIn()
	return nil
}

// Bad mailbox names. go-imap v2.0.0-beta.8 decodes every mailbox argument
// as modified UTF-7 (RFC 3501 §5.1.3) before the session sees it, and its
// decoding error is not an *imap.Error, so a name such as "&Jjo" or raw
// 8-bit bytes gets "NO [SERVERBUG] Internal server error". A name that
// cannot be decoded cannot exist: the view answers NO [NONEXISTENT] (RFC
// 5530) instead. The view speaks in the clear, so the connection sees each
// command line: it notes the tags of mailbox commands whose line holds
// '&', 8-bit or control bytes or a literal, and rewrites a SERVERBUG answer to such a tag.

var mailboxCommands = map[string]bool{
	"SELECT": true, "EXAMINE": true, "STATUS": true, "CREATE": true, "DELETE": true, "RENAME": true,
	"SUBSCRIBE": true, "UNSUBSCRIBE": true, "LIST": true, "LSUB": true, "COPY": true, "MOVE": true,
	"APPEND": true, "UID": true,
}

func (c *imapConn) scan(b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if len(c.line) < 4096 {
				c.line = append(c.line, b[:min(len(b), 4096-len(c.line))]...)
			}
			return
		}
		if len(c.line) < 4096 {
			c.line = append(c.line, b[:min(i, 4096-len(c.line))]...)
		}
		c.noteLine(c.line)
		c.line = c.line[:0]
		b = b[i+1:]
	}
}

func (c *imapConn) noteLine(line []byte) {
	f := bytes.Fields(line)
	if len(f) < 3 || !mailboxCommands[strings.ToUpper(string(f[1]))] {
		return
	}
	line = bytes.TrimSuffix(line, []byte{'\r'})
	// '&' starts a UTF-7 run, 8-bit and control bytes never decode, and
	// a literal ("{n}" at the end) hides the name from this line.
	odd := bytes.IndexByte(line, '&') >= 0 || bytes.HasSuffix(line, []byte{'}'})
	for _, ch := range line {
		odd = odd || ch >= 0x80 || ch < 0x20
	}
	if odd && len(c.badNames) < 16 {
		c.badNames = append(c.badNames, string(f[0]))
	}
}

var serverBug = []byte(" NO [SERVERBUG] ")

func (c *imapConn) fixBadName(b []byte) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.badNames) == 0 {
		return b
	}
	for i, tag := range c.badNames {
		if !bytes.HasPrefix(b, []byte(tag)) || !bytes.HasPrefix(b[len(tag):], []byte(" ")) {
			continue
		}
		c.badNames = append(c.badNames[:i], c.badNames[i+1:]...)
		if !bytes.HasPrefix(b[len(tag):], serverBug) {
			return b
		}
		end := bytes.IndexByte(b, '\n')
		if end < 0 {
			return b
		}
		out := append([]byte(tag+" NO [NONEXISTENT] No such mailbox\r\n"), b[end+1:]...)
		return out
	}
	return b
}
