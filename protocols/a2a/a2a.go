// Package a2a checks plain A2A (Agent2Agent) JSON-RPC 2.0 send requests
// carried as JSON attachments: the request shape of JSON-RPC 2.0 §4, a send
// method, and a message with an id, a role and parts. Both generations of
// the A2A spec are accepted (implementation-notes.md, "A2A"):
//
//   - v0.3: method "message/send" (or "message/stream"), roles "user" and
//     "agent", parts tagged by "kind": text {text}, file {file: {bytes|uri}},
//     data {data: object}; the message itself may say "kind": "message".
//   - v1.0: method "SendMessage" (or "SendStreamingMessage"), roles
//     "ROLE_USER" and "ROLE_AGENT", parts holding exactly one of text, raw,
//     url, file or data.
//
// A part with "kind" is checked by the v0.3 rules, one without by the v1.0
// rules, and either role spelling is accepted with either method, because
// mixed forms are seen in the wild (Vacant's envelopes, which this package
// does not handle: see package vacant). Only the request is checked; A2A has
// no signature, so there is nothing stateful to claim.
package a2a

import (
	"strconv"

	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/protocols/canonjson"
	"github.com/envelopd/envelopd/protocols/internal/jsondoc"
)

// Protocol is the name reported in protocols.Report.
const Protocol = "a2a"

// Methods are the JSON-RPC methods that send a message.
var Methods = map[string]bool{
	"message/send": true, "message/stream": true, // v0.3
	"SendMessage": true, "SendStreamingMessage": true, // v1.0
}

var roles = map[string]bool{"user": true, "agent": true, "ROLE_USER": true, "ROLE_AGENT": true}

// IsSend reports whether a decoded JSON document is a JSON-RPC request with
// one of the send Methods: the detection rule for plain A2A.
func IsSend(doc map[string]any) bool {
	m, _ := doc["method"].(string)
	_, rpc := doc["jsonrpc"]
	return rpc && Methods[m]
}

const msgPath = "params.message"

// Validate checks one A2A send request document.
func Validate(doc []byte) protocols.Report {
	r := protocols.Report{Protocol: Protocol, Errors: protocols.Problems{}, Summary: map[string]any{}}
	m, err := canonjson.ParseObject(doc)
	if err != nil {
		r.Errors = append(r.Errors, protocols.New(protocols.CodeInvalidJSON, "", "%v", err))
		return r
	}
	c := &checker{}
	c.request(m, r.Summary)
	r.Errors = append(r.Errors, c.errs...)
	r.Valid = len(r.Errors) == 0
	return r
}

type checker struct{ errs protocols.Problems }

func (c *checker) add(code protocols.Code, field, format string, args ...any) {
	c.errs.Add(code, field, format, args...)
}

func (c *checker) request(m map[string]any, sum map[string]any) {
	jsondoc.RPCVersion(&c.errs, m, "jsonrpc is required (JSON-RPC 2.0 §4)", "jsonrpc must be exactly \"2.0\"")
	switch v, ok := m["method"]; {
	case !ok:
		c.add(protocols.CodeMissingField, "method", "method is required")
	default:
		s, _ := v.(string)
		if !Methods[s] {
			c.add(protocols.CodeInvalidField, "method", "method must be message/send or SendMessage (or their streaming forms)")
		} else {
			sum["method"] = s
		}
	}
	jsondoc.RPCID(&c.errs, m, "a request that expects a reply needs an id")
	params, ok := c.object(m, "params", "params")
	if !ok {
		return
	}
	msg, ok := c.object(params, "message", msgPath)
	if !ok {
		return
	}
	if k, ok := msg["kind"]; ok && k != "message" {
		c.add(protocols.CodeInvalidField, msgPath+".kind", "a message's kind is \"message\"")
	}
	if id := c.str(msg, "messageId", msgPath+".messageId", true); id != "" {
		sum["message_id"] = id
	}
	if role := c.str(msg, "role", msgPath+".role", true); role != "" {
		if roles[role] {
			sum["role"] = role
		} else {
			c.add(protocols.CodeInvalidField, msgPath+".role", "role must be user or agent (v0.3) or ROLE_USER or ROLE_AGENT (v1.0)")
		}
	}
	if ctx := c.str(msg, "contextId", msgPath+".contextId", false); ctx != "" {
		sum["context_id"] = ctx
	}
	if task := c.str(msg, "taskId", msgPath+".taskId", false); task != "" {
		sum["task_id"] = task
	}
	if v, ok := msg["metadata"]; ok {
		if _, isObj := v.(map[string]any); !isObj && v != nil {
			c.add(protocols.CodeInvalidField, msgPath+".metadata", "metadata must be an object")
		}
	}
	pv, ok := msg["parts"]
	if !ok {
		c.add(protocols.CodeMissingField, msgPath+".parts", "parts is required")
		return
	}
	parts, ok := pv.([]any)
	if !ok || len(parts) == 0 {
		c.add(protocols.CodeInvalidField, msgPath+".parts", "parts must be a non-empty array")
		return
	}
	sum["parts"] = len(parts)
	for i, p := range parts {
		c.part(p, msgPath+".parts["+strconv.Itoa(i)+"]")
	}
}

