package aicp

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// ErrBadKey is wrapped by every ParseKey error.
var ErrBadKey = errors.New("aicp: bad public key")

// spkiPrefix is the DER header of an Ed25519 SubjectPublicKeyInfo
// (RFC 8410): the key is the 32 bytes after it.
var spkiPrefix = []byte{0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00}

// ParseKey decodes an AICP public key as it appears in identities (§2.1)
// and the AIRC vectors: base64 (standard or URL alphabet, padded or not),
// optionally prefixed "ed25519:", of either the raw 32-byte key or its
// 44-byte SPKI DER form. It returns the raw 32 bytes.
func ParseKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	s = strings.TrimPrefix(s, "ed25519:")
	b, err := decodeBase64(s)
	if err != nil {
		return nil, fmt.Errorf("%w: not base64: %v", ErrBadKey, err)
	}
	switch {
	case len(b) == 32:
		return b, nil
	case len(b) == 44 && bytes.HasPrefix(b, spkiPrefix):
		return b[12:], nil
	case len(b) == 44:
		return nil, fmt.Errorf("%w: 44 bytes but not an Ed25519 SPKI", ErrBadKey)
	default:
		return nil, fmt.Errorf("%w: %d bytes, want 32 (raw) or 44 (SPKI)", ErrBadKey, len(b))
	}
}

// decodeBase64 accepts both alphabets, with or without padding.
func decodeBase64(s string) ([]byte, error) {
	s = strings.TrimRight(s, "=")
	if s == "" {
		return nil, errors.New("empty")
	}
	enc := base64.RawStdEncoding
	if strings.ContainsAny(s, "-_") {
		enc = base64.RawURLEncoding
	}
	return enc.DecodeString(s)
}
