package canonjson

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// UnsupportedValueError is returned for a value the encoders cannot print
// canonically: a Go type outside the value tree, an invalid number literal,
// a Python float that is not finite, or a string that is not valid UTF-8.
type UnsupportedValueError struct {
	Path string
	Msg  string
}

func (e *UnsupportedValueError) Error() string {
	if e.Path == "" {
		return "canonjson: " + e.Msg
	}
	return fmt.Sprintf("canonjson: %s: %s", e.Path, e.Msg)
}

// variant is what differs between the encoders.
type variant struct {
	js          bool // JS rules, else Python
	ensureASCII bool // Python ensure_ascii=True
}

// JS returns v as JavaScript's JSON.stringify prints it after sorting every
// object's keys (UTF-16 code-unit order). A number literal that overflows a
// double prints as null, as JSON.stringify(Infinity) does.
func JS(v any) ([]byte, error) {
	return encode(v, variant{js: true})
}

// Python returns v as Python's json.dumps(v, sort_keys=True,
// separators=(",", ":"), ensure_ascii=ensureASCII) prints it, for v as
// json.loads would have read the same document.
func Python(v any, ensureASCII bool) ([]byte, error) {
	return encode(v, variant{ensureASCII: ensureASCII})
}

func encode(v any, vr variant) ([]byte, error) {
	var b []byte
	b, err := vr.value(b, v, "")
	if err != nil {
		return nil, err
	}
	return b, nil
}

func (vr variant) value(b []byte, v any, path string) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case bool:
		return strconv.AppendBool(b, x), nil
	case string:
		return vr.str(b, x, path)
	case json.Number:
		return vr.number(b, string(x), path)
	case float64:
		return vr.float(b, x, path)
	case float32:
		return vr.float(b, float64(x), path)
	case int, int8, int16, int32:
		return strconv.AppendInt(b, reflect.ValueOf(x).Int(), 10), nil
	case int64:
		if vr.js {
			return vr.float(b, float64(x), path)
		}
		return strconv.AppendInt(b, x, 10), nil
	case uint:
		return vr.uint(b, uint64(x), path)
	case uint8, uint16, uint32:
		return strconv.AppendUint(b, reflect.ValueOf(x).Uint(), 10), nil
	case uint64:
		return vr.uint(b, x, path)
	case []any:
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = vr.value(b, e, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case []string:
		a := make([]any, len(x))
		for i, s := range x {
			a[i] = s
		}
		return vr.value(b, a, path)
	case map[string]any:
		return vr.object(b, x, path)
	case map[string]string:
		m := make(map[string]any, len(x))
		for k, s := range x {
			m[k] = s
		}
		return vr.object(b, m, path)
	default:
		return nil, &UnsupportedValueError{Path: path, Msg: fmt.Sprintf("unsupported Go type %T", v)}
	}
}

func (vr variant) uint(b []byte, x uint64, path string) ([]byte, error) {
	if vr.js {
		return vr.float(b, float64(x), path)
	}
	return strconv.AppendUint(b, x, 10), nil
}

func (vr variant) object(b []byte, m map[string]any, path string) ([]byte, error) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	if vr.js {
		slices.SortFunc(keys, compareUTF16)
	} else {
		slices.Sort(keys) // byte order of UTF-8 is code-point order
	}
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = vr.str(b, k, path); err != nil {
			return nil, err
		}
		b = append(b, ':')
		if b, err = vr.value(b, m[k], path+"."+k); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// compareUTF16 orders strings by UTF-16 code units, as JavaScript's default
// sort does. It differs from code-point order only where a character above
// U+FFFF (a surrogate pair, 0xD800–0xDBFF first) meets one in U+E000–U+FFFF.
func compareUTF16(a, b string) int {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if ra != rb {
			return int(unit(ra)) - int(unit(rb))
		}
		a, b = a[na:], b[nb:]
	}
	return len(a) - len(b)
}

// unit is the first UTF-16 code unit of r.
func unit(r rune) rune {
	if r >= 0x10000 {
		hi, _ := utf16.EncodeRune(r)
		return hi
	}
	return r
}

const hexDigits = "0123456789abcdef"

func (vr variant) str(b []byte, s string, path string) ([]byte, error) {
	if !utf8.ValidString(s) {
		return nil, &UnsupportedValueError{Path: path, Msg: "string is not valid UTF-8"}
	}
	b = append(b, '"')
	for _, r := range s {
		switch r {
		case '"', '\\':
			b = append(b, '\\', byte(r))
		case '\b', '\f', '\n', '\r', '\t':
			b = append(b, '\\', shortEscapes[r])
		default:
			switch {
			case r < 0x20:
				b = appendU(b, r)
			case vr.ensureASCII && r > 0x7e:
				// Python's ensure_ascii escapes everything outside
				// printable ASCII, DEL included; astral characters as
				// a surrogate pair.
				if r >= 0x10000 {
					hi, lo := utf16.EncodeRune(r)
					b = appendU(appendU(b, hi), lo)
				} else {
					b = appendU(b, r)
				}
			default:
				b = utf8.AppendRune(b, r)
			}
		}
	}
	return append(b, '"'), nil
}