func (c *checker) object(m map[string]any, key, path string) (map[string]any, bool) {
	v, ok := jsondoc.Member(&c.errs, m, key, path)
	if !ok {
		return nil, false
	}
	o, ok := v.(map[string]any)
	if !ok {
		c.add(protocols.CodeInvalidField, path, "%s must be an object", path)
	}
	return o, ok
}

// str reads a string field; an absent optional one (or null) is "".
func (c *checker) str(m map[string]any, key, path string, required bool) string {
	v, ok := m[key]
	if !ok || (v == nil && !required) {
		if required {
			c.add(protocols.CodeMissingField, path, "%s is required", path)
		}
		return ""
	}
	s, ok := v.(string)
	if !ok || (required && s == "") {
		c.add(protocols.CodeInvalidField, path, "%s must be a non-empty string", path)
		return ""
	}
	return s
}

func (c *checker) part(v any, path string) {
	p, ok := v.(map[string]any)
	if !ok {
		c.add(protocols.CodeInvalidField, path, "a part must be an object")
		return
	}
	if md, ok := p["metadata"]; ok && md != nil {
		if _, isObj := md.(map[string]any); !isObj {
			c.add(protocols.CodeInvalidField, path+".metadata", "metadata must be an object")
		}
	}
	if kind, ok := p["kind"]; ok {
		c.partV03(p, kind, path)
		return
	}
	c.partV10(p, path)
}

// partV03 checks a v0.3 TextPart, FilePart or DataPart.
func (c *checker) partV03(p map[string]any, kind any, path string) {
	switch kind {
	case "text":
		if _, ok := p["text"].(string); !ok {
			c.add(protocols.CodeInvalidField, path+".text", "a text part needs a string text")
		}
	case "file":
		f, ok := p["file"].(map[string]any)
		if !ok {
			c.add(protocols.CodeInvalidField, path+".file", "a file part needs a file object")
			return
		}
		_, hasBytes := f["bytes"].(string)
		_, hasURI := f["uri"].(string)
		if hasBytes == hasURI {
			c.add(protocols.CodeInvalidField, path+".file", "a file has exactly one of bytes (base64) or uri")
		}
	case "data":
		if _, ok := p["data"].(map[string]any); !ok {
			c.add(protocols.CodeInvalidField, path+".data", "a data part needs a data object")
		}
	default:
		c.add(protocols.CodeInvalidField, path+".kind", "part kind must be text, file or data (v0.3)")
	}
}

// partV10 checks a v1.0 Part: exactly one content field.
func (c *checker) partV10(p map[string]any, path string) {
	n := 0
	for _, k := range []string{"text", "raw", "url", "file", "data"} {
		v, ok := p[k]
		if !ok || v == nil {
			continue
		}
		n++
		switch k {
		case "text", "raw", "url":
			if _, isStr := v.(string); !isStr {
				c.add(protocols.CodeInvalidField, path+"."+k, "%s must be a string", k)
			}
		case "file":
			if _, isObj := v.(map[string]any); !isObj {
				c.add(protocols.CodeInvalidField, path+".file", "file must be an object")
			}
		}
	}
	if n != 1 {
		c.add(protocols.CodeInvalidField, path, "a part holds exactly one of text, raw, url, file or data (v1.0), or a kind (v0.3); it has %d", n)
	}
}
