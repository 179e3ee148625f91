package parse

import (
	"bytes"
	"strings"
)

// field is one header field: its name as written and its value with
// surrounding white space trimmed, both aliasing the raw message. A folded
// value (RFC 5322 §2.2.3) is unfolded only when it is read, since most
// folded fields (Received, DKIM-Signature) never are.
type field struct {
	name, value []byte
	folded      bool
}

// text returns the field value, unfolded.
func (f field) text() []byte {
	if !f.folded {
		return f.value
	}
	out := make([]byte, 0, len(f.value))
	for i := 0; i < len(f.value); {
		e := lineEnd(f.value, i)
		l := bytes.Trim(trimEOL(f.value[i:e]), " \t")
		if len(l) > 0 {
			if len(out) > 0 {
				out = append(out, ' ')
			}
			out = append(out, l...)
		}
		i = e
	}
	return out
}

// header is a header section in order of appearance.
type header []field

// get returns the value of the first field named name (ASCII
// case-insensitive), and whether there is one.
func (h header) get(name string) ([]byte, bool) {
	for _, f := range h {
		if equalFold(f.name, name) {
			return f.text(), true
		}
	}
	return nil, false
}

// getString is get as a string, "" when absent.
func (h header) getString(name string) string {
	v, _ := h.get(name)
	return string(v)
}

// count returns how many fields are named name.
func (h header) count(name string) int {
	n := 0
	for _, f := range h {
		if equalFold(f.name, name) {
			n++
		}
	}
	return n
}

func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(b); i++ {
		c, d := b[i], s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if 'A' <= d && d <= 'Z' {
			d += 'a' - 'A'
		}
		if c != d {
			return false
		}
	}
	return true
}

// readHeader splits b into its header section and body (RFC 5322 §2.1:
// the header ends at the first empty line; CRLF or bare LF). It is lenient
// by construction: a leading mbox "From " line is skipped; a line that is
// neither a field nor a continuation ends the header and is taken as the
// first line of the body (bad is set, so the caller can report it).
func readHeader(b []byte) (h header, body []byte, bad []byte) {
	return readHeaderInto(make(header, 0, 16), b)
}

// readHeaderInto is readHeader appending to h[:0], so that the MIME walk
// can reuse one slice for every part header (each is dead before the next
// is read).
func readHeaderInto(h header, b []byte) (_ header, body []byte, bad []byte) {
	h = h[:0]
	i, valueStart := 0, 0
	if bytes.HasPrefix(b, []byte("From ")) {
		i = lineEnd(b, 0)
	}
	for i < len(b) {
		e := lineEnd(b, i)
		line := trimEOL(b[i:e])
		if len(line) == 0 {
			return h, b[e:], nil
		}
		if line[0] == ' ' || line[0] == '\t' {
			if len(h) == 0 {
				return h, b[i:], line
			}
			// Extend the value over the continuation line (in place: it
			// is contiguous in b).
			f := &h[len(h)-1]
			f.value = bytes.TrimRight(b[valueStart:i+len(line)], " \t")
			f.folded = true
			i = e
			continue
		}
		colon := bytes.IndexByte(line, ':')
		name := bytes.TrimRight(line[:max(colon, 0)], " \t")
		if colon <= 0 || !validName(name) {
			return h, b[i:], line
		}
		valueStart = skipBlank(b, i+colon+1, i+len(line))
		h = append(h, field{name: name, value: bytes.TrimRight(b[valueStart:i+len(line)], " \t")})
		i = e
	}
	return h, nil, nil
}

// skipBlank returns the index of the first byte in b[i:end] that is not a
// space or tab.
func skipBlank(b []byte, i, end int) int {
	for i < end && (b[i] == ' ' || b[i] == '\t') {
		i++
	}
	return i
}

// validName: RFC 5322 §3.6.8 ftext, printable US-ASCII except colon.
func validName(n []byte) bool {
	if len(n) == 0 {
		return false
	}
	for _, c := range n {
		if c <= ' ' || c > '~' {
			return false
		}
	}
	return true
}

// lineEnd returns the index after the line starting at i (after its LF, or
// len(b)).
func lineEnd(b []byte, i int) int {
	if j := bytes.IndexByte(b[i:], '\n'); j >= 0 {
		return i + j + 1
	}
	return len(b)
}

func trimEOL(l []byte) []byte {
	if n := len(l); n > 0 && l[n-1] == '\n' {
		l = l[:n-1]
	}
	if n := len(l); n > 0 && l[n-1] == '\r' {
		l = l[:n-1]
	}
	return l
}

// clipLine is for diagnostics: the first 60 bytes of a
// line, printable.
func clipLine(l []byte) string {
	s := strings.ToValidUTF8(string(l), "?")
	if len(s) > 60 {
		s = s[:60] + "..."
	}
	return s
}
