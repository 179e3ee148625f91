package mailin

import (
	"bytes"
	"strconv"
	"strings"
)

// RFC 5321 §4.5.1 and §4.1.1.3: "RCPT TO:<Postmaster>", with no domain
// and in any case, MUST be accepted. go-smtp v0.25's path parser wants a
// domain and answers 501 before the session sees the command, so the
// SMTP connection rewrites that one command on its way in, to
// <postmaster@postmaster.invalid> (RFC 2606), which the session then
// treats as the postmaster (isPostmaster). The rewriter follows the
// command stream: it leaves DATA bodies (up to CRLF.CRLF) and BDAT chunks
// (their announced size) alone and stops at STARTTLS — after it the bytes
// are TLS records, so a postmaster RCPT inside TLS still gets go-smtp's
// 501 (a known limit, until go-smtp accepts it itself). Any doubt about
// the state (a refused DATA, say) only turns rewriting off for the
// session; it can never alter a message.
//
// The filter also keeps go-smtp's DATA reader framed the way RFC 5321
// §4.1.1.4 frames it. That reader loses track of line starts on a bare CR
// (a CR not followed by LF) followed by another CR — "hello\r\r\n.\r\n"
// — and on a bare CR after a line's leading dot, which it drops: it then
// misses the CRLF.CRLF that ends the body and waits for more until the read
// timeout. So each bare CR in a DATA body reaches go-smtp as " \r ": the
// reader stays in step, and the session, which refuses any bare CR or LF
// (ErrBareLineEnd, RFC 5321 §2.3.8), still sees it and answers 550 5.6.0 at
// once. Only a body that is refused anyway is changed. Inside TLS the
// filter is off (see above): there the reader's own framing applies.
const postmasterSentinel = "postmaster@postmaster.invalid"

type rcptFilter struct {
	off     bool   // after STARTTLS, or lost
	line    []byte // command line being read
	long    bool   // the current line exceeded the buffer: pass it through
	data    bool   // in a DATA body
	tail    []byte // last bytes of the body, for CRLF.CRLF
	bdat    int64  // BDAT bytes still to pass
	cr      bool   // the body's last byte read was a CR, not handed on yet
	pending []byte // filtered bytes not yet returned
	err     error  // read error to return once pending is drained
}

const maxFilterLine = 1024

// filter returns the bytes to hand to go-smtp for the bytes read, b.
// Message bytes (a DATA body, a BDAT chunk) and everything after STARTTLS
// pass without a copy: when nothing is rewritten, the result is b itself.
func (f *rcptFilter) filter(b []byte) []byte {
	o := passOut{src: b}
	for len(b) > 0 {
		switch {
		case f.off:
			o.add(b)
			b = nil
		case f.bdat > 0:
			n := int(min(f.bdat, int64(len(b))))
			f.bdat -= int64(n)
			o.add(b[:n])
			b = b[n:]
		case f.data:
			i := f.endOfData(b)
			if i < 0 {
				i = len(b)
			}
			f.body(&o, b[:i])
			b = b[i:]
		default:
			i := bytes.IndexByte(b, '\n')
			if i < 0 {
				f.partial(&o, b)
				b = nil
				continue
			}
			if len(f.line) == 0 && !f.long && i+1 <= maxFilterLine {
				// A whole command line in this read: it passes in place
				// unless rewritten.
				o.add(f.command(b[:i+1]))
				b = b[i+1:]
				continue
			}
			f.partial(&o, b[:i+1])
			b = b[i+1:]
			if !f.long {
				o.add(f.command(f.line))
			}
			f.line, f.long = f.line[:0], false
		}
	}
	return o.bytes()
}

// passOut is filter's output for one read, src: a prefix of src itself
// for as long as what is added is src's next bytes, a copy from the first
// byte that is not (a rewritten line, or one begun in an earlier read).
type passOut struct {
	src []byte
	n   int    // src[:n] is the output, while buf is nil
	buf []byte // the output once it is a copy
}

func (o *passOut) add(seg []byte) {
	if len(seg) == 0 {
		return
	}
	if o.buf == nil && o.n+len(seg) <= len(o.src) && &seg[0] == &o.src[o.n] {
		o.n += len(seg)
		return
	}
	if o.buf == nil {
		o.buf = append(make([]byte, 0, len(o.src)+64), o.src[:o.n]...)
	}
	o.buf = append(o.buf, seg...)
}

func (o *passOut) bytes() []byte {
	if o.buf != nil {
		return o.buf
	}
	return o.src[:o.n]
}

var endOfData = []byte("\r\n.\r\n")

