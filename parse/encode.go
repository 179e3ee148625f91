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
	var out bytes.Buffer
	if err := json.Indent(&out, compact, "", "  "); err != nil {
		return err
	}
	out.WriteByte('\n')
	_, err := w.Write(out.Bytes())
	return err
}
