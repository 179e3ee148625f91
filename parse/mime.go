package parse

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"mime"
	"strings"
	"unicode/utf8"

	"github.com/emersion/go-message/charset"

	"github.com/envelopd/envelopd/protocols"
)

// maxDepth bounds multipart nesting; deeper parts are reported, not read.
const maxDepth = 20

// part is one leaf of the MIME tree (RFC 2045, RFC 2046).
type part struct {
	mediaType   string // lower case, e.g. "text/plain"
	params      params
	disposition string // "inline", "attachment" or ""
	filename    string
	cte         string // lower-case Content-Transfer-Encoding
	raw         []byte // still transfer-encoded
}

// walker flattens a MIME tree into its leaves, collecting problems as it
// goes; it never fails, whatever the input.
type walker struct {
	// maxParts bounds the entities walked (Limits.MaxParts); skipped
	// counts those past it, which are not read.
	maxParts, walked, skipped int
	parts                     []part
	errs                      protocols.Problems
	scratch                   header // reused for part headers
}

func (w *walker) problem(field, format string, args ...any) {
	w.errs = append(w.errs, protocols.New(protocols.CodeInvalidField, field, format, args...))
}

// walk adds the entity with header h and body b. defType is the default
// media type (text/plain, or message/rfc822 inside multipart/digest,
// RFC 2046 §5.1.5).
func (w *walker) walk(h header, b []byte, depth int, defType string) {
	if w.maxParts > 0 && w.walked >= w.maxParts {
		w.skipped++
		return
	}
	w.walked++
	mt, ps := defType, params{}
	if v, ok := h.get("content-type"); ok && len(v) > 0 {
		mt, ps = mediaType(v)
		if mt == "" {
			w.problem("content-type", "unparseable Content-Type %q; read as text/plain", clipLine(v))
			mt = "text/plain"
		}
	}
	if strings.HasPrefix(mt, "multipart/") {
		if depth >= maxDepth {
			w.problem("mime", "multipart nesting deeper than %d levels; inner parts ignored", maxDepth)
			return
		}
		boundary := ps.boundary
		if boundary == "" {
			w.problem("content-type", "%s without a boundary parameter; body read as text/plain", mt)
			w.leaf(h, b, "text/plain", params{})
			return
		}
		parts, closed := splitMultipart(b, boundary)
		if parts == nil {
			w.problem("mime", "no part delimited by boundary %q; body read as text/plain", boundary)
			w.leaf(h, b, "text/plain", params{})
			return
		}
		if !closed {
			w.problem("mime", "multipart body truncated: the closing boundary %q is missing", "--"+boundary+"--")
		}
		sub := "text/plain"
		if mt == "multipart/digest" {
			sub = "message/rfc822"
		}
		for _, p := range parts {
			ph, pb, bad := readHeaderInto(w.scratch, p)
			w.scratch = ph
			if bad != nil {
				w.problem("mime", "malformed part header line %q; taken as the start of the part body", clipLine(bad))
			}
			w.walk(ph, pb, depth+1, sub)
		}
		return
	}
	w.leaf(h, b, mt, ps)
}

func (w *walker) leaf(h header, b []byte, mt string, ps params) {
	p := part{mediaType: mt, params: ps, raw: b}
	if v, ok := h.get("content-transfer-encoding"); ok {
		p.cte = lowerASCII(bytes.TrimSpace(v))
	}
	if v, ok := h.get("content-disposition"); ok {
		d, dp := mediaType(v)
		p.disposition = d
		p.filename = dp.filename
	}
	if p.filename == "" {
		p.filename = ps.name
	}
	if strings.Contains(p.filename, "=?") {
		if s, err := wordDecoder.DecodeHeader(p.filename); err == nil {
			p.filename = s
		}
	}
	w.parts = append(w.parts, p)
}

// params are the Content-Type and Content-Disposition parameters envelopd
// uses (RFC 2045 §5.1, RFC 2046, RFC 3676, RFC 2183).
type params struct {
	charset, boundary, format, delsp, name, filename string
}

func (p *params) set(k string, v string) {
	if dst := p.field([]byte(k)); dst != nil {
		*dst = v
	}
}

// field returns where the parameter named k (any case) is kept, or nil.
func (p *params) field(k []byte) *string {
	switch {
	case equalFold(k, "charset"):
		return &p.charset
	case equalFold(k, "boundary"):
		return &p.boundary
	case equalFold(k, "format"):
		return &p.format
	case equalFold(k, "delsp"):
		return &p.delsp
	case equalFold(k, "name"):
		return &p.name
	case equalFold(k, "filename"):
		return &p.filename
	}
	return nil
}