func appendU(b []byte, r rune) []byte {
	return append(b, '\\', 'u', hexDigits[r>>12&0xf], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf])
}

// number prints a literal kept from the document.
func (vr variant) number(b []byte, lit string, path string) ([]byte, error) {
	if !validNumber(lit) {
		return nil, &UnsupportedValueError{Path: path, Msg: fmt.Sprintf("invalid number literal %q", lit)}
	}
	isInt := !strings.ContainsAny(lit, ".eE")
	if !vr.js && isInt {
		// json.loads reads an integer literal as an exact int; only the
		// sign of zero and leading zeros ("-0") change.
		n, ok := new(big.Int).SetString(lit, 10)
		if !ok {
			return nil, &UnsupportedValueError{Path: path, Msg: fmt.Sprintf("invalid integer %q", lit)}
		}
		return n.Append(b, 10), nil
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil && !isRangeErr(err) {
		return nil, &UnsupportedValueError{Path: path, Msg: fmt.Sprintf("invalid number %q", lit)}
	}
	return vr.float(b, f, path)
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

func validNumber(s string) bool {
	p := &parser{data: []byte(s)}
	_, err := p.number()
	return err == nil && p.pos == len(s)
}

func (vr variant) float(b []byte, f float64, path string) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		if vr.js {
			return append(b, "null"...), nil // JSON.stringify(Infinity)
		}
		return nil, &UnsupportedValueError{Path: path, Msg: "Python would print a non-finite float as Infinity/NaN, which is not JSON"}
	}
	if vr.js {
		return appendJSNumber(b, f), nil
	}
	return appendPythonFloat(b, f), nil
}

// shortest returns the shortest decimal digits that round-trip f (|f| > 0)
// and the decimal point position n: f = 0.d1d2… × 10^n.
func shortest(f float64) (digits string, n int) {
	s := strconv.FormatFloat(math.Abs(f), 'e', -1, 64) // d.ddde±xx
	mant, exp, _ := strings.Cut(s, "e")
	e, _ := strconv.Atoi(exp)
	return strings.Replace(mant, ".", "", 1), e + 1
}

// appendJSNumber follows ECMA-262 Number::toString (radix 10).
func appendJSNumber(b []byte, f float64) []byte {
	if f == 0 {
		return append(b, '0') // -0 prints as 0
	}
	if f < 0 {
		b = append(b, '-')
	}
	d, n := shortest(f)
	k := len(d)
	switch {
	case k <= n && n <= 21:
		b = append(b, d...)
		b = append(b, strings.Repeat("0", n-k)...)
	case 0 < n && n <= 21:
		b = append(b, d[:n]...)
		b = append(b, '.')
		b = append(b, d[n:]...)
	case -6 < n && n <= 0:
		b = append(b, "0."...)
		b = append(b, strings.Repeat("0", -n)...)
		b = append(b, d...)
	default:
		b = append(b, d[0])
		if k > 1 {
			b = append(b, '.')
			b = append(b, d[1:]...)
		}
		b = append(b, 'e')
		if n-1 >= 0 {
			b = append(b, '+')
		}
		b = strconv.AppendInt(b, int64(n-1), 10)
	}
	return b
}

// appendPythonFloat follows CPython's float repr: shortest round-trip digits,
// fixed notation with at least one fractional digit when the decimal point
// position n is in -3..16, else d.ddde±XX with at least two exponent digits.
func appendPythonFloat(b []byte, f float64) []byte {
	if math.Signbit(f) {
		b = append(b, '-')
	}
	if f == 0 {
		return append(b, "0.0"...)
	}
	d, n := shortest(f)
	k := len(d)
	switch {
	case n > 16 || n < -3:
		b = append(b, d[0])
		if k > 1 {
			b = append(b, '.')
			b = append(b, d[1:]...)
		}
		e := n - 1
		b = append(b, 'e')
		if e < 0 {
			b = append(b, '-')
			e = -e
		} else {
			b = append(b, '+')
		}
		if e < 10 {
			b = append(b, '0')
		}
		b = strconv.AppendInt(b, int64(e), 10)
	case n <= 0:
		b = append(b, "0."...)
		b = append(b, strings.Repeat("0", -n)...)
		b = append(b, d...)
	case n >= k:
		b = append(b, d...)
		b = append(b, strings.Repeat("0", n-k)...)
		b = append(b, ".0"...)
	default:
		b = append(b, d[:n]...)
		b = append(b, '.')
		b = append(b, d[n:]...)
	}
	return b
}

// shortEscapes are the two-character escapes of the control characters
// that have one (RFC 8259 §7), by character.
var shortEscapes = [...]byte{'\b': 'b', '\f': 'f', '\n': 'n', '\r': 'r', '\t': 't'}
