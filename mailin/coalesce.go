package mailin

import (
	"errors"
	"time"
)

// Replies are coalesced (RFC 2920 §3.2, "Server support of
// pipelining"): go-smtp flushes every reply with its own write, so a
// pipelined MAIL, RCPT and DATA cost three write system calls and three
// segments. smtpConn instead holds the replies written since the last
// read and sends them together when go-smtp next reads from the client —
// it only reads when it has consumed every command already received, so
// no reply waits for anything but the client — or when the connection
// closes. RFC 2920 asks exactly this: flush before waiting for input.

// maxPendingReply bounds the held replies; past it they are written at
// once (a reply is a few lines, an EHLO answer a few hundred bytes).
const maxPendingReply = 16 << 10

// errWriteAfterClose answers a write to a connection whose earlier
// flush failed.
var errWriteAfterClose = errors.New("smtp: write after a failed write")

func (c *smtpConn) Write(b []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.werr != nil {
		return 0, c.werr
	}
	c.wbuf = append(c.wbuf, b...)
	// A reply that ends the connection (CloseAfterWrite) goes out now.
	if len(c.wbuf) >= maxPendingReply || c.Conn.ClosingAfterWrite() {
		if err := c.flushLocked(); err != nil {
			return 0, err
		}
	}
	return len(b), nil
}

// flush writes the held replies.
func (c *smtpConn) flush() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.flushLocked()
}

func (c *smtpConn) flushLocked() error {
	if c.werr != nil {
		return c.werr
	}
	if len(c.wbuf) == 0 {
		return nil
	}
	_, err := c.Conn.Write(c.wbuf)
	c.wbuf = c.wbuf[:0]
	if cap(c.wbuf) > maxPendingReply {
		c.wbuf = nil
	}
	if err != nil {
		c.werr = errors.Join(errWriteAfterClose, err)
		return err
	}
	return nil
}

// SetWriteDeadline flushes the held replies first when t is not in the
// future: a deadline of now means "write nothing more" (crypto/tls's
// Close sends its close_notify alert and then sets one), so what was
// written before it — the 221 of a QUIT inside STARTTLS — must go out
// before it takes effect. A future deadline (go-smtp sets one before
// every reply) keeps the replies held.
func (c *smtpConn) SetWriteDeadline(t time.Time) error {
	if !t.IsZero() && !t.After(time.Now()) {
		c.flush()
	}
	return c.Conn.SetWriteDeadline(t)
}

// SetDeadline is SetWriteDeadline for both directions.
func (c *smtpConn) SetDeadline(t time.Time) error {
	if !t.IsZero() && !t.After(time.Now()) {
		c.flush()
	}
	return c.Conn.SetDeadline(t)
}

// Close sends the held replies (a final "221" or "421") and closes.
func (c *smtpConn) Close() error {
	c.flush()
	return c.Conn.Close()
}
