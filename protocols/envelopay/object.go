package envelopay

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/envelopd/envelopd/protocols"
)

// DecodeObject checks that body is one JSON object ("Protocol": "it must be
// a single JSON object") and returns its top-level members. The values are
// sub-slices of body (not copies). A duplicate key keeps its last value, as
// encoding/json does. Anything else — invalid JSON, an array, a string, text
// after the object — is an invalid_json Problem.
func DecodeObject(body []byte) (map[string]json.RawMessage, error) {
	b := bytes.TrimSpace(body)
	if len(b) == 0 || b[0] != '{' {
		if len(b) > 0 && b[0] == '[' && json.Valid(b) {
			return nil, protocols.New(protocols.CodeInvalidJSON, "body", "the JSON body is an array; Envelopay needs a single JSON object")
		}
		return nil, protocols.New(protocols.CodeInvalidJSON, "body", "the body is not a JSON object")
	}
	if !json.Valid(b) {
		var v any
		err := json.Unmarshal(b, &v)
		return nil, protocols.New(protocols.CodeInvalidJSON, "body", "the JSON object does not parse: %v", err)
	}
	// b is a valid object: walk its members without a second full decode.
	m := make(map[string]json.RawMessage, 12)
	i := skipWS(b, 1)
	for i < len(b) && b[i] != '}' {
		if b[i] == ',' {
			i = skipWS(b, i+1)
			continue
		}
		kEnd := stringEnd(b, i)
		key := unquote(b[i:kEnd])
		i = skipWS(b, kEnd)
		i = skipWS(b, i+1) // the colon
		vEnd := valueEnd(b, i)
		m[key] = json.RawMessage(b[i:vEnd])
		i = skipWS(b, vEnd)
	}
	return m, nil
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index after the JSON string starting at b[i] == '"'.
func stringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(b)
}

// valueEnd returns the index after the JSON value starting at b[i]; b is
// known to be valid JSON.
func valueEnd(b []byte, i int) int {
	depth := 0
	for j := i; j < len(b); j++ {
		switch c := b[j]; c {
		case '"':
			j = stringEnd(b, j) - 1
			if depth == 0 {
				return j + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return j
			}
			depth--
			if depth == 0 {
				return j + 1
			}
		case ',':
			if depth == 0 {
				return j
			}
		case ' ', '\t', '\n', '\r':
			if depth == 0 {
				return j
			}
		}
	}
	return len(b)
}

// unquote decodes a JSON string (valid JSON), fast when it has no escapes.
func unquote(q []byte) string {
	if len(q) >= 2 && bytes.IndexByte(q, '\\') < 0 && utf8.Valid(q) {
		return string(q[1 : len(q)-1])
	}
	var s string
	_ = json.Unmarshal(q, &s)
	return s
}

// String returns the value of a JSON string member and whether it is one.
func String(raw json.RawMessage) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	return unquote(raw), true
}
