package vcp

import (
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/protocols/internal/jsondoc"
)

// Protocol is the Report.Protocol of a VCP envelope.
const Protocol = "vcp"

// MaxIdempotencyKey is the longest idempotency_key allowed ("Fields":
// "≤255 chars"), counted in characters (code points).
const MaxIdempotencyKey = 255

// Namespaces are the action namespaces of "The envelope" and the
// implementation notes.
var namespaces = [...]string{"commerce", "delegate", "platform", "world"}

var (
	// <side>[:<role>] ("Fields": from, to).
	addressRE = regexp.MustCompile(`^[A-Za-z0-9_-]+(:[A-Za-z0-9_.-]+)?$`)
	// MAJOR.MINOR ("Fields": version).
	versionRE = regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$`)
	// <namespace>.<verb>; the verb may itself hold dots, the router splits
	// on the first one ("Fields": action.kind).
	kindRE = regexp.MustCompile(`^([a-z][a-z0-9_]*)\.([a-z0-9_]+(\.[a-z0-9_]+)*)$`)
)

// Validate checks one VCP envelope (the bytes of a JSON attachment) and
// reports its problems, a summary (id, from, to, kind) and, for a valid
// envelope with an idempotency key, the idempotency claim.
func Validate(doc []byte) protocols.Report {
	r := protocols.Report{Protocol: Protocol, Errors: protocols.Problems{}, Summary: map[string]any{}}
	env, p, ok := jsondoc.Object(doc, "a VCP envelope")
	if !ok {
		r.Errors = append(r.Errors, p)
		return r
	}
	var c checker
	c.envelope(env)
	r.Errors = append(r.Errors, c.problems...)
	summarise(env, r.Summary)
	r.Valid = len(r.Errors) == 0
	if r.Valid {
		if cl, ok, err := idemClaim(env); err != nil {
			r.Valid = false
			r.Errors = append(r.Errors, protocols.New(protocols.CodeInvalidField, "", "cannot canonicalise the request: %v", err))
		} else if ok {
			r.Claims = append(r.Claims, cl)
		}
	}
	return r
}

// checker collects problems in field order.
type checker struct {
	problems protocols.Problems
}

func (c *checker) add(code protocols.Code, field, format string, args ...any) {
	c.problems = append(c.problems, protocols.New(code, field, format, args...))
}

// envelope checks the top-level fields in the order of "Fields".
func (c *checker) envelope(env map[string]any) {
	if s, ok := c.str(env, "protocol", false); ok && s != Protocol {
		c.add(protocols.CodeInvalidField, "protocol", "protocol is %q, must be \"vcp\"", s)
	}
	if s, ok := c.str(env, "version", false); ok {
		if m := versionRE.FindStringSubmatch(s); m == nil {
			c.add(protocols.CodeInvalidField, "version", "version %q is not MAJOR.MINOR", s)
		} else if m[1] != "1" {
			c.add(protocols.CodeUnsupportedVersion, "version", "version %q: only major version 1 is supported", s)
		}
	}
	c.str(env, "msg_id", false)
	if s, ok := c.str(env, "ts", false); ok {
		if _, err := time.Parse(time.RFC3339Nano, s); err != nil || !hasZone(s) {
			c.add(protocols.CodeInvalidField, "ts", "ts %q is not an RFC 3339 timestamp with a zone", s)
		}
	}
	for _, f := range [...]string{"from", "to"} {
		if s, ok := c.str(env, f, false); ok {
			switch {
			case s == "*":
				c.add(protocols.CodeInvalidField, f, "%s: \"*\" is reserved", f)
			case !addressRE.MatchString(s):
				c.add(protocols.CodeInvalidField, f, "%s %q is not shaped <side>[:<role>]", f, s)
			}
		}
	}
	c.str(env, "session_id", false)
	c.str(env, "in_reply_to", true)
	if s, ok := c.str(env, "idempotency_key", true); ok && utf8.RuneCountInString(s) > MaxIdempotencyKey {
		c.add(protocols.CodeInvalidField, "idempotency_key", "idempotency_key is %d characters, at most %d allowed", utf8.RuneCountInString(s), MaxIdempotencyKey)
	}
	c.signature(env)
	c.action(env)
}

// str checks that field is present and a non-empty string (or null when
// nullable). It returns the string and whether there is one to check further.
func (c *checker) str(obj map[string]any, field string, nullable bool) (string, bool) {
	v, present := obj[field]
	if !present {
		c.add(protocols.CodeMissingField, field, "%s is required", field)
		return "", false
	}
	if v == nil {
		if !nullable {
			c.add(protocols.CodeInvalidField, field, "%s must not be null", field)
		}
		return "", false
	}
	s, ok := v.(string)
	if !ok {
		c.add(protocols.CodeInvalidField, field, "%s must be a string, not %s", field, jsondoc.TypeName(v))
		return "", false
	}
	if s == "" {
		c.add(protocols.CodeInvalidField, field, "%s must not be empty", field)
		return "", false
	}
	return s, true
}

// signature is reserved: null, or a populated AP2-style signature (a
// string or an object; its scheme is out of this spec's scope).
func (c *checker) signature(env map[string]any) {
	v, present := env["signature"]
	if !present {
		c.add(protocols.CodeMissingField, "signature", "signature is required (null when unsigned)")
		return
	}
	switch s := v.(type) {
	case nil:
	case string:
		if s == "" {
			c.add(protocols.CodeInvalidField, "signature", "signature must be null or populated, not empty")
		}
	case map[string]any:
		if len(s) == 0 {
			c.add(protocols.CodeInvalidField, "signature", "signature must be null or populated, not empty")
		}
	default:
		c.add(protocols.CodeInvalidField, "signature", "signature must be null, a string or an object, not %s", jsondoc.TypeName(v))
	}
}

func (c *checker) action(env map[string]any) {
	v, present := env["action"]
	if !present {
		c.add(protocols.CodeMissingField, "action", "action is required")
		return
	}
	act, ok := v.(map[string]any)
	if !ok {
		c.add(protocols.CodeInvalidField, "action", "action must be an object, not %s", jsondoc.TypeName(v))
		return
	}
	if kind, ok := c.strAt(act, "action.", "kind"); ok {
		if m := kindRE.FindStringSubmatch(kind); m == nil {
			c.add(protocols.CodeInvalidField, "action.kind", "action.kind %q is not <namespace>.<verb>", kind)
		} else if !knownNamespace(m[1]) {
			c.add(protocols.CodeUnknownType, "action.kind", "action.kind %q: unknown namespace %q (commerce, delegate, platform, world)", kind, m[1])
		}
	}
	p, present := act["payload"]
	if !present {
		c.add(protocols.CodeMissingField, "action.payload", "action.payload is required")
		return
	}
	payload, ok := p.(map[string]any)
	if !ok {
		c.add(protocols.CodeInvalidField, "action.payload", "action.payload must be an object, not %s", jsondoc.TypeName(p))
		return
	}
	c.money(payload, "action.payload")
}

// strAt is str for a nested object whose path is prefix.
func (c *checker) strAt(obj map[string]any, prefix, field string) (string, bool) {
	var sub checker
	s, ok := sub.str(obj, field, false)
	for _, p := range sub.problems {
		p.Field = prefix + p.Field
		p.Message = prefix + p.Message
		c.problems = append(c.problems, p)
	}
	return s, ok
}

func knownNamespace(ns string) bool {
	for _, n := range namespaces {
		if n == ns {
			return true
		}
	}
	return false
}

// hasZone reports whether an RFC 3339 timestamp ends in a zone. time.Parse
// with RFC3339 already requires one; this keeps the rule explicit.
func hasZone(s string) bool {
	if strings.HasSuffix(s, "Z") || strings.HasSuffix(s, "z") {
		return true
	}
	return len(s) > 6 && (s[len(s)-6] == '+' || s[len(s)-6] == '-') && s[len(s)-3] == ':'
}

func summarise(env map[string]any, sum map[string]any) {
	if s, ok := env["msg_id"].(string); ok {
		sum["id"] = s
	}
	for _, f := range [...]string{"from", "to"} {
		if s, ok := env[f].(string); ok {
			sum[f] = s
		}
	}
	if act, ok := env["action"].(map[string]any); ok {
		if s, ok := act["kind"].(string); ok {
			sum["kind"] = s
		}
	}
}
