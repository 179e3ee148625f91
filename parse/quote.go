package parse

import (
	"bytes"
)

// stripQuoted returns the text the sender wrote, without what it quotes or
// signs off with, so that the JSON search does not pick up a quoted
// message ("Extraction of the JSON object from the message body (stripping
// signatures, HTML tags, quoted text) is the receiver's responsibility",
// spec "Protocol"). It removes
//   - lines starting with ">" (optionally indented),
//   - everything from the first of these lines on:
//     an attribution "On … wrote:" (Gmail, Apple Mail, Thunderbird; also
//     wrapped over two lines, and the French, German and Spanish forms),
//     which must hold a digit (its date) so that prose like "Here is what I
//     wrote:" is not taken for one;
//     an Outlook header block: "From:" followed within four lines by "Sent:"
//     or "Date:";
//     "-----Original Message-----", "---------- Forwarded message ---------",
//     "Begin forwarded message:";
//     the signature delimiter "-- " (RFC 3676 §4.3; also "--").
//
// The result aliases t when nothing but a tail is cut.
func stripQuoted(t []byte) []byte {
	cut, quoted := len(t), false
	for i := 0; i < len(t); {
		e := lineEnd(t, i)
		l := bytes.TrimRight(trimEOL(t[i:e]), " \t")
		if isCut(l, t[e:]) {
			cut = i
			break
		}
		if isQuoteLine(l) {
			quoted = true
		}
		i = e
	}
	if !quoted {
		return t[:cut]
	}
	out := make([]byte, 0, cut)
	for i := 0; i < cut; {
		e := lineEnd(t, i)
		if !isQuoteLine(t[i:e]) {
			out = append(out, t[i:e]...)
		}
		i = e
	}
	return out
}

func isQuoteLine(l []byte) bool {
	l = bytes.TrimLeft(l, " \t")
	return len(l) > 0 && l[0] == '>'
}

// isCut reports whether line l (trailing white space trimmed) starts the
// quoted tail; rest is the text after it.
func isCut(l, rest []byte) bool {
	switch {
	case len(l) == 0:
		return false
	case string(l) == "--":
		return true // "-- " with the space trimmed
	case bytes.HasPrefix(l, []byte("-----")) && containsFold(l, "original message"),
		bytes.HasPrefix(l, []byte("----------")) && containsFold(l, "forwarded message"),
		string(l) == "Begin forwarded message:":
		return true
	case isAttribution(l, rest):
		return true
	case hasPrefixFold(l, "from:") || hasPrefixFold(l, "*from:*"):
		return outlookBlock(rest)
	}
	return false
}

var (
	attributionStarts = []string{"On ", "Le ", "Am ", "El "}
	attributionEnds   = []string{"wrote:", "a écrit :", "a écrit:", "schrieb:", "escribió:"}
)

// isAttribution: "On <date>, <who> wrote:", possibly wrapped so that "wrote:"
// ends the next line.
func isAttribution(l, rest []byte) bool {
	start := false
	for _, s := range attributionStarts {
		if bytes.HasPrefix(l, []byte(s)) {
			start = true
			break
		}
	}
	if !start || bytes.IndexAny(l, "0123456789") < 0 {
		return false
	}
	if endsAttribution(l) {
		return true
	}
	next := bytes.TrimRight(trimEOL(rest[:lineEnd(rest, 0)]), " \t")
	return len(next) > 0 && endsAttribution(next)
}

func endsAttribution(l []byte) bool {
	for _, s := range attributionEnds {
		if bytes.HasSuffix(l, []byte(s)) {
			return true
		}
	}
	return false
}

// outlookBlock reports whether a "Sent:" or "Date:" line follows within four
// lines (Outlook's reply header: From, Sent, To, Cc, Subject).
func outlookBlock(rest []byte) bool {
	for i, n := 0, 0; i < len(rest) && n < 4; n++ {
		e := lineEnd(rest, i)
		l := bytes.TrimLeft(rest[i:e], " \t*")
		if hasPrefixFold(l, "sent:") || hasPrefixFold(l, "date:") {
			return true
		}
		i = e
	}
	return false
}

func hasPrefixFold(b []byte, p string) bool {
	return len(b) >= len(p) && equalFold(b[:len(p)], p)
}

func containsFold(b []byte, s string) bool {
	for i := 0; i+len(s) <= len(b); i++ {
		if equalFold(b[i:i+len(s)], s) {
			return true
		}
	}
	return false
}
