package pvp

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/protocols/internal/jsondoc"
)

// Validate checks one PVP message (the bytes of a JSON attachment) and
// reports its problems and a summary (session, sender, type, id, and seq
// when present).
func Validate(doc []byte) protocols.Report {
	r, env, ok := jsondoc.Start(doc, Protocol, "a PVP message")
	if !ok {
		return r
	}
	var c checker
	c.envelope(env)
	r.Errors = append(r.Errors, c.Problems...)
	for _, k := range [...]string{"session", "sender", "type", "id"} {
		if s, ok := env[k].(string); ok {
			r.Summary[k] = s
		}
	}
	if n, ok := env["seq"].(json.Number); ok {
		if i, err := n.Int64(); err == nil {
			r.Summary["seq"] = i
		}
	}
	r.Valid = len(r.Errors) == 0
	if r.Valid {
		r.Checks, r.Sets = sessionState(env)
		claims, checks, sets := gateState(env)
		r.Claims = append(r.Claims, claims...)
		r.Checks = append(r.Checks, checks...)
		r.Sets = append(r.Sets, sets...)
	}
	if t, _ := env["type"].(string); t == "secret.share" {
		if p, _ := env["payload"].(map[string]any); p != nil {
			if _, ok := p["value"]; ok {
				r.Withhold = "a PVP secret.share carrying a secret value (pvp-v1.0.0 §20.3: never persisted)"
			}
		}
	}
	return r
}

// checker collects the problems of a message in field order.
type checker struct{ protocols.Problems }

// envelope checks MessageEnvelope (§4.1) and then the payload of its type.
func (c *checker) envelope(env map[string]any) {
	if v, ok := env["v"]; !ok {
		c.Add(protocols.CodeMissingField, "v", "v is required")
	} else if n, isNum := v.(json.Number); !isNum {
		c.Add(protocols.CodeInvalidField, "v", "v must be the integer 1, not %s", jsondoc.TypeName(v))
	} else if f, err := strconv.ParseFloat(string(n), 64); err != nil || f != Version {
		c.Add(protocols.CodeUnsupportedVersion, "v", "protocol version %s is not supported (only 1, §3.3)", n)
	}
	for _, f := range [...]string{"id", "session", "sender"} {
		c.nonEmpty(env, f)
	}
	if _, ok := env["ts"]; !ok {
		c.Add(protocols.CodeMissingField, "ts", "ts is required")
	} else {
		c.check(env, "", field{name: "ts", kind: kTime})
	}
	msgType, typeOK := c.nonEmpty(env, "type")
	if typeOK && !IsPrimitive(msgType) {
		c.Add(protocols.CodeUnknownType, "type", "type %q is not one of the 41 PVP primitives (§4.3)", msgType)
		typeOK = false
	}
	c.check(env, "", opt("ref", kString))
	c.check(env, "", opt("seq", kCount))
	c.check(env, "", opt("causal_refs", kStrings))
	c.check(env, "", opt("fork", kString))

	p, ok := env["payload"]
	if !ok {
		c.Add(protocols.CodeMissingField, "payload", "payload is required")
		return
	}
	payload, ok := p.(map[string]any)
	if !ok {
		c.Add(protocols.CodeInvalidField, "payload", "payload must be an object, not %s", jsondoc.TypeName(p))
		return
	}
	if !typeOK {
		return
	}
	for _, f := range schema(msgType) {
		c.check(payload, "payload.", f)
	}
	c.rules(msgType, payload)
}

// rules are the payload rules the spec states in prose.
func (c *checker) rules(msgType string, p map[string]any) {
	switch msgType {
	case "context.add": // §9.1
		if p["content"] == nil && p["content_ref"] == nil {
			c.Add(protocols.CodeMissingField, "payload.content", "context.add needs content or content_ref (§9.1)")
		}
	case "session.join": // §6.3
		if vs, ok := p["supported_versions"].([]any); ok {
			for _, v := range vs {
				if n, ok := v.(json.Number); ok {
					if f, err := strconv.ParseFloat(string(n), 64); err == nil && f == Version {
						return
					}
				}
			}
			c.Add(protocols.CodeUnsupportedVersion, "payload.supported_versions", "the participant does not support protocol version 1 (§6.3)")
		}
	case "interrupt.acknowledge": // §15.2
		if p["action_taken"] == "ignored" {
			if s, _ := p["ignore_reason"].(string); s == "" {
				c.Add(protocols.CodeMissingField, "payload.ignore_reason", "an ignored interrupt needs an ignore_reason (§15.2)")
			}
		}
	case "secret.share": // §20.3
		if _, ok := p["value"]; ok {
			c.Add(protocols.CodeInvalidField, "payload.value", "secret.share carries value_ref, never the secret value (§10, §20.3)")
		}
	}
}

// AckAllowed reports whether an interrupt of the urgency may be answered
// with action_taken (§15.2: "pause" may be ignored with a reason, "stop"
// and "emergency" may not).
func AckAllowed(urgency, actionTaken string) bool {
	if !oneOf(urgency, urgencies) || !oneOf(actionTaken, ackActions) {
		return false
	}
	return actionTaken != "ignored" || urgency == "pause"
}

// nonEmpty checks a required non-empty string member.
func (c *checker) nonEmpty(obj map[string]any, name string) (string, bool) {
	return jsondoc.NonEmptyString(&c.Problems, obj, name, name, jsondoc.NullWrongType)
}

