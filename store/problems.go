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
// then holds them once: the column is empty and a reader takes the
// result's top-level "errors" or "warnings" value (problemCols,
// decodeProblemCols). A column whose list differs from the result's (a stateful error added at
// ingest, a warning added later, a result that bounded its lists) holds
// the whole list. Rows stored before hold their lists as they were.
//
// The error and warning codes are kept in a column of their own
// (messages.codes, the filter tags "code:…" of codeTags), since SQL can
// no longer read them from the lists: the web inbox's filter tags come
// from it (SQLite's message_tags, Postgres's messages_tags index).

// problemsJSON is the JSON of a list of problems as stored: "[]" for
// none; no HTML escaping, as parse.Result writes its own lists, so that a
// list equal to the result's is the same bytes (problemCols).
func problemsJSON(ps protocols.Problems) string {
	if len(ps) == 0 {
		return "[]"
	}
	if j, err := json.Marshal(ps); err == nil && !bytes.Contains(j, []byte(`\u00`)) {
		return string(j) // no <, > or & escaped: the same bytes
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(ps); err != nil {
		return "[]"
	}
	return string(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}

// problemCols returns what to store in messages.errors and
// messages.warnings for the lists whose JSON is errs and warns: each
// empty when result (the parse result's JSON, as stored) holds exactly those
// bytes under its top-level key "errors" or "warnings", else the list
// itself. No errors are stored as "[]" all the same (2 bytes more), so
// that a reader of the errors alone (FolderMessages) decodes the result
// only for mail that has some.
func problemCols(errs, warns string, result []byte) (errsCol, warnsCol string) {
	e, w := topLevel(result)
	errsCol, warnsCol = errs, warns
	if e != nil && errs != "[]" && string(e) == errs {
		errsCol = ""
	}
	if w != nil && string(w) == warns {
		warnsCol = ""
	}
	return errsCol, warnsCol
}

// decodeProblemCols are the lists the errors and warnings columns read
// from a stored row hold: the result's (JSON, decoded from the row) for
// a column that is empty.
func decodeProblemCols(errsCol, warnsCol string, result []byte) (errs, warns protocols.Problems) {
	if errsCol == "" || warnsCol == "" {
		e, w := topLevel(result)
		if errsCol == "" {
			errsCol = string(e)
		}
		if warnsCol == "" {
			warnsCol = string(w)
		}
	}
	return decodeProblems(errsCol), decodeProblems(warnsCol)
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
// stored result, which is decoded only when a column is empty.
func problemsOfRow(id int64, errsCol, warnsCol string, stored []byte) (errs, warns protocols.Problems, err error) {
	var result []byte
	if (errsCol == "" || warnsCol == "") && len(stored) > 0 {
		if result, err = raws.decodeResult(stored); err != nil {
			return nil, nil, fmt.Errorf("store: message %d: %w", id, err)
		}
	}
	errs, warns = decodeProblemCols(errsCol, warnsCol, result)
	return errs, warns, nil
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

// topLevel returns the values (their JSON bytes) of the top-level keys
// "errors" and "warnings" of the JSON object j, each written exactly so
// (no escape in the key), in one pass; a value is nil when j is not an
// object, holds its key more than once or none, or ends early. Writer and
// reader both use it, so what an empty column stands for is what this finds,
// whatever a JSON decoder would make of an odd object.
func topLevel(j []byte) (errs, warns []byte) {
	if len(j) == 0 || j[0] != '{' {
		return nil, nil
	}
	var dupErrs, dupWarns bool
	rest := j[1:]
	for {
		rest = skipSpace(rest)
		if len(rest) > 0 && rest[0] == '}' {
			break
		}
		k, r, kok := jsonString(rest)
		if !kok {
			return nil, nil
		}
		r = skipSpace(r)
		if len(r) == 0 || r[0] != ':' {
			return nil, nil
		}
		r = skipSpace(r[1:])
		n := valueLen(r)
		if n <= 0 {
			return nil, nil
		}
		switch string(k) {
		case `"errors"`:
			dupErrs = dupErrs || errs != nil
			errs = r[:n]
		case `"warnings"`:
			dupWarns = dupWarns || warns != nil
			warns = r[:n]
		}
		rest = skipSpace(r[n:])
		if len(rest) > 0 && rest[0] == ',' {
			rest = rest[1:]
			continue
		}
		if len(rest) > 0 && rest[0] == '}' {
			break
		}
		return nil, nil
	}
	if dupErrs {
		errs = nil
	}
	if dupWarns {
		warns = nil
	}
	return errs, warns
}

// valueLen is the length of the JSON value at the front of b (a string,
// an object or array with what it nests, or a literal or number up to
// the next delimiter), 0 when b ends inside it.
func valueLen(b []byte) int {
	depth := 0
	for i := 0; i < len(b); {
		switch c := b[i]; {
		case c == '"':
			s, _, ok := jsonString(b[i:])
			if !ok {
				return 0
			}
			i += len(s)
		case c == '{' || c == '[':
			depth, i = depth+1, i+1
			continue
		case c == '}' || c == ']':
			if depth == 0 {
				return i // the end of a literal
			}
			depth, i = depth-1, i+1
		case depth == 0 && (c == ',' || c == ' ' || c == '\t' || c == '\r' || c == '\n'):
			return i
		default:
			i++
			continue
		}
		if depth == 0 {
			return i // a string or a container closed
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
