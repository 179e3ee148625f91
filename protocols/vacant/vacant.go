// Package vacant validates and signs Vacant P6 envelopes
// (shared/specs/vacant-p6-protocol.txt, "envelope"): A2A JSON-RPC 2.0
// message/send requests whose params.message.metadata["urn:vacant:v1"]
// carries the sender and recipient ids, the per-pair sequence number, the
// previous envelope's hash and an Ed25519 signature.
//
// The signed bytes follow the reference code (VacantEnvelope.signing_dict,
// implementation-notes.md): Python json.dumps(sort_keys=True,
// separators=(",", ":"), ensure_ascii=False) of
//
//	{"from", "to", "seq", "ts", "prev", "idem",
//	 "payload": {"role", "parts": [{"type", "text"}], "contextId", "messageId", "selfEval"}}
//
// with ts re-serialised as Python's datetime.isoformat() in UTC
// ("+00:00", microseconds only when non-zero), whatever form the wire used.
// The chain hash is BLAKE2b-256 of the same bytes (compute_hash).
//
// Validate does the stateless checks: the JSON-RPC shape, lowercase hex ids
// (64 digits; the signature 128), seq ≥ 1, seq 1 ⇒ the zero prev hash, and
// the signature. The per-pair chain (seq = last+1, prev = last hash) is the
// store's: a valid Report carries one protocols.Link for it.
//
// Readings where the reference is looser than needed, each with a vector:
// the reference fills a missing role with ROLE_USER and missing parts with
// [], coerces sequence_no with int() and idempotency_key with str(); here
// role and parts are required, sequence_no must be a JSON integer and
// idempotency_key a string when present (absent means ""). Parts are text
// only (D009 §F: "we ship text parts only") and may not carry other fields,
// because the signature would not cover them. A timestamp must carry a zone
// (Z or ±HH:MM); a naive one would be read in the receiver's local zone.
// selfEval, when present, sits in params.message.selfEval and is an object of
// numbers that Python holds as floats (an integer 1 is signed as 1.0).
package vacant

import (
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"golang.org/x/crypto/blake2b"
)

// Protocol is the name reported in protocols.Report.
const Protocol = "vacant"

// MetadataKey is the A2A metadata key the envelope fields sit under (P6 §3.2).
const MetadataKey = "urn:vacant:v1"

// Method is the JSON-RPC method of a Vacant envelope.
const Method = "message/send"

// ZeroHash is EMPTY_PREV_HASH in hex: the prev of the first envelope of a pair.
var ZeroHash = strings.Repeat("0", 64)

// Part is one part of the message; only text parts exist (D009 §F).
type Part struct {
	Type string // "text"
	Text string
}

// Message is the A2A payload an envelope carries (A2AMessage).
type Message struct {
	Role      string // e.g. "ROLE_USER", "ROLE_AGENT"
	Parts     []Part
	ContextID *string // nil is JSON null
	MessageID *string
	// SelfEval is nil (null) or the selfEval scores, signed as floats.
	SelfEval map[string]float64
}

// Envelope is a Vacant envelope (VacantEnvelope).
type Envelope struct {
	From, To  string // 64 lowercase hex digits: raw Ed25519 public keys
	Seq       int64  // ≥ 1, per (From, To) pair
	Time      time.Time
	Prev      string // 64 hex digits: hash of the previous envelope, or ZeroHash
	Idem      string // idempotency key; also the JSON-RPC id when set
	Payload   Message
	Signature string // 128 hex digits; "" before signing
	// RPCID is the JSON-RPC id read from the wire (string or json.Number);
	// Wire uses Idem, or the hash when Idem is empty, as the reference does.
	RPCID any
}

// FormatTime is Python's datetime.isoformat() of t in UTC, as the reference's
// _utc_iso: 2026-05-06T12:00:00+00:00, with .ffffff only when the
// microseconds are non-zero (nanoseconds are truncated).
func FormatTime(t time.Time) string {
	t = t.UTC()
	s := t.Format("2006-01-02T15:04:05")
	if us := t.Nanosecond() / 1000; us != 0 {
		s += fmt.Sprintf(".%06d", us)
	}
	return s + "+00:00"
}

// Hash returns the chain hash of an envelope's signing bytes: hex
// BLAKE2b-256 (compute_hash).
func Hash(signed []byte) string {
	sum := blake2b.Sum256(signed)
	return hex.EncodeToString(sum[:])
}

// Chain names the (from, to) hash chain in protocols.Link.
func Chain(from, to string) string { return from + ">" + to }