// mediaType parses a Content-Type or Content-Disposition value. It returns
// "" when even the type cannot be read; bad parameters are dropped (mime
// returns the type with ErrInvalidMediaParameter). Plain values — tokens
// and simple quoted strings — are read here without allocating; anything
// else (RFC 2231 continuations, escapes, comments) goes to package mime.
func mediaType(v []byte) (string, params) {
	var ps params
	semi := bytes.IndexByte(v, ';')
	if semi < 0 {
		semi = len(v)
	}
	t := bytes.TrimSpace(v[:semi])
	if isToken(t) && simpleParams(v[semi:], &ps) {
		return lowerASCII(t), ps
	}
	ps = params{}
	mt, m, err := mime.ParseMediaType(string(v))
	if err != nil && err != mime.ErrInvalidMediaParameter {
		return "", ps
	}
	for k, val := range m {
		ps.set(k, val)
	}
	return mt, ps
}

// simpleParams parses `; key=token` and `; key="text"` parameters; false
// means "not simple, use package mime".
func simpleParams(b []byte, ps *params) bool {
	i := 0
	for {
		i = skipSpace(b, i)
		if i == len(b) {
			return true
		}
		if b[i] != ';' {
			return false
		}
		i = skipSpace(b, i+1)
		if i == len(b) {
			return true
		}
		k := i
		for i < len(b) && b[i] != '=' && b[i] != ';' && b[i] != ' ' && b[i] != '\t' {
			i++
		}
		key := b[k:i]
		if i == len(b) || b[i] != '=' || !isToken(key) || bytes.IndexByte(key, '/') >= 0 || bytes.IndexByte(key, '*') >= 0 {
			return false
		}
		i++
		var val []byte
		if i < len(b) && b[i] == '"' {
			e := bytes.IndexByte(b[i+1:], '"')
			if e < 0 {
				return false
			}
			val = b[i+1 : i+1+e]
			if bytes.IndexByte(val, '\\') >= 0 {
				return false
			}
			i += e + 2
		} else {
			s := i
			for i < len(b) && b[i] != ';' && b[i] != ' ' && b[i] != '\t' && b[i] != '\r' && b[i] != '\n' {
				if b[i] == '"' || b[i] == '(' {
					return false
				}
				i++
			}
			val = b[s:i]
		}
		if dst := ps.field(key); dst != nil {
			*dst = string(val)
		}
	}
}

// common are the media types, dispositions and encodings most mail uses;
// lowerASCII returns these without allocating.
var common = []string{"text/plain", "text/html", "multipart/alternative", "multipart/mixed",
	"multipart/related", "application/json", "application/octet-stream", "application/pdf",
	"inline", "attachment", "7bit", "8bit", "quoted-printable", "base64", "binary"}

// lowerASCII returns b lower-cased as a string.
func lowerASCII(b []byte) string {
	for _, c := range common {
		if equalFold(b, c) {
			return c
		}
	}
	for _, c := range b {
		if 'A' <= c && c <= 'Z' {
			return strings.ToLower(string(b))
		}
	}
	return string(b)
}

// isToken: a bare type/subtype or disposition type, no parameters.
func isToken(t []byte) bool {
	slashes := 0
	for _, c := range t {
		switch {
		case c == '/':
			slashes++
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '+', c == '.', c == '_':
		default:
			return false
		}
	}
	return len(t) > 0 && slashes <= 1 && t[0] != '/' && t[len(t)-1] != '/'
}

// splitMultipart returns the body parts between the delimiter lines
// "--boundary" (RFC 2046 §5.1.1); closed is false when the close delimiter
// "--boundary--" is missing (the last part then runs to the end). The
// preamble and epilogue are dropped. parts is nil when no delimiter occurs.
func splitMultipart(b []byte, boundary string) (parts [][]byte, closed bool) {
	parts = make([][]byte, 0, 4)
	delim := []byte("--" + boundary)
	start := -1 // start of the current part's content
	for i := 0; i < len(b); {
		j := bytes.Index(b[i:], delim)
		if j < 0 {
			break
		}
		j += i
		if j > 0 && b[j-1] != '\n' {
			i = j + len(delim) // not at the start of a line
			continue
		}
		e := lineEnd(b, j)
		rest := trimEOL(b[j+len(delim) : e])
		isClose := bytes.HasPrefix(rest, []byte("--"))
		if isClose {
			rest = rest[2:]
		}
		if len(bytes.Trim(rest, " \t")) != 0 {
			i = j + len(delim) // not a delimiter line
			continue
		}
		if start >= 0 {
			parts = append(parts, b[start:contentEnd(b, start, j)])
		}
		if isClose {
			if len(parts) == 0 {
				return nil, true
			}
			return parts, true
		}
		start = e
		i = e
	}
	if start >= 0 {
		parts = append(parts, b[start:])
	}
	if len(parts) == 0 {
		return nil, false
	}
	return parts, false
}

// contentEnd drops the line break that belongs to the delimiter at j.
func contentEnd(b []byte, start, j int) int {
	if j > start && b[j-1] == '\n' {
		j--
		if j > start && b[j-1] == '\r' {
			j--
		}
	}
	return j
}

