package parse

import (
	"bytes"
	"mime"
	"net/mail"
	"strings"

	"github.com/emersion/go-message/charset"
)

// wordDecoder decodes RFC 2047 encoded-words in any charset go-message
// knows (its charset package: ISO-8859-*, Windows-125*, KOI8, GB18030 …).
var wordDecoder = &mime.WordDecoder{CharsetReader: charset.Reader}

// decodeWords decodes RFC 2047 encoded-words in an unstructured header
// value (Subject). On a malformed word it returns the raw value and false.
func decodeWords(v []byte) (string, bool) {
	if !bytes.Contains(v, []byte("=?")) {
		return string(v), true
	}
	s, err := wordDecoder.DecodeHeader(string(v))
	if err != nil {
		return string(v), false
	}
	return s, true
}

// addressList returns the addr-specs of an address-list header value
// (RFC 5322 §3.4) with the domain lower-cased. The fast path handles the
// common `addr` and `Name <addr>` forms; anything else goes through
// net/mail. When that fails, the addresses are scavenged from the value
// (anything between <> or any word with an @) and ok is false.
func addressList(v []byte) (addrs []string, ok bool) {
	if a, fast := simpleAddress(v); fast {
		return []string{a}, true
	}
	p := mail.AddressParser{WordDecoder: wordDecoder}
	list, err := p.ParseList(stripComments(string(v)))
	if err == nil {
		addrs = make([]string, 0, len(list))
		for _, a := range list {
			addrs = append(addrs, lowerDomain(a.Address))
		}
		return addrs, true
	}
	return scavengeAddresses(string(v)), false
}

// simpleAddress parses `local@domain` or `Display Name <local@domain>`
// without quotes, comments, groups, lists or encoded-words.
func simpleAddress(v []byte) (string, bool) {
	if len(v) == 0 || bytes.ContainsAny(v, "\"(),;:\\[]") || bytes.Contains(v, []byte("=?")) {
		return "", false
	}
	a := v
	if lt := bytes.IndexByte(v, '<'); lt >= 0 {
		if v[len(v)-1] != '>' || bytes.IndexByte(v[lt+1:], '<') >= 0 {
			return "", false
		}
		a = v[lt+1 : len(v)-1]
	}
	at := bytes.IndexByte(a, '@')
	if at <= 0 || at == len(a)-1 || bytes.IndexByte(a[at+1:], '@') >= 0 || bytes.ContainsAny(a, " \t<>") {
		return "", false
	}
	return lowerDomain(string(a)), true
}

// stripComments replaces RFC 5322 comments (CFWS, §3.2.2) outside quoted
// strings with a space: net/mail rejects some legal placements of them
// (before an addr-spec) and they never carry the address.
func stripComments(v string) string {
	if !strings.Contains(v, "(") {
		return v
	}
	var b strings.Builder
	quoted := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case quoted && c == '\\' && i+1 < len(v):
			b.WriteByte(c)
			i++
			c = v[i]
		case c == '"':
			quoted = !quoted
		case !quoted && c == '(':
			i = skipComment(v, i) - 1
			c = ' '
		}
		b.WriteByte(c)
	}
	return b.String()
}

func scavengeAddresses(v string) []string {
	out := []string{}
	for _, w := range strings.FieldsFunc(v, func(r rune) bool {
		return r == ' ' || r == '\t' || r == ',' || r == ';' || r == '<' || r == '>' || r == '"' || r == '(' || r == ')'
	}) {
		if i := strings.IndexByte(w, '@'); i > 0 && i < len(w)-1 {
			out = append(out, lowerDomain(w))
		}
	}
	return out
}

// lowerDomain lower-cases the part after the last @ (domains are
// case-insensitive, RFC 5321 §2.4; local parts are not).
func lowerDomain(a string) string {
	i := strings.LastIndexByte(a, '@')
	if i < 0 {
		return a
	}
	d := a[i+1:]
	for j := 0; j < len(d); j++ {
		if 'A' <= d[j] && d[j] <= 'Z' {
			return a[:i+1] + strings.ToLower(d)
		}
	}
	return a
}

// NormalizeMessageID returns a Message-ID in the form envelopd stores and
// compares: comments and white space removed, angle brackets stripped, the
// part after the last @ lower-cased (RFC 5322 §3.6.4: msg-id is
// "<" id-left "@" id-right ">"; the right side is a domain). It returns ""
// for an empty id.
func NormalizeMessageID(s string) string {
	ids := MessageIDList(s)
	if len(ids) == 0 {
		return ""
	}
	return ids[0]
}

// MessageIDList returns the normalised ids of a Message-ID, In-Reply-To or
// References header value (RFC 5322 §3.6.4), in order. It tolerates what
// real mail contains: comments, missing angle brackets (ids then end at
// white space or a comma), commas between ids, folding.
func MessageIDList(header string) []string {
	var out []string
	i := 0
	for i < len(header) {
		c := header[i]
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == ',':
			i++
		case c == '(':
			i = skipComment(header, i)
		case c == '<':
			j := strings.IndexByte(header[i+1:], '>')
			end := len(header)
			if j >= 0 {
				end = i + 1 + j
			}
			if id := cleanID(header[i+1 : end]); id != "" {
				out = append(out, id)
			}
			i = end + 1
		default:
			j := i
			for j < len(header) && !strings.ContainsRune(" \t\r\n,<(", rune(header[j])) {
				j++
			}
			if id := cleanID(header[i:j]); id != "" {
				out = append(out, id)
			}
			i = j
		}
	}
	return out
}

// skipComment returns the index after the (possibly nested) comment at i.
func skipComment(s string, i int) int {
	depth := 0
	for ; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return i + 1
			}
		}
	}
	return len(s)
}

// cleanID removes comments and white space inside an id and lower-cases its
// domain part.
func cleanID(s string) string {
	if strings.ContainsAny(s, " \t\r\n(") {
		var b strings.Builder
		for i := 0; i < len(s); i++ {
			switch s[i] {
			case ' ', '\t', '\r', '\n':
			case '(':
				i = skipComment(s, i) - 1
			default:
				b.WriteByte(s[i])
			}
		}
		s = b.String()
	}
	return lowerDomain(s)
}
