package imapview

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/envelopd/envelopd/dkim"
	"github.com/envelopd/envelopd/store"
)

// verdictHeader returns the header fields the view prepends to every
// message it serves (issue 17 §4), so that an agent reading IMAP sees
// what envelopd found without a second API:
//
//	Authentication-Results: <authserv-id>; dkim=pass header.a=… header.d=… header.s=…
//	X-Envelopd-Status: duplicate; errors=duplicate_proof
//
// Authentication-Results follows RFC 8601 with authserv-id = host (serve
// --hostname): one dkim result per signature, "dkim=none" for a message
// without signatures, and "none" (no method applied, §2.2) when DKIM was
// not verified (sent copies, or serve without a verifier).
// X-Envelopd-Status is envelopd's own field: the stored status (accepted,
// quarantined, duplicate) and the distinct error codes.
//
// The stored bytes are never changed: the view serves these fields
// followed by them, and every size and offset (RFC822.SIZE, BODY[]<n.m>,
// SEARCH LARGER) is of the served bytes. Since the fields come first, a
// client taking the first occurrence of either field (Python's email,
// go-message) gets envelopd's, not a copy the sender wrote into the mail.
// Everything taken from the mail (DKIM d=, s=, reasons) is reduced to
// printable ASCII and bounded, so no sender text can add a field or a
// line.
func verdictHeader(host string, m store.FolderMessage) []byte {
	host = clean(host, 253)
	if host == "" {
		host = "localhost"
	}
	var b strings.Builder
	var ar []string
	var rs []dkim.Result
	switch {
	case m.AuthResults == "":
		ar = []string{"none"}
	case len(m.DKIM) == 0 || json.Unmarshal(m.DKIM, &rs) != nil || len(rs) == 0:
		ar = []string{"dkim=none"}
	default:
		for _, r := range rs {
			r = dkim.Result{Domain: clean(r.Domain, 253), Selector: clean(r.Selector, 64),
				Algorithm: clean(r.Algorithm, 32), Result: clean(r.Result, 16), Error: clean(r.Error, 120)}
			ar = append(ar, clean(strings.TrimPrefix(dkim.AuthResults("", []dkim.Result{r}), "; "), 900))
		}
	}
	writeField(&b, "Authentication-Results", host, ar, "; ")
	status := []string{}
	var codes []string
	for _, e := range m.Errors {
		if c := clean(string(e.Code), 64); c != "" && !slices.Contains(codes, c) {
			codes = append(codes, c)
		}
	}
	if len(codes) > 0 {
		status = append(status, "errors="+strings.Join(codes, ","))
	}
	writeField(&b, "X-Envelopd-Status", clean(m.Status, 32), status, "; ")
	return []byte(b.String())
}

// writeField writes "name: first" and the parts after sep, folding
// before a part that would take the line past 78 characters (RFC 5322
// §2.1.1), and ends the field with CRLF.
func writeField(b *strings.Builder, name, first string, parts []string, sep string) {
	line := name + ": " + first
	b.WriteString(line)
	n := len(line)
	for _, p := range parts {
		s := strings.TrimRight(sep, " ")
		if n+len(sep)+len(p) > 78 {
			b.WriteString(s + "\r\n\t" + p)
			n = 1 + len(p)
			continue
		}
		b.WriteString(sep + p)
		n += len(sep) + len(p)
	}
	b.WriteString("\r\n")
}

// clean keeps printable ASCII (and space) of s, '?' for anything else,
// at most max bytes.
func clean(s string, max int) string {
	if len(s) > max {
		s = s[:max]
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return '?'
		}
		return r
	}, s)
}
