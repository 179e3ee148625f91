package parse

import (
	"bytes"
	"encoding/json"

	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/protocols/envelopay"
)

// FindJSON finds the Envelopay JSON object in body text (spec "Protocol":
// the body may hold prose, a signature, a "TYPE | note" first line and
// pretty-printed JSON; implementation-notes.md: "find a balanced JSON object
// anywhere in the text").
//
// It scans for the first JSON-like candidate: a "{" followed (after white
// space) by a quote or "}", or a "[" followed by "{". Braces that do not
// look like JSON ("{name}" in prose) are passed over. The first candidate
// decides:
//   - an object whose balanced (string-aware) extent parses is returned,
//     verbatim (a sub-slice of text);
//   - an array is an invalid_json Problem (Envelopay needs one object);
//   - a candidate that is unbalanced or does not parse is an invalid_json
//     Problem.
//
// It returns (nil, nil) when the text holds nothing JSON-like.
func FindJSON(text []byte) ([]byte, error) {
	obj, _, err := findJSON(text)
	return obj, err
}

// findJSON is FindJSON that also returns the object's top-level members
// (envelopay.DecodeObject, which validates the candidate in the same pass).
func findJSON(text []byte) ([]byte, map[string]json.RawMessage, error) {
	return findJSONWithin(text, Limits{})
}

// findJSONWithin is findJSON under the JSON size and depth limits: a
// candidate past either is a json_too_large or json_too_deep Problem and is
// not parsed.
func findJSONWithin(text []byte, lim Limits) ([]byte, map[string]json.RawMessage, error) {
	for i := 0; i < len(text); i++ {
		c := text[i]
		if c != '{' && c != '[' {
			continue
		}
		n := skipSpace(text, i+1)
		if c == '{' && (n == len(text) || (text[n] != '"' && text[n] != '}')) {
			continue
		}
		if c == '[' && (n == len(text) || text[n] != '{') {
			continue
		}
		end := balanced(text, i)
		if end < 0 {
			return nil, nil, protocols.New(protocols.CodeInvalidJSON, "body",
				"the JSON starting at byte %d is not terminated (unbalanced %c)", i, c)
		}
		cand := text[i:end]
		if p := lim.CheckJSON(cand, "body"); p != nil {
			return nil, nil, *p
		}
		if c == '[' {
			if json.Valid(cand) {
				return nil, nil, protocols.New(protocols.CodeInvalidJSON, "body",
					"the body holds a JSON array; Envelopay needs a single JSON object")
			}
			return nil, nil, notParsing(cand)
		}
		fields, err := envelopay.DecodeObject(cand)
		if err != nil {
			return nil, nil, notParsing(cand)
		}
		return cand, fields, nil
	}
	return nil, nil, nil
}

func notParsing(cand []byte) error {
	var v any
	err := json.Unmarshal(cand, &v)
	return protocols.New(protocols.CodeInvalidJSON, "body", "the JSON in the body does not parse: %v%s", err, wrapHint(cand))
}

// wrapHint says what to change when the JSON is broken only by line
// breaks inside a string or a number, as a mail client's line wrapping
// (RFC 5322 §2.1.1 recommends 78 characters) leaves it: joined again, it
// parses.
func wrapHint(cand []byte) string {
	if !bytes.ContainsAny(cand, "\r\n") {
		return ""
	}
	for _, join := range []string{" ", ""} {
		fixed := bytes.ReplaceAll(cand, []byte("\r\n"), []byte("\n"))
		fixed = bytes.ReplaceAll(fixed, []byte("\n"), []byte(join))
		if json.Valid(fixed) {
			return "; a line break inside a string or number splits it, as a mail client's line wrapping does: " +
				"send the JSON with wrapping off (one line of at most 998 characters, quoted-printable for longer ones, " +
				"or as a .json attachment)"
		}
	}
	return ""
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// balanced returns the index after the bracket that closes the one at
// text[i], skipping JSON strings (with escapes), or -1 when the text ends
// first. Both kinds of bracket count as nesting; whether they match is left
// to the JSON parser.
func balanced(text []byte, i int) int {
	depth := 0
	for j := i; j < len(text); j++ {
		switch text[j] {
		case '"':
			for j++; j < len(text) && text[j] != '"'; j++ {
				if text[j] == '\\' {
					j++
				}
			}
			if j >= len(text) {
				return -1
			}
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return j + 1
			}
		}
	}
	return -1
}
