// Package vcp checks envelopes of the Vibe Commerce Protocol (VCP) as they
// arrive tunnelled in mail, without state: vcp-envelope.txt ("Shape",
// "Fields", "Money", "Idempotency") and implementation-notes.md ("VCP").
//
// Validate reports every problem of one envelope:
//
//   - all eleven top-level fields of "Fields" must be present; in_reply_to,
//     signature and idempotency_key may be null (a session-opening message,
//     an unsigned envelope, an action that changes no state);
//   - protocol is "vcp"; version is MAJOR.MINOR and MAJOR is 1 (another major
//     is unsupported_version, a minor bump is wire-additive and accepted);
//   - msg_id and session_id are non-empty strings. The spec recommends UUID v4
//     for msg_id but its own examples use "msg_001", so the syntax is not
//     enforced;
//   - from and to are shaped <side>[:<role>]; "*" is reserved and refused;
//   - ts is RFC 3339 with a zone ("Z" or ±hh:mm);
//   - action.kind is <namespace>.<verb>, split on the first "."; the
//     namespace must be commerce, delegate, platform or world (unknown_type
//     otherwise); the verb list is private, so any verb of the right shape
//     is accepted; action.payload is an object;
//   - idempotency_key, when not null, is 1 to 255 characters;
//   - money ("Money": unit_price, budget, floor_price, amount, price, any
//     *_price, and ledger deltas: delta, deltas, any *_delta or *_deltas)
//     anywhere in action.payload holds JSON integers only: a float, an
//     exponent, a string or a boolean there is invalid_field. Inside an object
//     or array under such a key (a budget {"max": 500, "currency": "USD"},
//     a ledger {"buyer": -300, "merchant": 300}) every number must be an
//     integer, strings are allowed.
//
// # The canonical request
//
// The runtime de-dupes on (from, idempotency_key) and compares a SHA-256 of
// "the canonical request" ("Idempotency"; implementation notes). A retry of
// the same request is a new transmission: it carries a fresh msg_id (a UUID
// v4, "globally unique"), a new ts, and a signature over those. Everything
// else in the envelope says what is being asked. So the canonical request is
// the envelope minus msg_id, ts and signature, serialised as the reference
// runtime serialises (Python json.dumps with sort_keys=True,
// separators=(",",":") and ensure_ascii=True; canonjson.Python), and the
// claim value is the lowercase hex SHA-256 of those bytes. A re-sent envelope
// with a new msg_id and ts is therefore a replay; the same key with another
// action, payload, recipient or session is an idempotency_conflict.
//
// A valid envelope with a non-null idempotency_key yields one Claim (Kind
// "vcp_idem", Key from+"\x00"+idempotency_key) for the store; an invalid one
// yields none.
package vcp
