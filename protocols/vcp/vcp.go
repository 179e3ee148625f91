package vcp

import (
	"regexp"
	"slices"
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
	r, env, ok := jsondoc.Start(doc, Protocol, "a VCP envelope")
	if !ok {
		return r
	}
	r.Errors = append(r.Errors, check(env)...)
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

// check returns the problems of an envelope, in field order.
func check(env map[string]any) protocols.Problems {
	var c checker
	c.envelope(env)
	return c.problems
}

// envelope checks the top-level fields in the order of "Fields".
func (c *checker) envelope(env map[string]any) {
	if s, ok := c.str(env, "protocol", false); ok && s != Protocol {
		c.problems.Add(protocols.CodeInvalidField, "protocol", "protocol is %q, must be \"vcp\"", s)
	}
	if s, ok := c.str(env, "version", false); ok {
		if m := versionRE.FindStringSubmatch(s); m == nil {
			c.problems.Add(protocols.CodeInvalidField, "version", "version %q is not MAJOR.MINOR", s)
		} else if m[1] != "1" {
			c.problems.Add(protocols.CodeUnsupportedVersion, "version", "version %q: only major version 1 is supported", s)
		}
	}
	c.str(env, "msg_id", false)
	if s, ok := c.str(env, "ts", false); ok {
		if _, err := time.Parse(time.RFC3339Nano, s); err != nil || !hasZone(s) {
			c.problems.Add(protocols.CodeInvalidField, "ts", "ts %q is not an RFC 3339 timestamp with a zone", s)
		}
	}
	for _, f := range [...]string{"from", "to"} {
		if s, ok := c.str(env, f, false); ok {
			switch {
			case s == "*":
				c.problems.Add(protocols.CodeInvalidField, f, "%s: \"*\" is reserved", f)
			case !addressRE.MatchString(s):
				c.problems.Add(protocols.CodeInvalidField, f, "%s %q is not shaped <side>[:<role>]", f, s)
			}
		}
	}
	c.str(env, "session_id", false)
	c.str(env, "in_reply_to", true)
	if s, ok := c.str(env, "idempotency_key", true); ok && utf8.RuneCountInString(s) > MaxIdempotencyKey {
		c.problems.Add(protocols.CodeInvalidField, "idempotency_key", "idempotency_key is %d characters, at most %d allowed", utf8.RuneCountInString(s), MaxIdempotencyKey)
	}
	c.signature(env)
	c.action(env)
}

// str checks that field is present and a non-empty string (or null when
// nullable). It returns the string and whether there is one to check further.
func (c *checker) str(obj map[string]any, field string, nullable bool) (string, bool) {
	null := jsondoc.NullRefused
	if nullable {
		null = jsondoc.NullAllowed
	}
	return jsondoc.NonEmptyString(&c.problems, obj, field, field, null)
}

// signature is reserved: null, or a populated AP2-style signature (a
// string or an object; its scheme is out of this spec's scope).
func (c *checker) signature(env map[string]any) {
	v, present := env["signature"]
	if !present {
		c.problems.Add(protocols.CodeMissingField, "signature", "signature is required (null when unsigned)")
		return
	}
	switch s := v.(type) {
	case nil:
	case string:
		if s == "" {
			c.problems.Add(protocols.CodeInvalidField, "signature", "signature must be null or populated, not empty")
		}
	case map[string]any:
		if len(s) == 0 {
			c.problems.Add(protocols.CodeInvalidField, "signature", "signature must be null or populated, not empty")
		}
	default:
		c.problems.Add(protocols.CodeInvalidField, "signature", "signature must be null, a string or an object, not %s", jsondoc.TypeName(v))
	}
}

func (c *checker) action(env map[string]any) {
	act, ok := jsondoc.RequiredObject(&c.problems, env, "action", "action")
	if !ok {
		return
	}
	if kind, ok := c.strAt(act, "action.", "kind"); ok {
		if m := kindRE.FindStringSubmatch(kind); m == nil {
			c.problems.Add(protocols.CodeInvalidField, "action.kind", "action.kind %q is not <namespace>.<verb>", kind)
		} else if !slices.Contains(namespaces[:], m[1]) {
			c.problems.Add(protocols.CodeUnknownType, "action.kind", "action.kind %q: unknown namespace %q (commerce, delegate, platform, world)", kind, m[1])
		}
	}
	payload, ok := jsondoc.RequiredObject(&c.problems, act, "payload", "action.payload")
	if !ok {
		return
	}
	c.money(payload, "action.payload")
}

// strAt is str for a nested object whose path is prefix.
func (c *checker) strAt(obj map[string]any, prefix, field string) (string, bool) {
	return jsondoc.NonEmptyString(&c.problems, obj, field, prefix+field, jsondoc.NullRefused)
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