// decodeTransfer undoes the Content-Transfer-Encoding (RFC 2045 §6). It is
// lenient: bad quoted-printable escapes are kept literally, base64 is
// decoded as far as it goes; problem says what was wrong ("" when nothing).
func decodeTransfer(raw []byte, cte string) (out []byte, problem string) {
	switch strings.TrimSpace(cte) {
	case "", "7bit", "8bit", "binary":
		return raw, ""
	case "quoted-printable":
		out, bad := decodeQP(raw)
		if bad > 0 {
			return out, fmt.Sprintf("%d invalid quoted-printable escape(s) kept as written", bad)
		}
		return out, ""
	case "base64":
		return decodeBase64(raw)
	default:
		return raw, fmt.Sprintf("unknown Content-Transfer-Encoding %q; content left as is", cte)
	}
}

// decodeQP decodes quoted-printable (RFC 2045 §6.7): =XX escapes (either
// case), soft line breaks "=" CRLF, trailing white space before a line
// break dropped. A "=" not followed by two hex digits or a line break is
// kept and counted in bad.
func decodeQP(b []byte) (out []byte, bad int) {
	out = make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case c == '=':
			if i+2 < len(b) && unhex(b[i+1]) >= 0 && unhex(b[i+2]) >= 0 {
				out = append(out, byte(unhex(b[i+1])<<4|unhex(b[i+2])))
				i += 2
				continue
			}
			j := i + 1
			for j < len(b) && (b[j] == ' ' || b[j] == '\t') {
				j++
			}
			if j == len(b) || b[j] == '\n' || (b[j] == '\r' && j+1 < len(b) && b[j+1] == '\n') {
				if j < len(b) && b[j] == '\r' {
					j++
				}
				i = j // soft line break
				continue
			}
			bad++
			out = append(out, c)
		case c == ' ' || c == '\t':
			j := i
			for j < len(b) && (b[j] == ' ' || b[j] == '\t') {
				j++
			}
			if j < len(b) && b[j] != '\r' && b[j] != '\n' {
				out = append(out, b[i:j]...)
			}
			i = j - 1
		default:
			out = append(out, c)
		}
	}
	return out, bad
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'A' <= c && c <= 'F':
		return int(c - 'A' + 10)
	case 'a' <= c && c <= 'f':
		return int(c - 'a' + 10)
	}
	return -1
}

// decodeBase64 decodes base64 ignoring white space (RFC 2045 §6.8) and
// tolerating missing padding; on corrupt input it returns what decoded
// before the damage.
func decodeBase64(b []byte) ([]byte, string) {
	// Fast path, without a cleaned copy of the input (a
	// large attachment should not cost twice its size): the decoder skips
	// CR and LF itself. Other white space, or any error, takes the path
	// below, whose messages count bytes of the cleaned text.
	if bytes.IndexAny(b, " \t") < 0 {
		s := bytes.TrimRight(bytes.TrimRight(b, "\r\n"), "=")
		out := make([]byte, base64.RawStdEncoding.DecodedLen(len(s)))
		if n, err := base64.RawStdEncoding.Decode(out, s); err == nil {
			return out[:n], ""
		}
	}
	clean := make([]byte, 0, len(b))
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			clean = append(clean, c)
		}
	}
	out := make([]byte, base64.StdEncoding.DecodedLen(len(clean))+3)
	s := bytes.TrimRight(clean, "=")
	n, err := base64.RawStdEncoding.Decode(out, s)
	if err != nil {
		if ce, ok := err.(base64.CorruptInputError); ok {
			return out[:n], fmt.Sprintf("invalid base64 at byte %d; decoded the %d bytes before it", int64(ce), n)
		}
		return out[:n], "invalid base64: " + err.Error()
	}
	return out[:n], ""
}

// toUTF8 converts text in the named charset to UTF-8 with go-message's
// charset package. An unknown charset is a problem; the text is then taken
// as UTF-8 if it is valid UTF-8 and as ISO-8859-1 otherwise.
func toUTF8(b []byte, label string) ([]byte, string) {
	switch strings.ToLower(strings.TrimSpace(label)) {
	case "", "utf-8", "utf8", "us-ascii", "ascii":
		return b, ""
	}
	r, err := charset.Reader(label, bytes.NewReader(b))
	if err == nil {
		out, err := io.ReadAll(r)
		if err == nil {
			return out, ""
		}
		return latin1OrUTF8(b), fmt.Sprintf("cannot decode charset %q: %v", label, err)
	}
	return latin1OrUTF8(b), fmt.Sprintf("unknown charset %q; read as UTF-8 or ISO-8859-1", label)
}

func latin1OrUTF8(b []byte) []byte {
	if utf8.Valid(b) {
		return b
	}
	out := make([]byte, 0, len(b)+len(b)/4)
	for _, c := range b {
		out = utf8.AppendRune(out, rune(c))
	}
	return out
}
