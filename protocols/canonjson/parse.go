// Package canonjson produces the canonical JSON byte strings that the
// tunnelled agent protocols sign and hash. Go's encoding/json matches none of
// them as is (it escapes <, >, & and U+2028, and formats floats its own way),
// so each variant is written out here, following
// shared/specs/implementation-notes.md:
//
//   - JS: what JavaScript's JSON.stringify prints for an object whose keys
//     were sorted recursively (AICP §3.1, "AIRC"). Keys in UTF-16 code-unit
//     order, no whitespace, no HTML escaping, U+2028/U+2029 and all other
//     non-ASCII raw, numbers in JavaScript's Number#toString form. For
//     ordinary inputs this equals RFC 8785 (JCS).
//   - Python: what Python's json.dumps(v, sort_keys=True,
//     separators=(",", ":"), ensure_ascii=…) prints (Vacant P6 signing bytes
//     with ensure_ascii=False, VCP idempotency digests with ensure_ascii=True).
//     Keys in code-point order; integers as written; floats in Python repr
//     (1.0, 0.1, 1e-05, 1e+16).
//
// Values are the tree that Parse returns: nil, bool, string, json.Number
// (the literal as written in the document), []any and map[string]any. The
// encoders also take float64 (a float: Python prints its repr), the Go
// integer types, []string and map[string]string, so that callers can build
// signing dictionaries directly. A json.Number whose literal has a fraction
// or an exponent is a float for Python (as json.loads reads it) and every
// number is a double for JS (as JSON.parse reads it).
//
// Parse is stricter than JSON.parse and json.loads in three documented ways:
// a duplicate key in an object is an error (the two reference parsers keep
// the last value silently, which lets two verifiers disagree about signed
// content, and RFC 8785 / I-JSON forbid it); a \u escape that leaves a lone
// UTF-16 surrogate is an error (Go strings cannot carry one, so its
// canonical bytes could not be reproduced); and invalid UTF-8 is an error.
package canonjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth is how deeply arrays and objects may nest in Parse.
const MaxDepth = 512

// ErrSyntax is wrapped by every error Parse returns, so that callers can tell
// "not JSON" (errors.Is(err, ErrSyntax)) from other failures.
var ErrSyntax = errors.New("canonjson: invalid JSON")

// SyntaxError is a Parse failure at a byte offset.
type SyntaxError struct {
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("canonjson: invalid JSON at offset %d: %s", e.Offset, e.Msg)
}

// Unwrap makes errors.Is(err, ErrSyntax) true.
func (e *SyntaxError) Unwrap() error { return ErrSyntax }

// Parse decodes one JSON document into the value tree described in the
// package doc, keeping number literals as json.Number. Leading and trailing
// whitespace is allowed; anything else after the value is an error.
func Parse(data []byte) (any, error) {
	p := &parser{data: data}
	p.ws()
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.ws()
	if p.pos != len(p.data) {
		return nil, p.errf("unexpected data after the JSON value")
	}
	return v, nil
}

// ParseObject is Parse for documents that must be a JSON object.
func ParseObject(data []byte) (map[string]any, error) {
	v, err := Parse(data)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, &SyntaxError{Offset: 0, Msg: "the document is not a JSON object"}
	}
	return m, nil
}

type parser struct {
	data []byte
	pos  int
}

func (p *parser) errf(format string, args ...any) error {
	return &SyntaxError{Offset: p.pos, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) ws() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) value(depth int) (any, error) {
	if p.pos >= len(p.data) {
		return nil, p.errf("unexpected end of input")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object(depth + 1)
	case c == '[':
		return p.array(depth + 1)
	case c == '"':
		return p.string()
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case p.lit("true"):
		return true, nil
	case p.lit("false"):
		return false, nil
	case p.lit("null"):
		return nil, nil
	default:
		return nil, p.errf("unexpected character %q", c)
	}
}

func (p *parser) lit(s string) bool {
	if len(p.data)-p.pos >= len(s) && string(p.data[p.pos:p.pos+len(s)]) == s {
		p.pos += len(s)
		return true
	}
	return false
}

