package main

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// termSafe makes a stored string — a subject, an address, an SMTP error
// text: all written by strangers — safe to print in a table on a
// terminal: control characters (C0 including TAB and
// newlines, DEL, C1), the bidirectional-text controls that reorder what
// is shown (Unicode TR #9: U+200E/F, U+202A–U+202E, U+2066–U+2069) and
// bytes that are not UTF-8 are written as Go escapes (\x1b, \u202e), so
// no escape sequence reaches the terminal and a cell stays on one line.
// JSON output is never passed through it: it stays exact.
func termSafe(s string) string {
	clean := true
	for _, r := range s {
		if needsEscape(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r < 0x80 && needsEscape(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case needsEscape(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

func needsEscape(r rune) bool {
	switch {
	case r == utf8.RuneError:
		return true // a byte that is not UTF-8 (or U+FFFD itself, shown escaped)
	case unicode.IsControl(r):
		return true
	case r == 0x200e || r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}
