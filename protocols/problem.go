// Package protocols holds what every protocol validator in envelopd shares:
// the typed Problem that each bad input is reported as, and the stable error
// codes. The protocol packages themselves live below it: envelopay (the
// native protocol, envelopay-v0.2.0), canonjson (the canonical JSON variants
// the tunnelled protocols sign), and one package per tunnelled protocol.
//
// Codes are stable strings: other programs read them from envelopd's JSON.
package protocols

import (
	"errors"
	"fmt"
)

// Code is a stable, machine-readable error code.
type Code string

// Envelopay v0.2.0 codes ("Error codes:" in the spec's OOPS section).
const (
	CodeTxNotFound        Code = "tx_not_found"
	CodeAmountMismatch    Code = "amount_mismatch"
	CodeDKIMFailed        Code = "dkim_failed"
	CodeUnknownType       Code = "unknown_type"
	CodeInsufficientFunds Code = "insufficient_funds"
	CodeMissingWallet     Code = "missing_wallet"
)

// envelopd's own codes for parse and validation.
const (
	CodeNotEnvelopay   Code = "not_envelopay"
	CodeInvalidJSON    Code = "invalid_json"
	CodeMissingField   Code = "missing_field"
	CodeInvalidField   Code = "invalid_field"
	CodeTypeMismatch   Code = "type_mismatch"
	CodeDuplicateID    Code = "duplicate_id"
	CodeDuplicateProof Code = "duplicate_proof"
	// CodeRetry marks a resend of a stored message (same sender, same
	// Envelopay id, same canonical body) under a new Message-ID: stored
	// as a duplicate, answered by no OOPS.
	CodeRetry Code = "retry"
	// CodeUnknownRef is a typed ref of an outgoing message that names no
	// stored message of its type (store.Check; received mail may answer
	// what predates the store, so Ingest does not report it).
	CodeUnknownRef Code = "unknown_ref"
	// CodeOOPSSuppressed is a warning: a courtesy OOPS was owed but not
	// sent (the stored oops_decision says why).
	CodeOOPSSuppressed Code = "oops_suppressed"
)

// Resource limits: the mail is kept, quarantined, with one of
// these when its analysis would cost more than the limits allow.
const (
	CodeTooManyParts       Code = "too_many_parts"
	CodeTooManyAttachments Code = "too_many_attachments"
	CodeJSONTooDeep        Code = "json_too_deep"
	CodeJSONTooLarge       Code = "json_too_large"
	CodeAnalysisTooLarge   Code = "analysis_too_large"
)

// Codes of the tunnelled protocols (VCP, AICP, Vacant/A2A, PVP).
const (
	CodeUnsupportedVersion  Code = "unsupported_version"
	CodeBadSignature        Code = "bad_signature"
	CodeUnknownKey          Code = "unknown_key"
	CodeStaleTimestamp      Code = "stale_timestamp"
	CodeReplayDetected      Code = "replay_detected"
	CodeChainFork           Code = "chain_fork"
	CodeIdempotencyConflict Code = "idempotency_conflict"
	CodeConsentRequired     Code = "consent_required"
	CodeConsentBlocked      Code = "consent_blocked"
	CodeUnauthorized        Code = "unauthorized"
)

// Problem is one thing wrong with an input: a code for programs, the field
// it concerns (a JSON path such as "give.amount", or a header name in lower
// case), and a sentence for people. It is an error, so it can travel through
// errors.Is/As: errors.Is(err, protocols.Problem{Code: c}) matches on code.
type Problem struct {
	Code    Code   `json:"code"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
	// Ref is the Message-ID (without angle brackets) of the stored
	// message the problem points to: the earlier message a duplicate
	// repeats (duplicate_id, duplicate_proof, retry, replay_detected).
	Ref string `json:"ref,omitempty"`
}

// New returns a Problem with a formatted message.
func New(code Code, field, format string, args ...any) Problem {
	return Problem{Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}

func (p Problem) Error() string {
	if p.Field != "" {
		return fmt.Sprintf("%s (%s): %s", p.Code, p.Field, p.Message)
	}
	return fmt.Sprintf("%s: %s", p.Code, p.Message)
}

// Is reports whether target is a Problem with the same code, so that
// errors.Is(err, protocols.Problem{Code: protocols.CodeInvalidJSON}) works.
func (p Problem) Is(target error) bool {
	var t Problem
	if errors.As(target, &t) {
		return t.Code == p.Code
	}
	return false
}

// Problems is a list of problems; it is never nil when marshalled by the
// result types (an empty list prints as []).
type Problems []Problem

// Has reports whether the list holds a problem with the code.
func (ps Problems) Has(code Code) bool {
	for _, p := range ps {
		if p.Code == code {
			return true
		}
	}
	return false
}

// Add appends a problem with a formatted message: the one way every
// validator's checker records what it finds, in field order.
func (ps *Problems) Add(code Code, field, format string, args ...any) {
	*ps = append(*ps, New(code, field, format, args...))
}
