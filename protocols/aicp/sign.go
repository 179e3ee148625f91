package aicp

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/envelopd/envelopd/protocols/canonjson"
)

// ErrBadPrivateKey is returned by Sign for a key that is not an Ed25519
// private key.
var ErrBadPrivateKey = errors.New("aicp: not an Ed25519 private key")

// Sign signs an AICP message (§3.1, §3.2): it drops any "signature",
// signs the canonical bytes of the rest and returns the message in canonical
// form with "signature" set to the standard, padded base64 of the Ed25519
// signature. It does not check the message; run Validate for that.
func Sign(doc []byte, priv ed25519.PrivateKey) ([]byte, error) {
	if len(priv) != ed25519.PrivateKeySize {
		return nil, ErrBadPrivateKey
	}
	m, err := canonjson.ParseObject(doc)
	if err != nil {
		return nil, fmt.Errorf("aicp: %w", err)
	}
	delete(m, "signature")
	signed, err := canonjson.JS(m)
	if err != nil {
		return nil, fmt.Errorf("aicp: %w", err)
	}
	m["signature"] = base64.StdEncoding.EncodeToString(ed25519.Sign(priv, signed))
	return canonjson.JS(m)
}

// SigningBytes returns the canonical bytes that the signature of doc covers.
func SigningBytes(doc []byte) ([]byte, error) {
	m, err := canonjson.ParseObject(doc)
	if err != nil {
		return nil, fmt.Errorf("aicp: %w", err)
	}
	delete(m, "signature")
	return canonjson.JS(m)
}

// Consent describes a handshake message (§2.6): its sender, recipient and
// action ("request", "accept" or "block"). ok is false when doc is not a
// message with a well-formed handshake payload. It does not validate the
// message; the pipeline should only act on it for a valid Report.
func Consent(doc []byte) (from, to, action string, ok bool) {
	m, err := canonjson.ParseObject(doc)
	if err != nil {
		return "", "", "", false
	}
	p, _ := m["payload"].(map[string]any)
	if t, _ := p["type"].(string); t != "handshake" {
		return "", "", "", false
	}
	data, _ := p["data"].(map[string]any)
	action, _ = data["action"].(string)
	from, _ = m["from"].(string)
	to, _ = m["to"].(string)
	if !validAction[action] || !handleRE.MatchString(from) || !handleRE.MatchString(to) {
		return "", "", "", false
	}
	return from, to, action, true
}
