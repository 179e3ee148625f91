package parse

import (
	"bytes"
	"encoding/json"
	"io"
	"sort"
)

// Encode writes r as `envelopd parse` prints it: one JSON object, indented
// by two spaces, keys in Result's order, no HTML escaping, a final newline.
// extra adds keys after Result's own (sorted; e.g. "dkim"); a key that
// Result already has is not allowed and is skipped.
func Encode(w io.Writer, r *Result, extra map[string]any) error {
	return EncodeWithin(w, r, extra, 0)
}

// EncodeWithin is Encode that prints the JSON compact (one line, the same
// value) when indenting it would make it longer than max bytes (0: no
// limit). Indenting costs two spaces per level on every line, so a deeply
// nested body would otherwise print quadratically large (a
// 30 KB mail of nested JSON printed 50 MB).
func EncodeWithin(w io.Writer, r *Result, extra map[string]any, max int) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return err
	}
	compact := bytes.TrimRight(b.Bytes(), "\n")
	if len(extra) > 0 {
		var own map[string]json.RawMessage
		if err := json.Unmarshal(compact, &own); err != nil {
			return err
		}
		keys := make([]string, 0, len(extra))
		for k := range extra {
			if _, dup := own[k]; !dup {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		tail := []byte{}
		for _, k := range keys {
			var kv bytes.Buffer
			e := json.NewEncoder(&kv)
			e.SetEscapeHTML(false)
			if err := e.Encode(map[string]any{k: extra[k]}); err != nil {
				return err
			}
			kv.Truncate(kv.Len() - 2) // drop "}\n"
			tail = append(tail, ',')
			tail = append(tail, kv.Bytes()[1:]...)
		}
		compact = append(append(compact[:len(compact)-1:len(compact)-1], tail...), '}')
	}
	if max > 0 && IndentedSize(compact) > max {
		_, err := w.Write(append(compact, '\n'))
		return err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, compact, "", "  "); err != nil {
		return err
	}
	out.WriteByte('\n')
	_, err := w.Write(out.Bytes())
	return err
}

// IndentedSize returns len of what json.Indent(dst, src, "", "  ") writes
// for the valid compact JSON src, without writing it: each line break
// inside a non-empty array or object costs 1 + 2×depth bytes and each
// colon one space.
func IndentedSize(src []byte) int {
	n, depth := len(src), 0
	newline := func(d int) { n += 1 + 2*d }
	for i := 0; i < len(src); i++ {
		switch c := src[i]; c {
		case '"':
			for i++; i < len(src) && src[i] != '"'; i++ {
				if src[i] == '\\' {
					i++
				}
			}
		case '{', '[':
			if i+1 < len(src) && (src[i+1] == '}' || src[i+1] == ']') {
				i++ // empty: printed as is
				continue
			}
			depth++
			newline(depth)
		case '}', ']':
			depth--
			newline(depth)
		case ',':
			newline(depth)
		case ':':
			n++
		}
	}
	return n
}
