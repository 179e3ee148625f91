package envelopay

import (
	"fmt"
	"strings"

	"github.com/envelopd/envelopd/protocols"
)

// Subject is a parsed Envelopay subject line: `TYPE` or `TYPE | note`.
type Subject struct {
	// Type is the lower-case type ("pay"), or "" when the keyword is not
	// one of the nine (unknown_type).
	Type string
	// Keyword is the keyword as written in the subject ("PAY"; "pay" in
	// lenient mode; "REFUND" for an unknown type).
	Keyword string
	// Note is the text after the bar, without surrounding white space.
	Note string
}

// ParseSubject parses a (decoded, unfolded) subject line ("Protocol" /
// "Subject parsing"). It returns a protocols.Problem error with code
// unknown_type when the subject has the shape ^[A-Z]+(\s*\|.*)?$ but the
// keyword is not one of the nine (the Subject then carries Keyword and
// Note), and not_envelopay for any other subject, including Re:/Fwd:
// prefixes and lower-case keywords.
//
// With lenient set (the reference implementation's reading,
// implementation-notes.md), repeated leading "Re:" prefixes are stripped
// (never "Fwd:") and a known keyword matches in any case. The unknown_type
// shape stays all-caps.
func ParseSubject(subject string, lenient bool) (Subject, error) {
	s := strings.Trim(subject, " \t\r\n\f")
	if lenient {
		s = stripRe(s)
	}
	n := 0
	for n < len(s) && isLetter(s[n]) {
		n++
	}
	kw, rest := s[:n], s[n:]
	if n == 0 || !barOrEnd(rest) {
		return Subject{}, notEnvelopay(subject, lenient)
	}
	note := ""
	if rest != "" {
		note = strings.Trim(rest, " \t\r\n\f")[1:] // drop the bar
		note = strings.Trim(note, " \t\r\n\f")
	}
	for i, k := range Keywords {
		if kw == k || (lenient && strings.EqualFold(kw, k)) {
			return Subject{Type: Types[i], Keyword: kw, Note: note}, nil
		}
	}
	if isUpper(kw) {
		return Subject{Keyword: kw, Note: note}, protocols.New(protocols.CodeUnknownType, "subject",
			"unknown Envelopay type %q; supported: %s", kw, strings.Join(Keywords, ", "))
	}
	return Subject{}, notEnvelopay(subject, lenient)
}

func notEnvelopay(subject string, lenient bool) error {
	if subject == "" {
		return protocols.New(protocols.CodeNotEnvelopay, "subject", "empty subject; an Envelopay subject is TYPE or TYPE | note")
	}
	msg := fmt.Sprintf("subject %q is not TYPE or TYPE | note with one of the nine all-caps types", subject)
	if hint := subjectHint(subject, lenient); hint != "" {
		msg += "; " + hint
	}
	return protocols.New(protocols.CodeNotEnvelopay, "subject", "%s", msg)
}

// subjectHint says what to change when a subject fails only by a common
// mistake: a lower-case keyword, a reply or forward prefix ("Re:",
// "Fwd:"). It names the subject to write and, where the receiver's
// lenient mode would accept the mail as it is, --lenient.
func subjectHint(subject string, lenient bool) string {
	s := strings.Trim(subject, " \t\r\n\f")
	var prefixes []string
	for {
		p, rest, ok := replyPrefix(s)
		if !ok {
			break
		}
		prefixes, s = append(prefixes, p), rest
	}
	n := 0
	for n < len(s) && isLetter(s[n]) {
		n++
	}
	kw, rest := s[:n], s[n:]
	if n == 0 || !barOrEnd(rest) {
		return ""
	}
	idx := -1
	for i, k := range Keywords {
		if strings.EqualFold(kw, k) {
			idx = i
		}
	}
	if idx < 0 {
		return ""
	}
	want := Keywords[idx] + rest
	fwd := false
	for _, p := range prefixes {
		fwd = fwd || !strings.EqualFold(p, "re")
	}
	var what []string
	if len(prefixes) > 0 {
		what = append(what, fmt.Sprintf("drop the %q prefix", strings.Join(prefixes, ": ")+":"))
	}
	if kw != Keywords[idx] {
		what = append(what, fmt.Sprintf("write the type in capitals (%s, not %s)", Keywords[idx], kw))
	}
	hint := strings.Join(what, " and ") + fmt.Sprintf(": Subject: %s", want)
	if !lenient && !fwd {
		hint += " (or receive with --lenient, which accepts this subject)"
	}
	return hint
}

// replyPrefix splits a leading "Re:", "Fwd:" or "Fw:" (any case, optional
// space before the colon) off s.
func replyPrefix(s string) (prefix, rest string, ok bool) {
	for _, p := range []string{"re", "fwd", "fw"} {
		if len(s) <= len(p) || !strings.EqualFold(s[:len(p)], p) {
			continue
		}
		r := strings.TrimLeft(s[len(p):], " \t")
		if r == "" || r[0] != ':' {
			continue
		}
		return s[:len(p)], strings.TrimLeft(r[1:], " \t"), true
	}
	return "", s, false
}

// barOrEnd reports whether rest is empty or `\s*\|.*`.
func barOrEnd(rest string) bool {
	r := strings.TrimLeft(rest, " \t\r\n\f")
	return rest == "" || (r != "" && r[0] == '|')
}

// stripRe removes repeated leading "Re:" prefixes (any case, optional space
// before the colon).
func stripRe(s string) string {
	for {
		if len(s) < 3 || !strings.EqualFold(s[:2], "re") {
			return s
		}
		r := strings.TrimLeft(s[2:], " \t")
		if r == "" || r[0] != ':' {
			return s
		}
		s = strings.TrimLeft(r[1:], " \t")
	}
}

func isLetter(c byte) bool { return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' }

func isUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 'A' || s[i] > 'Z' {
			return false
		}
	}
	return s != ""
}
