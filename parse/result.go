package parse

import (
	"bytes"
	"encoding/json"

	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/protocols/envelopay"
)

// Result is the typed outcome of parsing one raw message. Its JSON form is
// the stable contract printed by `envelopd parse` (keys are snake_case and
// never renamed once in the README).
type Result struct {
	// Type is the lower-case Envelopay type from the subject, or "" when the
	// message is not Envelopay (printed as null).
	Type     string             `json:"type"`
	Note     string             `json:"note"`
	Valid    bool               `json:"valid"`
	Errors   protocols.Problems `json:"errors"`
	Warnings protocols.Problems `json:"warnings"`
	// Body is the JSON object found in the body, verbatim (it may share
	// memory with the raw message), or nil. It is set only when the subject
	// names an Envelopay type.
	Body json.RawMessage `json:"body"`
	// NaturalLanguage is true for a METHODS message without parseable JSON.
	NaturalLanguage bool `json:"natural_language"`

	MessageID  string   `json:"message_id"`
	InReplyTo  []string `json:"in_reply_to"`
	References []string `json:"references"`
	From       []string `json:"from"`
	To         []string `json:"to"`
	Cc         []string `json:"cc"`
	Date       string   `json:"date"`
	Subject    string   `json:"subject"`
	// TypeHeader is the X-Envelopay-Type header, a hint only.
	TypeHeader string `json:"x_envelopay_type"`

	Attachments []Attachment `json:"attachments"`
	// OOPS is the body of the OOPS a receiver would send back, or nil.
	OOPS json.RawMessage `json:"oops"`

	// ID is the Envelopay "id" field of Body, when present (not printed
	// separately: it is inside body).
	ID string `json:"-"`
	// Fields holds the top-level members of Body (values are sub-slices of
	// Body, see envelopay.DecodeObject), for the stateful checks (refs,
	// proof, amounts). Nil when there is no body.
	Fields map[string]json.RawMessage `json:"-"`
}

// Attachment is one MIME part that is not the chosen body text.
type Attachment struct {
	Filename    string `json:"filename"`
	ContentType string `json:"content_type"`
	Size        int    `json:"size"`
	// Data is the decoded content (not printed).
	Data []byte `json:"-"`

	// Set by the tunnelled-protocol inspection (package protocols/...), when
	// the part is JSON: the protocol name or nil, whether it validated, its
	// problems and a short summary. Every entry prints all four (see
	// MarshalJSON).
	Protocol *string            `json:"protocol"`
	Valid    *bool              `json:"valid"`
	Errors   protocols.Problems `json:"errors"`
	Summary  map[string]any     `json:"summary"`
}

// MarshalJSON prints every attachment with the same keys (issue:
// "protocol (vcp|aicp|vacant|a2a|pvp, or null for other files), valid,
// errors ({code, field?, message}) and a short summary"): protocol and
// summary null when there are none (an empty summary too), errors an empty
// array, and valid, when
// the part was not inspected (not JSON, or no inspection ran), true iff
// errors is empty, as the message's own valid.
func (a Attachment) MarshalJSON() ([]byte, error) {
	type plain Attachment // no methods: no recursion
	if a.Errors == nil {
		a.Errors = protocols.Problems{}
	}
	if len(a.Summary) == 0 {
		a.Summary = nil // none: null, not {}
	}
	if a.Valid == nil {
		v := len(a.Errors) == 0
		a.Valid = &v
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	err := enc.Encode(plain(a))
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), err
}

// Revalidate recomputes Valid ("errors is empty") and OOPS after a later
// stage (DKIM verification, attachment inspection) has added problems to
// Errors, so the OOPS reflects them as Parse's own would. lenient must be
// the Options.Lenient the Result was parsed with (the subject is read
// again for the unknown_type OOPS).
func (r *Result) Revalidate(lenient bool) {
	r.Valid = len(r.Errors) == 0
	s, _ := envelopay.ParseSubject(r.Subject, lenient)
	r.OOPS = r.oops(s)
}

// MarshalJSON prints Type as null when the message is not Envelopay (the
// contract: "type" is the lower-case type or null), without HTML escaping.
func (r Result) MarshalJSON() ([]byte, error) {
	type plain Result // no methods: no recursion
	var t *string
	if r.Type != "" {
		t = &r.Type
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	err := enc.Encode(struct {
		Type *string `json:"type"`
		plain
	}{t, plain(r)})
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), err
}
