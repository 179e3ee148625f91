// Package jsondoc decodes the JSON documents of the strict protocol
// validators (pvp, vcp) with canonjson.Parse and names the JSON types of
// the values in their error messages.
package jsondoc

import (
	"bytes"
	"encoding/json"

	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/protocols/canonjson"
)

// Decode parses one JSON document with canonjson.Parse (numbers kept as
// json.Number; duplicate keys, lone surrogates and invalid UTF-8 refused).
// A leading UTF-8 byte order mark is skipped, as Python's json.loads does
// for bytes.
func Decode(doc []byte) (any, error) {
	return canonjson.Parse(bytes.TrimPrefix(doc, []byte("\xef\xbb\xbf")))
}

// Object decodes doc (see Decode) as a JSON object. When it is not one, ok
// is false and p says why: invalid_json for a document that does not
// parse, invalid_field for any other value, in a message that calls the
// object what ("a PVP message").
func Object(doc []byte, what string) (obj map[string]any, p protocols.Problem, ok bool) {
	v, err := Decode(doc)
	if err != nil {
		return nil, protocols.New(protocols.CodeInvalidJSON, "", "%v", err), false
	}
	obj, ok = v.(map[string]any)
	if !ok {
		return nil, protocols.New(protocols.CodeInvalidField, "", "%s is a JSON object, not %s", what, TypeName(v)), false
	}
	return obj, protocols.Problem{}, true
}

// TypeName names the JSON type of a value of canonjson's value tree, with
// its article: "null", "a boolean", "a number", "a string", "an array",
// "an object".
func TypeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return "an unknown value"
}