// check checks one field of obj; prefix is the JSON path of obj.
func (c *checker) check(obj map[string]any, prefix string, f field) {
	path := prefix + f.name
	v, ok := obj[f.name]
	if !ok {
		if f.req {
			c.Add(protocols.CodeMissingField, path, "%s is required", path)
		}
		return
	}
	if v == nil && !f.req && f.kind != kAny {
		// An optional member set to null: JSON.stringify of undefined
		// drops it, but explicit nulls are common; treat as absent.
		return
	}
	c.value(v, path, f)
}

func (c *checker) value(v any, path string, f field) {
	bad := func(want string) {
		c.Add(protocols.CodeInvalidField, path, "%s must be %s, not %s", path, want, jsondoc.TypeName(v))
	}
	switch f.kind {
	case kAny:
	case kString:
		if _, ok := v.(string); !ok {
			bad("a string")
		}
	case kBool:
		if _, ok := v.(bool); !ok {
			bad("a boolean")
		}
	case kNumber:
		if _, ok := v.(json.Number); !ok {
			bad("a number")
		}
	case kCount:
		if n, ok := v.(json.Number); !ok || !isCount(n) {
			if ok {
				c.Add(protocols.CodeInvalidField, path, "%s must be a non-negative integer, not %s", path, n)
			} else {
				bad("a non-negative integer")
			}
		}
	case kObject:
		if _, ok := v.(map[string]any); !ok {
			bad("an object")
		}
	case kText:
		switch v.(type) {
		case string, map[string]any:
		default:
			bad("a string or an object")
		}
	case kTime:
		s, ok := v.(string)
		if !ok {
			bad("an ISO 8601 timestamp string")
		} else if !isTimestamp(s) {
			c.Add(protocols.CodeInvalidField, path, "%s %q is not an ISO 8601 timestamp", path, s)
		}
	case kEnum:
		s, ok := v.(string)
		if !ok {
			bad("a string")
		} else if !oneOf(s, f.enum) {
			c.Add(protocols.CodeInvalidField, path, "%s %q is not one of %q", path, s, f.enum)
		}
	case kStrings, kCounts, kEnums, kStructs:
		arr, ok := v.([]any)
		if !ok {
			bad("an array")
			return
		}
		elem := field{kind: map[kind]kind{kStrings: kString, kCounts: kCount, kEnums: kEnum, kStructs: kStruct}[f.kind], enum: f.enum, sub: f.sub}
		for i, e := range arr {
			c.value(e, fmt.Sprintf("%s[%d]", path, i), elem)
		}
	case kStruct:
		obj, ok := v.(map[string]any)
		if !ok {
			bad("an object")
			return
		}
		for _, sf := range f.sub {
			c.check(obj, path+".", sf)
		}
	case kQuorum:
		c.quorum(v, path)
	case kVisibleTo:
		switch t := v.(type) {
		case string:
			if t != "all" && t != "approvers_only" {
				c.Add(protocols.CodeInvalidField, path, "%s %q is not \"all\", \"approvers_only\" or a list of participants", path, t)
			}
		case []any:
			c.value(v, path, field{kind: kStrings})
		default:
			bad("\"all\", \"approvers_only\" or an array of participant ids")
		}
	}
}

// quorum checks a QuorumRule (§14.2).
func (c *checker) quorum(v any, path string) {
	q, ok := v.(map[string]any)
	if !ok {
		c.Add(protocols.CodeInvalidField, path, "%s must be a quorum rule object, not %s", path, jsondoc.TypeName(v))
		return
	}
	c.check(q, path+".", reqEnum("type", quorumTypes))
	t, _ := q["type"].(string)
	switch t {
	case "any":
		c.positive(q, path+".", "count")
	case "role":
		c.check(q, path+".", field{name: "role", req: true, kind: kEnum, enum: roles[:]})
		c.positive(q, path+".", "count")
	case "specific":
		c.check(q, path+".", req("participants", kStrings))
		if ps, ok := q["participants"].([]any); ok && len(ps) == 0 {
			c.Add(protocols.CodeInvalidField, path+".participants", "%s.participants must name at least one participant", path)
		}
	}
}

// positive checks a required integer ≥ 1 (a quorum count).
func (c *checker) positive(obj map[string]any, prefix, name string) {
	c.check(obj, prefix, req(name, kCount))
	if n, ok := obj[name].(json.Number); ok && isCount(n) {
		if f, _ := strconv.ParseFloat(string(n), 64); f < 1 {
			c.Add(protocols.CodeInvalidField, prefix+name, "%s%s must be at least 1", prefix, name)
		}
	}
}

// isCount reports whether a number is a non-negative integer. JSON numbers
// are JavaScript numbers for the reference, so 3.0 is the integer 3.
func isCount(n json.Number) bool {
	f, err := strconv.ParseFloat(string(n), 64)
	return err == nil && f >= 0 && f == math.Trunc(f) && !math.IsInf(f, 0)
}

// isTimestamp accepts RFC 3339 (what toISOString writes) and the same
// date-time without a zone (ISO 8601 local time).
func isTimestamp(s string) bool {
	if _, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return true
	}
	_, err := time.Parse("2006-01-02T15:04:05.999999999", s)
	return err == nil
}
