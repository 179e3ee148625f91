package dkim

import (
	"bytes"
	"strings"
	"unicode"
)

// field is one header field as received: its name and its value (everything
// after the first colon, continuation lines included).
type field struct {
	name  string
	value string
}

// headerFields splits the header section of a raw message into fields, the
// way go-msgauth reads it (RFC 5322 section 2.2.3: a line starting with a
// space or tab continues the previous field), so that the signatures found
// here are the signatures go-msgauth verifies, in the same order. complete
// is false when the header is not terminated by an empty line.
func headerFields(raw []byte) (fields []field, complete bool) {
	var lines []string // the current field's lines
	flush := func() {
		if lines != nil {
			// Like go-msgauth, split name and value on the first colon of
			// the whole field, continuation lines included.
			name, value, _ := strings.Cut(strings.Join(lines, "\r\n"), ":")
			fields = append(fields, field{name: strings.TrimSpace(name), value: value})
		}
		lines = nil
	}
	rest := raw
	for len(rest) > 0 {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			// As bufio.Reader.ReadLine: a line end is LF or CRLF; a CR
			// before an unterminated end of input stays.
			line, rest = bytes.TrimSuffix(rest[:i], []byte("\r")), rest[i+1:]
		} else {
			rest = nil
		}
		if len(line) == 0 {
			flush()
			return fields, true
		}
		if lines != nil && (line[0] == ' ' || line[0] == '\t') {
			lines = append(lines, string(line))
			continue
		}
		flush()
		lines = []string{string(line)}
	}
	flush()
	return fields, false
}

// countFields returns how many fields are named name (case-insensitively).
func countFields(fields []field, name string) int {
	n := 0
	for _, f := range fields {
		if strings.EqualFold(f.name, name) {
			n++
		}
	}
	return n
}

// tags parses a tag=value list (RFC 6376 section 3.2) leniently: it is only
// used to label results, the strict parse is go-msgauth's. Whitespace inside
// values is removed (it is insignificant in the tags read here).
func tags(value string) map[string]string {
	m := make(map[string]string)
	for _, spec := range strings.Split(value, ";") {
		k, v, ok := strings.Cut(spec, "=")
		if !ok {
			continue
		}
		k = strings.TrimSpace(k)
		if _, dup := m[k]; dup || k == "" {
			continue
		}
		m[k] = stripSpace(v)
	}
	return m
}

func stripSpace(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return -1
		}
		return r
	}, s)
}
