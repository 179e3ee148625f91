package parse

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/envelopd/envelopd/protocols/envelopay"
)

// maxSubjectLine bounds the first line read as a subject: RFC 5322 §2.1.1
// limits a line to 998 characters.
const maxSubjectLine = 998

// SubjectLine reads the Envelopay reference's way of writing a reply
// whose transport sets no subject (AgentMail replies carry none): the
// first non-blank line of text is "TYPE" or "TYPE | note", then the JSON
// body. The line is the message's subject ("Protocol" / "Subject
// parsing", read strictly: upper-case keyword, no Re:) only when its TYPE
// is one of the nine and agrees with the "type" of the JSON object that
// follows it; ok is false otherwise, and for text whose first line is
// the JSON itself. rest is text after that line (the body without it).
func SubjectLine(text []byte) (subj envelopay.Subject, rest []byte, ok bool) {
	i := 0
	for i < len(text) {
		e := bytes.IndexByte(text[i:], '\n')
		if e < 0 {
			e = len(text) - i
		}
		line := bytes.TrimSpace(text[i : i+e])
		next := i + e
		if next < len(text) {
			next++
		}
		if len(line) == 0 {
			i = next
			continue
		}
		if len(line) > maxSubjectLine || line[0] == '{' {
			return envelopay.Subject{}, nil, false
		}
		s, err := envelopay.ParseSubject(string(line), false)
		if err != nil || s.Type == "" {
			return envelopay.Subject{}, nil, false
		}
		obj, fields, ferr := findJSON(text[next:])
		if ferr != nil || obj == nil {
			return envelopay.Subject{}, nil, false
		}
		var typ string
		if json.Unmarshal(fields["type"], &typ) != nil || !strings.EqualFold(typ, s.Type) {
			return envelopay.Subject{}, nil, false
		}
		return s, text[next:], true
	}
	return envelopay.Subject{}, nil, false
}
