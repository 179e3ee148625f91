// Package aicp validates and signs AICP v0.1 messages (shared/specs/aicp-v0.1.md,
// published as "AIRC" by the same author) carried as JSON attachments.
//
// Validate does the stateless checks of §2.3: required fields and their
// shapes, handles (§2.1), at least one of body or payload, the nonce length,
// the ±5 minute timestamp window (§2.3 "Constraints", §6.1) and the Ed25519
// signature (§3.2) over the canonical bytes (§3.1) of the message minus
// "signature". Canonical bytes are what JavaScript produces
// (canonjson.JS), as implementation-notes.md records from the reference code.
// The stateful rules, nonce and id replay within 24 h and consent (§2.6),
// are the store's: Validate returns Claims for them and Consent describes a
// handshake payload.
//
// Readings where the spec is loose, each tested by a vector:
//   - v: "0.1" and "0.2" (the AIRC vectors' version, same algorithm), with an
//     optional patch part ("0.1.0"); anything else is unsupported_version.
//   - id: "msg_" followed by letters, digits, "-" or "_" (the spec's own
//     §7.1 example builds ids from crypto.randomUUID(), which has hyphens),
//     at most 128 characters in all.
//   - handles: ^[a-z0-9_]{1,32}$ (§2.1).
//   - timestamp: a JSON integer (Unix seconds); a fraction or exponent is
//     invalid_field.
//   - nonce: at least 16 characters (code points), at most 256.
//   - body: a string; "at least one of body or payload" needs a non-empty
//     body or a payload.
//   - payload: an object with a non-empty string "type" and an object
//     "data" (§2.4); for "handshake" data.action must be request, accept or
//     block (§2.6); for "ack" data.ref must be a string and data.status one
//     of received, rejected, unsupported_payload (§2.7). Other types are not
//     inspected (§2.4 "Unknown Types").
//   - Unknown top-level fields are allowed; they are covered by the
//     signature like every other field.
package aicp

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/protocols/canonjson"
)

// Protocol is the name reported in protocols.Report.
const Protocol = "aicp"

// Window is how far a message's timestamp may be from the receive time
// (§2.3 "Constraints").
const Window = 5 * time.Minute

// ReplayWindow is how long (seconds) nonces and ids stay claimed (§2.3: id
// unique per sender within 24 hours; §6.1 nonce).
const ReplayWindow = 86400

// Claim kinds handed to the store.
const (
	ClaimNonce = "aicp_nonce"
	ClaimID    = "aicp_id"
)

// MinNonce and MaxNonce bound the nonce length in characters.
const (
	MinNonce = 16
	MaxNonce = 256
)

var (
	handleRE  = regexp.MustCompile(`^[a-z0-9_]{1,32}$`)
	idRE      = regexp.MustCompile(`^msg_[A-Za-z0-9_-]{1,124}$`)
	versionRE = regexp.MustCompile(`^0\.[12](\.[0-9]+)?$`)
)

// Options are what Validate needs from outside the message.
type Options struct {
	// Keys maps a sender handle to its raw 32-byte Ed25519 public key (see
	// ParseKey). A sender not in Keys is unknown_key.
	Keys map[string][]byte
	// Now is the receive time for the timestamp window; the zero time
	// means time.Now().
	Now time.Time
}

// Validate checks one AICP message document. The Report is valid when it
// has no errors; Claims (nonce and id, for replay detection in the store)
// are only set on a valid report.
func Validate(doc []byte, opts Options) protocols.Report {
	r := protocols.Report{Protocol: Protocol, Errors: protocols.Problems{}, Summary: map[string]any{}}
	m, err := canonjson.ParseObject(doc)
	if err != nil {
		r.Errors = append(r.Errors, protocols.New(protocols.CodeInvalidJSON, "", "%v", err))
		return r
	}
	c := &checker{m: m}
	c.version()
	id := c.str("id", idRE, "an id is \"msg_\" followed by letters, digits, '-' or '_'")
	from := c.str("from", handleRE, "a handle is 1-32 characters of a-z, 0-9 and _")
	to := c.str("to", handleRE, "a handle is 1-32 characters of a-z, 0-9 and _")
	c.timestamp(opts.Now)
	nonce := c.nonce()
	ptype := c.content()
	c.signature(from, opts.Keys)

	for k, v := range map[string]string{"id": id, "from": from, "to": to, "type": ptype} {
		if v != "" {
			r.Summary[k] = v
		}
	}
	r.Errors = append(r.Errors, c.errs...)
	r.Valid = len(r.Errors) == 0
	if r.Valid {
		sum := sha256.Sum256(c.signed)
		value := hex.EncodeToString(sum[:])
		for _, cl := range []struct{ kind, key string }{{ClaimNonce, nonce}, {ClaimID, id}} {
			r.Claims = append(r.Claims, protocols.Claim{
				Kind: cl.kind, Key: from + "\x00" + cl.key, Value: value, Window: ReplayWindow,
				OnSame: protocols.CodeReplayDetected, OnConflict: protocols.CodeReplayDetected,
			})
		}
		r.Checks, r.Sets = consentState(doc, from, to)
	}
	return r
}

