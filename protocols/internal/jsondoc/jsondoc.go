// Package jsondoc decodes the JSON documents of the strict protocol
// validators (pvp, vcp) with canonjson.Parse, names the JSON types of the
// values in their error messages, and holds the member checks they share
// (a required non-empty string, a required object; the JSON-RPC 2.0
// request members of a2a and vacant).
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

// Start begins the report of one document of protocol: it decodes doc
// as a JSON object (see Object); when that fails, ok is false and the
// report is final, holding the one problem that says why.
func Start(doc []byte, protocol, what string) (r protocols.Report, obj map[string]any, ok bool) {
	r = protocols.Report{Protocol: protocol, Errors: protocols.Problems{}, Summary: map[string]any{}}
	obj, p, ok := Object(doc, what)
	if !ok {
		r.Errors = append(r.Errors, p)
	}
	return r, obj, ok
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

// Null says what a required string member set to null is.
type Null int

const (
	// NullWrongType: null is a value of the wrong type ("must be a
	// string, not null").
	NullWrongType Null = iota
	// NullRefused: null is refused as such ("must not be null").
	NullRefused
	// NullAllowed: null stands for no value; no problem is reported.
	NullAllowed
)

// Member returns obj's member name, adding missing_field to ps (path as
// the field) when it is absent.
func Member(ps *protocols.Problems, obj map[string]any, name, path string) (any, bool) {
	v, present := obj[name]
	if !present {
		ps.Add(protocols.CodeMissingField, path, "%s is required", path)
	}
	return v, present
}

// NonEmptyString checks that obj's member name is present and a non-empty
// string, adding missing_field or invalid_field to ps with path as the
// field (the member's JSON path). It returns the string and whether there
// is one to check further (false for an allowed null too).
func NonEmptyString(ps *protocols.Problems, obj map[string]any, name, path string, null Null) (string, bool) {
	v, present := Member(ps, obj, name, path)
	if !present {
		return "", false
	}
	if v == nil && null != NullWrongType {
		if null == NullRefused {
			ps.Add(protocols.CodeInvalidField, path, "%s must not be null", path)
		}
		return "", false
	}
	s, ok := v.(string)
	if !ok {
		ps.Add(protocols.CodeInvalidField, path, "%s must be a string, not %s", path, TypeName(v))
		return "", false
	}
	if s == "" {
		ps.Add(protocols.CodeInvalidField, path, "%s must not be empty", path)
		return "", false
	}
	return s, true
}

// RequiredObject checks that obj's member name is present and a JSON
// object, adding missing_field or invalid_field to ps with path as the
// field. It returns the object and whether there is one.
func RequiredObject(ps *protocols.Problems, obj map[string]any, name, path string) (map[string]any, bool) {
	v, present := Member(ps, obj, name, path)
	if !present {
		return nil, false
	}
	o, ok := v.(map[string]any)
	if !ok {
		ps.Add(protocols.CodeInvalidField, path, "%s must be an object, not %s", path, TypeName(v))
	}
	return o, ok
}

// RPCVersion checks a JSON-RPC 2.0 request's "jsonrpc" member, which
// must be exactly "2.0" (JSON-RPC 2.0 §4); missing and invalid are the
// protocol's messages for an absent and a wrong one.
func RPCVersion(ps *protocols.Problems, obj map[string]any, missing, invalid string) {
	switch v, ok := obj["jsonrpc"]; {
	case !ok:
		ps.Add(protocols.CodeMissingField, "jsonrpc", "%s", missing)
	case v != "2.0":
		ps.Add(protocols.CodeInvalidField, "jsonrpc", "%s", invalid)
	}
}

// RPCID returns a JSON-RPC 2.0 request's "id", a string or a number
// (JSON-RPC 2.0 §4), or nil after adding a problem to ps: missing says
// why the request needs one.
func RPCID(ps *protocols.Problems, obj map[string]any, missing string) any {
	v, ok := obj["id"]
	if !ok {
		ps.Add(protocols.CodeMissingField, "id", "%s", missing)
		return nil
	}
	switch v.(type) {
	case string, json.Number:
		return v
	}
	ps.Add(protocols.CodeInvalidField, "id", "the JSON-RPC id must be a string or a number")
	return nil
}
