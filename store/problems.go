package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/envelopd/envelopd/protocols"
)

// A message's errors and warnings (messages.errors, messages.warnings) are
// JSON arrays of protocols.Problem. Most often they are the lists of the
// stored parse result itself (messages.result, a compressed frame), which
// then holds them once: the column is '' and a reader takes the result's
// top-level "errors" or "warnings" value (problemCol, readProblems). A
// column whose list differs from the result's (a stateful error added at
// ingest, a warning added later, a result that bounded its lists) holds
// the whole list. Rows stored before hold their lists as they were.
//
// The error and warning codes are kept in a column of their own
// (messages.codes, the filter tags "code:…" of codeTags), since SQL can
// no longer read them from the lists: the web inbox's filter tags come
// from it (SQLite's message_tags, Postgres's messages_tags index).

// problemsJSON is the JSON of a list of problems as stored: "[]" for
// none; no HTML escaping, as parse.Result writes its own lists, so that a
// list equal to the result's is the same bytes (problemCol).
func problemsJSON(ps protocols.Problems) string {
	if len(ps) == 0 {
		return "[]"
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(ps); err != nil {
		return "[]"
	}
	return string(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}

// problemCol returns what to store in messages.errors (key "errors") or
// messages.warnings (key "warnings") for the list whose JSON is list: ”
// when result (the parse result's JSON, as stored) holds exactly those
// bytes under its top-level key, else list itself.
func problemCol(list string, result []byte, key string) string {
	if v, ok := topLevel(result, key); ok && string(v) == list {
		return ""
	}
	return list
}

// decodeProblemCol is the list a column read from a stored row holds:
// the result's (JSON, decoded from the row) when the column is ”.
func decodeProblemCol(col string, result []byte, key string) protocols.Problems {
	if col == "" {
		v, _ := topLevel(result, key)
		return decodeProblems(string(v))
	}
	return decodeProblems(col)
}

// decodeProblems decodes a list of problems; "" is none.
func decodeProblems(s string) protocols.Problems {
	ps := protocols.Problems{}
	if s != "" {
		_ = json.Unmarshal([]byte(s), &ps) // written by problemsJSON: always valid
	}
	return ps
}

// readProblems reads message id's errors and warnings (suffix ends the
// statement: the dialect's forUpdate or "").
func readProblems(tx Tx, id int64, suffix string) (errs, warns protocols.Problems, err error) {
	var errsCol, warnsCol string
	var result []byte
	if err := tx.QueryRow(`SELECT errors, warnings, result FROM messages WHERE id = ?`+suffix, id).
		Scan(&errsCol, &warnsCol, &result); err != nil {
		return nil, nil, err
	}
	return problemsOfRow(id, errsCol, warnsCol, result)
}

// problemsOfRow decodes the errors and warnings columns of a row with its
// stored result, which is decoded only when a column is ”.
func problemsOfRow(id int64, errsCol, warnsCol string, stored []byte) (errs, warns protocols.Problems, err error) {
	var result []byte
	if (errsCol == "" || warnsCol == "") && len(stored) > 0 {
		if result, err = raws.decodeResult(stored); err != nil {
			return nil, nil, fmt.Errorf("store: message %d: %w", id, err)
		}
	}
	return decodeProblemCol(errsCol, result, "errors"), decodeProblemCol(warnsCol, result, "warnings"), nil
}

// setWarnings records message id's courtesy OOPS (rec) and its warnings
// after its insert, and the codes that follow from them with its errors.
func setWarnings(tx Tx, id int64, rec *OOPSRecord, errs, warns protocols.Problems) error {
	_, err := tx.Exec(`UPDATE messages SET oops = ?, warnings = ?, codes = ? WHERE id = ?`,
		[]byte(jsonOrEmpty(rec, "null")), problemsJSON(warns), tx.dialect().codes(codeTags(errs, warns)), id)
	return err
}

// codeTags returns the filter tags "code:…" of a message's errors and
// warnings, sorted, each once; none longer than maxTagBytes (the store
// never looks such a tag up: rareTag). nil when there are none.
func codeTags(errs, warns protocols.Problems) []string {
	if len(errs)+len(warns) == 0 {
		return nil
	}
	tags := make([]string, 0, len(errs)+len(warns))
	for _, l := range []protocols.Problems{errs, warns} {
		for _, p := range l {
			if t := "code:" + validUTF8(string(p.Code)); len(t) <= maxTagBytes {
				tags = append(tags, t)
			}
		}
	}
	slices.Sort(tags)
	return slices.Compact(tags)
}

// validUTF8 is s as it reads back from JSON that encoding/json wrote:
// each byte of an invalid UTF-8 sequence is U+FFFD.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		b.WriteRune(r)
	}
	return b.String()
}

// topLevel returns the value (its JSON bytes) of the top-level key key of
// the JSON object j, written exactly so (no escape in the key); ok is
// false when j is not an object, holds the key more than once or none,
// or ends early. Writer and reader both use it, so what a ” column
// stands for is what this finds, whatever a JSON decoder would make of
// an odd object.
func topLevel(j []byte, key string) (v []byte, ok bool) {
	if len(j) == 0 || j[0] != '{' {
		return nil, false
	}
	rest := j[1:]
	for {
		rest = skipSpace(rest)
		if len(rest) > 0 && rest[0] == '}' {
			return v, v != nil
		}
		k, r, kok := jsonString(rest)
		if !kok {
			return nil, false
		}
		r = skipSpace(r)
		if len(r) == 0 || r[0] != ':' {
			return nil, false
		}
		r = skipSpace(r[1:])
		n := valueLen(r)
		if n <= 0 {
			return nil, false
		}
		if len(k) == len(key)+2 && string(k[1:len(k)-1]) == key {
			if v != nil {
				return nil, false
			}
			v = r[:n]
		}
		rest = skipSpace(r[n:])
		if len(rest) > 0 && rest[0] == ',' {
			rest = rest[1:]
			continue
		}
		if len(rest) > 0 && rest[0] == '}' {
			return v, v != nil
		}
		return nil, false
	}
}

// valueLen is the length of the JSON value at the front of b (a string,
// an object or array with its nesting, or a literal or number up to the
// next delimiter), 0 when b ends inside it.
func valueLen(b []byte) int {
	if len(b) == 0 {
		return 0
	}
	switch b[0] {
	case '"':
		s, _, ok := jsonString(b)
		if !ok {
			return 0
		}
		return len(s)
	case '{', '[':
		depth := 0
		for i := 0; i < len(b); i++ {
			switch b[i] {
			case '"':
				s, _, ok := jsonString(b[i:])
				if !ok {
					return 0
				}
				i += len(s) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return 0
	}
	for i, c := range b {
		switch c {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			return i
		}
	}
	return 0
}

func skipSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r' || b[0] == '\n') {
		b = b[1:]
	}
	return b
}
