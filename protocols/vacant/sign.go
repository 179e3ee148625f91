package vacant

import (
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/envelopd/envelopd/protocols/canonjson"
)

// ErrBadPrivateKey is returned by Sign for a key that is not Ed25519.
var ErrBadPrivateKey = errors.New("vacant: not an Ed25519 private key")

// signingDict is VacantEnvelope.signing_dict.
func signingDict(e *Envelope) map[string]any {
	parts := make([]any, len(e.Payload.Parts))
	for i, p := range e.Payload.Parts {
		parts[i] = map[string]any{"type": p.Type, "text": p.Text}
	}
	var selfEval any
	if e.Payload.SelfEval != nil {
		m := make(map[string]any, len(e.Payload.SelfEval))
		for k, v := range e.Payload.SelfEval {
			m[k] = v
		}
		selfEval = m
	}
	return map[string]any{
		"from": e.From,
		"to":   e.To,
		"seq":  e.Seq,
		"ts":   FormatTime(e.Time),
		"prev": e.Prev,
		"idem": e.Idem,
		"payload": map[string]any{
			"role":      e.Payload.Role,
			"parts":     parts,
			"contextId": strOrNil(e.Payload.ContextID),
			"messageId": strOrNil(e.Payload.MessageID),
			"selfEval":  selfEval,
		},
	}
}

func strOrNil(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

// SigningBytes returns the bytes an envelope's signature and hash cover
// (signing_payload): see the package doc.
func SigningBytes(e *Envelope) ([]byte, error) {
	return canonjson.Python(signingDict(e), false)
}

// Sign completes and signs e: From becomes priv's public key in hex, Prev
// defaults to ZeroHash, Time is truncated to microseconds, and Signature is
// set. It returns the wire form (Wire). Seq, To, Time and Payload are the
// caller's; the chain position (Seq, Prev) normally comes from the store.
func Sign(e *Envelope, priv ed25519.PrivateKey) ([]byte, error) {
	if len(priv) != ed25519.PrivateKeySize {
		return nil, ErrBadPrivateKey
	}
	e.From = hex.EncodeToString(priv.Public().(ed25519.PublicKey))
	if e.Prev == "" {
		e.Prev = ZeroHash
	}
	e.Time = e.Time.UTC().Truncate(1000)
	if probs := checkEnvelope(e); len(probs) > 0 {
		return nil, fmt.Errorf("vacant: %w", probs[0])
	}
	signed, err := SigningBytes(e)
	if err != nil {
		return nil, fmt.Errorf("vacant: %w", err)
	}
	e.Signature = hex.EncodeToString(ed25519.Sign(priv, signed))
	e.RPCID = nil
	return e.Wire()
}

// Wire returns e as the JSON-RPC 2.0 message/send request of
// to_a2a_jsonrpc: the id is Idem, or the envelope hash when Idem is empty.
// Keys are sorted; selfEval is written only when set.
func (e *Envelope) Wire() ([]byte, error) {
	signed, err := SigningBytes(e)
	if err != nil {
		return nil, fmt.Errorf("vacant: %w", err)
	}
	id := any(e.Idem)
	if e.Idem == "" {
		id = Hash(signed)
	}
	d := signingDict(e)["payload"].(map[string]any)
	msg := map[string]any{
		"role":      d["role"],
		"parts":     d["parts"],
		"contextId": d["contextId"],
		"messageId": d["messageId"],
		"metadata": map[string]any{MetadataKey: map[string]any{
			"from_vacant_id":     e.From,
			"to_vacant_id":       e.To,
			"sequence_no":        e.Seq,
			"timestamp":          FormatTime(e.Time),
			"prev_envelope_hash": e.Prev,
			"idempotency_key":    e.Idem,
			"caller_signature":   e.Signature,
		}},
	}
	if d["selfEval"] != nil {
		msg["selfEval"] = d["selfEval"]
	}
	return canonjson.Python(map[string]any{
		"jsonrpc": "2.0",
		"id":      id,
		"method":  Method,
		"params":  map[string]any{"message": msg},
	}, false)
}

// MessageFromJSON reads a Message from its A2A JSON form
// ({"role", "parts": [{"type":"text","text"}], "contextId", "messageId",
// "selfEval"}), with the same rules as the wire checks.
func MessageFromJSON(b []byte) (Message, error) {
	m, err := canonjson.ParseObject(b)
	if err != nil {
		return Message{}, fmt.Errorf("vacant: %w", err)
	}
	p := &wireParser{complete: true}
	var e Envelope
	p.message(m, &e)
	if len(p.errs) > 0 {
		return Message{}, fmt.Errorf("vacant: %w", p.errs[0])
	}
	if e.Payload.Role == "" {
		return Message{}, fmt.Errorf("vacant: the message needs a role")
	}
	return e.Payload, nil
}