// ConsentKind names the store state of an ordered AICP identity pair
// ("alice>bob"): "pending", "accepted" or "blocked" (aicp-v0.1 §2.6).
const ConsentKind = "aicp_consent"

// consentState turns §2.6 into store state: a handshake request from A to
// B makes A>B pending (unless already accepted or blocked); B's accept or
// block to A sets A>B; every other message from A to B needs A>B accepted —
// it is held (consent_required) until then, and refused (consent_blocked)
// when B blocked A. Consent is per ordered pair (A>B is not B>A).
func consentState(doc []byte, from, to string) ([]protocols.StateCheck, []protocols.StateSet) {
	if hf, ht, action, ok := Consent(doc); ok && hf == from && ht == to {
		switch action {
		case "request":
			return nil, []protocols.StateSet{{Kind: ConsentKind, Key: from + ">" + to, Value: "pending", Keep: []string{"accepted", "blocked"}}}
		case "accept":
			return nil, []protocols.StateSet{{Kind: ConsentKind, Key: to + ">" + from, Value: "accepted"}}
		case "block":
			return nil, []protocols.StateSet{{Kind: ConsentKind, Key: to + ">" + from, Value: "blocked"}}
		}
	}
	return []protocols.StateCheck{{Kind: ConsentKind, Key: from + ">" + to, Want: "accepted",
		Codes: map[string]protocols.Code{"blocked": protocols.CodeConsentBlocked}, Default: protocols.CodeConsentRequired}}, nil
}

type checker struct {
	m      map[string]any
	errs   protocols.Problems
	signed []byte // canonical bytes the signature covers
}

func (c *checker) add(code protocols.Code, field, format string, args ...any) {
	c.errs.Add(code, field, format, args...)
}

// field returns m[name] and reports missing_field when it is absent.
func (c *checker) field(name string) (any, bool) {
	v, ok := c.m[name]
	if !ok {
		c.add(protocols.CodeMissingField, name, "%s is required (§2.3)", name)
	}
	return v, ok
}

func (c *checker) version() {
	v, ok := c.field("v")
	if !ok {
		return
	}
	s, isStr := v.(string)
	switch {
	case !isStr:
		c.add(protocols.CodeInvalidField, "v", "v must be a string such as \"0.1\"")
	case !versionRE.MatchString(s):
		c.add(protocols.CodeUnsupportedVersion, "v", "version %q is not supported (0.1, 0.2)", s)
	}
}

// str checks a required string field against re and returns it ("" when bad).
func (c *checker) str(name string, re *regexp.Regexp, rule string) string {
	v, ok := c.field(name)
	if !ok {
		return ""
	}
	s, isStr := v.(string)
	if !isStr {
		c.add(protocols.CodeInvalidField, name, "%s must be a string", name)
		return ""
	}
	if !re.MatchString(s) {
		c.add(protocols.CodeInvalidField, name, "%s %q: %s", name, s, rule)
		return ""
	}
	return s
}

func (c *checker) timestamp(now time.Time) {
	v, ok := c.field("timestamp")
	if !ok {
		return
	}
	n, isNum := v.(json.Number)
	if !isNum || strings.ContainsAny(string(n), ".eE") {
		c.add(protocols.CodeInvalidField, "timestamp", "timestamp must be an integer number of Unix seconds")
		return
	}
	ts, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil {
		c.add(protocols.CodeInvalidField, "timestamp", "timestamp %s is out of range", n)
		return
	}
	if now.IsZero() {
		now = time.Now()
	}
	// Compare in seconds, avoiding time.Duration overflow for huge values.
	diff := ts - now.Unix()
	if diff > int64(Window/time.Second) || diff < -int64(Window/time.Second) {
		c.add(protocols.CodeStaleTimestamp, "timestamp", "timestamp %d is %ds from the receive time %d; the window is ±%ds (§2.3)",
			ts, diff, now.Unix(), int64(Window/time.Second))
	}
}