// endOfData returns the index in b just past the CRLF.CRLF that ends the
// DATA body (which may have begun in earlier reads: f.tail holds their
// last bytes), or -1, remembering b's last bytes.
func (f *rcptFilter) endOfData(b []byte) int {
	head := append(f.tail[:len(f.tail):len(f.tail)], b[:min(len(b), len(endOfData)-1)]...)
	i := bytes.Index(head, endOfData)
	if i >= 0 {
		i += len(endOfData) - len(f.tail)
	} else if i = bytes.Index(b, endOfData); i >= 0 {
		i += len(endOfData)
	}
	if i >= 0 {
		f.data, f.tail = false, f.tail[:0]
		return i
	}
	if len(b) >= len(endOfData)-1 {
		f.tail = append(f.tail[:0], b[len(b)-(len(endOfData)-1):]...)
	} else {
		f.tail = append(f.tail, b...)
		if over := len(f.tail) - (len(endOfData) - 1); over > 0 {
			f.tail = append(f.tail[:0], f.tail[over:]...)
		}
	}
	return -1
}

// bareCR is what go-smtp gets for a bare CR in a DATA body: the CR kept
// (the session refuses the message for it), spaces on both sides so that
// neither a CR after it nor a leading dot before it changes the framing.
var bareCR = []byte(" \r ")

// body hands on DATA body bytes, each bare CR as bareCR. A CR that is the
// last byte read waits for the next one (the body's end, CRLF.CRLF, never
// ends in a CR, so another read always follows).
func (f *rcptFilter) body(o *passOut, seg []byte) {
	if f.cr && len(seg) > 0 {
		f.cr = false
		if seg[0] == '\n' {
			o.add(bareCR[1:2])
		} else {
			o.add(bareCR)
		}
	}
	for len(seg) > 0 {
		j := bytes.IndexByte(seg, '\r')
		switch {
		case j < 0:
			o.add(seg)
			return
		case j+1 == len(seg):
			o.add(seg[:j])
			f.cr = true
			return
		case seg[j+1] == '\n':
			o.add(seg[:j+2])
			seg = seg[j+2:]
		default:
			o.add(seg[:j])
			o.add(bareCR)
			seg = seg[j+1:]
		}
	}
}

// partial buffers part of a command line, or passes it through when the
// line is too long to be one we rewrite.
func (f *rcptFilter) partial(o *passOut, b []byte) {
	if f.long {
		o.add(b)
		return
	}
	if len(f.line)+len(b) > maxFilterLine {
		f.long = true
		o.add(f.line)
		f.line = f.line[:0]
		o.add(b)
		return
	}
	f.line = append(f.line, b...)
}

// command returns the (possibly rewritten) command line and follows the
// state it starts.
func (f *rcptFilter) command(line []byte) []byte {
	verb, arg, _ := bytes.Cut(bytes.TrimRight(line, "\r\n"), []byte(" "))
	switch {
	case bytes.EqualFold(verb, []byte("STARTTLS")):
		f.off = true
	case bytes.EqualFold(verb, []byte("DATA")):
		f.data, f.tail = true, append(f.tail[:0], "\r\n"...)
	case bytes.EqualFold(verb, []byte("BDAT")):
		n, _, _ := bytes.Cut(bytes.TrimSpace(arg), []byte(" "))
		size, err := strconv.ParseInt(string(n), 10, 64)
		if err != nil || size < 0 {
			f.off = true // go-smtp refuses it; do not guess what follows
		}
		f.bdat = size
	case bytes.EqualFold(verb, []byte("RCPT")):
		s := strings.TrimRight(string(line), "\r\n")
		_, arg, _ := strings.Cut(s, " ")
		if rest, ok := cutFold(arg, "TO:"); ok {
			rest = strings.TrimLeft(rest, " ")
			if p, ok := cutFold(rest, "<postmaster>"); ok {
				return []byte(s[:len(s)-len(rest)] + "<" + postmasterSentinel + ">" + p + "\r\n")
			}
		}
	}
	return line
}

func cutFold(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
		return s[len(prefix):], true
	}
	return s, false
}

// Read hands go-smtp the command stream with a domainless postmaster
// RCPT rewritten (see rcptFilter), after sending the held replies.
func (c *smtpConn) Read(b []byte) (int, error) {
	// The replies to every command read so far go out before waiting
	// for more (coalesce.go).
	if err := c.flush(); err != nil {
		return 0, err
	}
	f := &c.rcpt
	for len(f.pending) == 0 {
		if f.err != nil {
			err := f.err
			f.err = nil
			return 0, err
		}
		n, err := c.Conn.Read(b)
		out := f.filter(b[:n])
		if len(out) == n && (n == 0 || &out[0] == &b[0]) {
			return n, err // passed through unchanged, in place
		}
		f.pending = append(f.pending, out...)
		f.err = err
	}
	n := copy(b, f.pending)
	f.pending = f.pending[n:]
	return n, nil
}
