package imapview

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

	"github.com/envelopd/envelopd/dkim"
	"github.com/envelopd/envelopd/store"
)

// verdictHeader returns the header fields the view prepends to every
// message it serves, so that an agent reading IMAP sees
// what envelopd found without a second API:
//
//	Authentication-Results: <authserv-id>; spf=pass smtp.mailfrom=…; dkim=pass header.a=… header.d=… header.s=…;
//	 dmarc=pass header.from=… policy.dmarc=…; arc=none
//	X-Envelopd-Status: duplicate; errors=duplicate_proof
//
// Authentication-Results follows RFC 8601 with authserv-id = host (serve
// --hostname): the sender verdict's spf, dkim, dmarc and arc results when
// sender checks ran; otherwise one dkim result per signature, "dkim=none" for a message
// without signatures, and "none" (no method applied, §2.2) when DKIM was
// not verified (sent copies, or serve without a verifier).
// X-Envelopd-Status is envelopd's own field: the stored status (accepted,
// quarantined, duplicate), the distinct error codes, and for a message
// with a payment proof its payment state (payment=verified, …) as it was
// when the view loaded the message (docs/payments.md): a message's bytes
// do not change under its UID while the view holds it, so a payment that
// settles later shows in a later session.
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
	host = authServ(host)
	var b strings.Builder
	var ar []string
	var rs []dkim.Result
	switch {
	case m.AuthResults == "":
		ar = []string{"none"}
	case strings.Contains(m.AuthResults, "; spf="):
		// The sender verdict's field (senderauth.AuthResults: spf, dkim,
		// dmarc, arc), stored at ingest: its results under this host's
		// id, each reduced to printable ASCII like the rest.
		_, rest, _ := strings.Cut(m.AuthResults, "; ")
		for _, part := range strings.Split(rest, "; ") {
			ar = append(ar, clean(part, 900))
		}
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
	if p := clean(m.Payment, 32); p != "" {
		status = append(status, "payment="+p)
	}
	writeField(&b, "X-Envelopd-Status", clean(m.Status, 32), status, "; ")
	return []byte(b.String())
}

// authServ is the authserv-id for a --hostname: printable ASCII,
// "localhost" when empty (serve's default).
func authServ(host string) string {
	if host = clean(host, 253); host == "" {
		return "localhost"
	}
	return host
}

func (s *Server) host() string { return authServ(s.opts.Hostname) }

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

// spoofedAR replaces the name of an Authentication-Results field that
// claims the view's own authserv-id; it has the same length, so sizes and
// offsets do not move.
const spoofedAR = "X-Spoofed-Auth-Results"

// renameForged renames, in b (a copy of the stored bytes being served),
// every Authentication-Results field of the header section whose
// authserv-id is host: only envelopd speaks for host, and the field it
// prepends is the one to trust (RFC 8601 §5: a receiver MUST remove or
// rename such fields from outside).
func renameForged(b []byte, host string) {
	const name = "Authentication-Results"
	for i := 0; i < len(b); {
		end := bytes.IndexByte(b[i:], '\n')
		if end < 0 {
			end = len(b)
		} else {
			end += i + 1
		}
		line := b[i:end]
		if len(bytes.TrimRight(line, "\r\n")) == 0 {
			return // end of the header section
		}
		if len(line) > len(name) && strings.EqualFold(string(line[:len(name)]), name) {
			rest := bytes.TrimLeft(line[len(name):], " \t")
			if len(rest) > 0 && rest[0] == ':' && authServID(b[i+len(name):], rest) == strings.ToLower(host) {
				copy(b[i:], spoofedAR)
			}
		}
		i = end
	}
}

// authServID returns the lower-cased authserv-id of a field whose value
// starts after the colon of rest, reading on over folded lines of field
// (RFC 8601 §2.2: authserv-id is the first token, before ";"). It reads
// at most 1 KiB of the value: an id is a host name, and a hostile field
// of many short continuation lines must not cost more than that.
func authServID(field, rest []byte) string {
	const limit = 1024
	v := append([]byte{}, rest[1:min(len(rest), limit+1)]...)
	if j := bytes.IndexByte(field, '\n'); j >= 0 {
		for k := j + 1; k < len(field) && (field[k] == ' ' || field[k] == '\t') && len(v) < limit; {
			e := bytes.IndexByte(field[k:], '\n')
			if e < 0 {
				e = len(field) - k
			} else {
				e++
			}
			v = append(v, field[k:k+e]...)
			k += e
		}
	}
	if len(v) > limit {
		v = v[:limit]
	}
	id, _, _ := strings.Cut(strings.TrimSpace(string(v)), ";")
	if f := strings.Fields(id); len(f) > 0 {
		return strings.ToLower(f[0])
	}
	return ""
}
