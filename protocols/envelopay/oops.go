package envelopay

import (
	"bytes"
	"encoding/json"

	"github.com/envelopd/envelopd/protocols"
)

// OOPSFor returns the compact JSON body of an OOPS reply ("OOPS"):
//
//	{"v":"0.2.0","type":"oops","note":NOTE,"error":{"code":CODE,…extra},"ref":REF}
//
// ref is left out when empty. The error object holds code plus the extra
// keys (sorted); for unknown_type it also carries "supported", the nine
// lower-case types, as "OOPS" asks ("reply OOPS with unknown_type and the
// list of supported types"), unless extra sets it. The body has no id: the
// sender adds one (NewID("oops")) if it wants to.
func OOPSFor(code protocols.Code, ref, note string, extra map[string]any) []byte {
	e := make(map[string]any, len(extra)+2)
	for k, v := range extra {
		e[k] = v
	}
	e["code"] = string(code)
	if _, ok := e["supported"]; !ok && code == protocols.CodeUnknownType {
		e["supported"] = Types
	}
	var b bytes.Buffer
	b.WriteString(`{"v":"` + Version + `","type":"oops","note":`)
	writeJSON(&b, note)
	b.WriteString(`,"error":`)
	writeJSON(&b, e)
	if ref != "" {
		b.WriteString(`,"ref":`)
		writeJSON(&b, ref)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// writeJSON encodes v without HTML escaping and without the encoder's
// trailing newline. Values here are strings and maps of JSON-able values;
// one that cannot be encoded (a channel in extra) is written as null.
func writeJSON(b *bytes.Buffer, v any) {
	var t bytes.Buffer
	enc := json.NewEncoder(&t)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		b.WriteString("null")
		return
	}
	b.Write(bytes.TrimSuffix(t.Bytes(), []byte("\n")))
}