func (c *checker) nonce() string {
	v, ok := c.field("nonce")
	if !ok {
		return ""
	}
	s, isStr := v.(string)
	if !isStr {
		c.add(protocols.CodeInvalidField, "nonce", "nonce must be a string")
		return ""
	}
	if n := utf8.RuneCountInString(s); n < MinNonce || n > MaxNonce {
		c.add(protocols.CodeInvalidField, "nonce", "nonce has %d characters; it must have %d to %d (§2.3)", n, MinNonce, MaxNonce)
		return ""
	}
	return s
}

// content checks body and payload and returns the payload type.
func (c *checker) content() string {
	body, hasBody := c.m["body"]
	if hasBody {
		s, ok := body.(string)
		if !ok {
			c.add(protocols.CodeInvalidField, "body", "body must be a string")
		}
		hasBody = ok && s != ""
	}
	pv, hasPayload := c.m["payload"]
	if !hasBody && !hasPayload {
		c.add(protocols.CodeMissingField, "body", "a message needs a non-empty body or a payload (§2.3)")
		return ""
	}
	if !hasPayload {
		return ""
	}
	p, ok := pv.(map[string]any)
	if !ok {
		c.add(protocols.CodeInvalidField, "payload", "payload must be an object with type and data (§2.4)")
		return ""
	}
	typ, _ := p["type"].(string)
	switch t, ok := p["type"]; {
	case !ok:
		c.add(protocols.CodeMissingField, "payload.type", "payload.type is required (§2.4)")
	case typ == "":
		c.add(protocols.CodeInvalidField, "payload.type", "payload.type must be a non-empty string, got %v", t)
	}
	dv, ok := p["data"]
	if !ok {
		c.add(protocols.CodeMissingField, "payload.data", "payload.data is required (§2.4)")
		return typ
	}
	data, ok := dv.(map[string]any)
	if !ok {
		c.add(protocols.CodeInvalidField, "payload.data", "payload.data must be an object (§2.4)")
		return typ
	}
	switch typ {
	case "handshake":
		if a, _ := data["action"].(string); !validAction[a] {
			c.add(protocols.CodeInvalidField, "payload.data.action", "handshake action must be request, accept or block (§2.6)")
		}
	case "ack":
		if _, ok := data["ref"].(string); !ok {
			c.add(protocols.CodeInvalidField, "payload.data.ref", "ack ref must be the acknowledged message id (§2.7)")
		}
		if s, _ := data["status"].(string); s != "received" && s != "rejected" && s != "unsupported_payload" {
			c.add(protocols.CodeInvalidField, "payload.data.status", "ack status must be received, rejected or unsupported_payload (§2.7)")
		}
	}
	return typ
}

var validAction = map[string]bool{"request": true, "accept": true, "block": true}

func (c *checker) signature(from string, keys map[string][]byte) {
	v, ok := c.field("signature")
	unsigned := make(map[string]any, len(c.m))
	for k, x := range c.m {
		if k != "signature" {
			unsigned[k] = x
		}
	}
	signed, err := canonjson.JS(unsigned)
	if err != nil { // cannot happen for a parsed tree; reported, not hidden
		c.add(protocols.CodeInvalidJSON, "", "canonical form: %v", err)
		return
	}
	c.signed = signed
	if !ok {
		return
	}
	s, isStr := v.(string)
	if !isStr {
		c.add(protocols.CodeInvalidField, "signature", "signature must be a base64 string")
		return
	}
	sig, err := decodeBase64(strings.TrimPrefix(s, "ed25519:"))
	if err != nil || len(sig) != ed25519.SignatureSize {
		c.add(protocols.CodeBadSignature, "signature", "signature is not base64 of 64 bytes")
		return
	}
	if from == "" {
		return // the bad sender is already reported
	}
	key, ok := keys[from]
	if !ok || len(key) != ed25519.PublicKeySize {
		c.add(protocols.CodeUnknownKey, "from", "no Ed25519 public key is known for %q", from)
		return
	}
	if !ed25519.Verify(ed25519.PublicKey(key), signed, sig) {
		c.add(protocols.CodeBadSignature, "signature", "the Ed25519 signature does not verify over the canonical message (§3.1, §3.2)")
	}
}