func (p *parser) object(depth int) (any, error) {
	m := map[string]any{}
	err := p.members(depth, '}', "object", func() error {
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return p.errf("expected a string key")
		}
		keyAt := p.pos
		k, err := p.string()
		if err != nil {
			return err
		}
		if _, dup := m[k]; dup {
			return &SyntaxError{Offset: keyAt, Msg: fmt.Sprintf("duplicate key %q", k)}
		}
		p.ws()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return p.errf("expected ':'")
		}
		p.pos++
		p.ws()
		m[k], err = p.value(depth)
		return err
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

func (p *parser) array(depth int) (any, error) {
	a := []any{}
	err := p.members(depth, ']', "array", func() error {
		v, err := p.value(depth)
		a = append(a, v)
		return err
	})
	if err != nil {
		return nil, err
	}
	return a, nil
}

// members reads an object or array nested depth deep, what, from its
// opening to closer, calling member at each member (white space read).
func (p *parser) members(depth int, closer byte, what string, member func() error) error {
	switch empty, err := p.open(depth, closer); {
	case err != nil:
		return err
	case empty:
		return nil
	}
	for {
		p.ws()
		if err := member(); err != nil {
			return err
		}
		switch end, err := p.sep(closer, what); {
		case err != nil:
			return err
		case end:
			return nil
		}
	}
}

// open reads the opening of an object or array nested depth deep and
// whether it closes at once (closer, true: it is empty).
func (p *parser) open(depth int, closer byte) (empty bool, err error) {
	if depth > MaxDepth {
		return false, p.errf("nesting deeper than %d", MaxDepth)
	}
	p.pos++ // { or [
	p.ws()
	if p.pos < len(p.data) && p.data[p.pos] == closer {
		p.pos++
		return true, nil
	}
	return false, nil
}

// sep reads what follows a member or an element: ',' (another follows)
// or closer (the end, true); what names the container in errors.
func (p *parser) sep(closer byte, what string) (end bool, err error) {
	p.ws()
	if p.pos >= len(p.data) {
		return false, p.errf("unexpected end of input in %s", what)
	}
	switch p.data[p.pos] {
	case ',':
		p.pos++
		return false, nil
	case closer:
		p.pos++
		return true, nil
	}
	return false, p.errf("expected ',' or '%c'", closer)
}

func (p *parser) number() (any, error) {
	start := p.pos
	d := p.data
	if p.pos < len(d) && d[p.pos] == '-' {
		p.pos++
	}
	switch {
	case p.pos < len(d) && d[p.pos] == '0':
		p.pos++
	case p.pos < len(d) && d[p.pos] >= '1' && d[p.pos] <= '9':
		for p.pos < len(d) && d[p.pos] >= '0' && d[p.pos] <= '9' {
			p.pos++
		}
	default:
		return nil, p.errf("invalid number")
	}
	if p.pos < len(d) && d[p.pos] == '.' {
		p.pos++
		if !p.digits() {
			return nil, p.errf("invalid number: digit expected after '.'")
		}
	}
	if p.pos < len(d) && (d[p.pos] == 'e' || d[p.pos] == 'E') {
		p.pos++
		if p.pos < len(d) && (d[p.pos] == '+' || d[p.pos] == '-') {
			p.pos++
		}
		if !p.digits() {
			return nil, p.errf("invalid number: digit expected in exponent")
		}
	}
	return json.Number(d[start:p.pos]), nil
}

func (p *parser) digits() bool {
	start := p.pos
	for p.pos < len(p.data) && p.data[p.pos] >= '0' && p.data[p.pos] <= '9' {
		p.pos++
	}
	return p.pos > start
}

func (p *parser) string() (string, error) {
	p.pos++ // opening quote
	var buf []byte
	d := p.data
	for {
		if p.pos >= len(d) {
			return "", p.errf("unterminated string")
		}
		c := d[p.pos]
		switch {
		case c == '"':
			p.pos++
			return string(buf), nil
		case c == '\\':
			r, err := p.escape()
			if err != nil {
				return "", err
			}
			buf = utf8.AppendRune(buf, r)
		case c < 0x20:
			return "", p.errf("control character %#02x in string", c)
		case c < utf8.RuneSelf:
			buf = append(buf, c)
			p.pos++
		default:
			r, size := utf8.DecodeRune(d[p.pos:])
			if r == utf8.RuneError && size <= 1 {
				return "", p.errf("invalid UTF-8")
			}
			buf = append(buf, d[p.pos:p.pos+size]...)
			p.pos += size
		}
	}
}

// escape reads one backslash escape (a surrogate pair counts as one).
func (p *parser) escape() (rune, error) {
	d := p.data
	if p.pos+1 >= len(d) {
		return 0, p.errf("unterminated escape")
	}
	c := d[p.pos+1]
	p.pos += 2
	switch c {
	case '"', '\\', '/':
		return rune(c), nil
	case 'b':
		return '\b', nil
	case 'f':
		return '\f', nil
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case 'u':
		r, err := p.hex4()
		if err != nil {
			return 0, err
		}
		if !utf16.IsSurrogate(r) {
			return r, nil
		}
		if r >= 0xdc00 {
			return 0, p.errf("lone low surrogate \\u%04x", r)
		}
		if p.pos+1 < len(d) && d[p.pos] == '\\' && d[p.pos+1] == 'u' {
			p.pos += 2
			lo, err := p.hex4()
			if err != nil {
				return 0, err
			}
			if lo >= 0xdc00 && lo <= 0xdfff {
				return utf16.DecodeRune(r, lo), nil
			}
		}
		return 0, p.errf("lone high surrogate \\u%04x", r)
	default:
		return 0, p.errf("invalid escape \\%c", c)
	}
}

func (p *parser) hex4() (rune, error) {
	if p.pos+4 > len(p.data) {
		return 0, p.errf("short \\u escape")
	}
	n, err := strconv.ParseUint(string(p.data[p.pos:p.pos+4]), 16, 32)
	if err != nil {
		return 0, p.errf("invalid \\u escape")
	}
	p.pos += 4
	return rune(n), nil
}
