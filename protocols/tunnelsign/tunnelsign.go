// Package tunnelsign builds and signs the tunnelled-protocol messages a
// sender makes itself: AICP v0.1 messages (aicp-v0.1.md §3) and Vacant P6
// envelopes (vacant-p6-protocol.txt, build_envelope + to_a2a_jsonrpc). The
// CLI (`envelopd aicp sign`, `envelopd vacant sign`) and the MCP server's
// sign tools both call it, so the filling rules are written once.
package tunnelsign

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/envelopd/envelopd/internal/secretfile"
	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/protocols/aicp"
	"github.com/envelopd/envelopd/protocols/canonjson"
	"github.com/envelopd/envelopd/protocols/vacant"
)

// ErrKeyFile is wrapped by LoadEd25519Key errors.
var ErrKeyFile = errors.New("not an Ed25519 private key file")

// LoadEd25519Key reads an Ed25519 private key file: PEM PKCS#8 ("PRIVATE
// KEY", as openssl genpkey -algorithm ed25519 writes it), or one line of
// base64 (std or url, padded or not) or hex holding the 32-byte seed or the
// 64-byte seed+public key. A file the group or others can read is refused
// (secretfile).
func LoadEd25519Key(path string) (ed25519.PrivateKey, error) {
	b, err := secretfile.Read(path)
	if err != nil {
		return nil, err
	}
	return ParseEd25519Key(b, path)
}

// ParseEd25519Key parses the contents b of a key file (LoadEd25519Key's
// formats); name names it in errors.
func ParseEd25519Key(b []byte, path string) (ed25519.PrivateKey, error) {
	if blk, _ := pem.Decode(b); blk != nil {
		k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w: %v", path, ErrKeyFile, err)
		}
		priv, ok := k.(ed25519.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("%s: %w: PKCS#8 key is %T", path, ErrKeyFile, k)
		}
		return priv, nil
	}
	s := strings.TrimSpace(string(b))
	raw, err := hex.DecodeString(s)
	if err != nil {
		enc := base64.RawStdEncoding
		if strings.ContainsAny(s, "-_") {
			enc = base64.RawURLEncoding
		}
		raw, err = enc.DecodeString(strings.TrimRight(s, "="))
	}
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s: %w: neither PEM, hex nor base64", path, ErrKeyFile)
	case len(raw) == ed25519.SeedSize:
		return ed25519.NewKeyFromSeed(raw), nil
	case len(raw) == ed25519.PrivateKeySize:
		priv := ed25519.NewKeyFromSeed(raw[:32])
		if !priv.Public().(ed25519.PublicKey).Equal(ed25519.PublicKey(raw[32:])) {
			return nil, fmt.Errorf("%s: %w: public half does not match the seed", path, ErrKeyFile)
		}
		return priv, nil
	default:
		return nil, fmt.Errorf("%s: %w: %d bytes, want a 32-byte seed", path, ErrKeyFile, len(raw))
	}
}

// RandomHex is n random bytes in hex.
func RandomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go ≥ 1.24)
	return hex.EncodeToString(b)
}

// RandomUUID is a version 4 UUID, as the reference's uuid.uuid4().
func RandomUUID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// FillAICP sets the fields an AICP sender generates (aicp-v0.1.md §3),
// when absent: v ("0.1"), id ("msg_" + 32 random hex digits), timestamp
// (now, Unix seconds) and nonce (32 random hex digits).
func FillAICP(m map[string]any, now time.Time) {
	if _, ok := m["v"]; !ok {
		m["v"] = "0.1"
	}
	if _, ok := m["id"]; !ok {
		m["id"] = "msg_" + RandomHex(16)
	}
	if _, ok := m["timestamp"]; !ok {
		m["timestamp"] = now.Unix()
	}
	if _, ok := m["nonce"]; !ok {
		m["nonce"] = RandomHex(16)
	}
}

// SignAICP fills and signs the AICP message doc (a JSON object) with priv,
// then validates the result with the signer's own public key at now. It
// returns the signed message and the problems validation found (a signed
// message with problems is still returned: the caller decides). err is
// set when doc is not a JSON object or cannot be signed.
func SignAICP(doc []byte, priv ed25519.PrivateKey, now time.Time) ([]byte, protocols.Problems, error) {
	m, err := canonjson.ParseObject(doc)
	if err != nil {
		return nil, nil, err
	}
	FillAICP(m, now)
	filled, err := canonjson.JS(m)
	if err != nil {
		return nil, nil, err
	}
	signed, err := aicp.Sign(filled, priv)
	if err != nil {
		return nil, nil, err
	}
	from, _ := m["from"].(string)
	r := aicp.Validate(signed, aicp.Options{Keys: map[string][]byte{from: priv.Public().(ed25519.PublicKey)}, Now: now})
	if r.Valid {
		return signed, nil, nil
	}
	return signed, r.Errors, nil
}

// VacantText is the A2A message of one text part with role (default
// ROLE_USER), an optional contextId and a random messageId.
func VacantText(text, role, contextID string) vacant.Message {
	if role == "" {
		role = "ROLE_USER"
	}
	mid := RandomUUID()
	msg := vacant.Message{Role: role, Parts: []vacant.Part{{Type: "text", Text: text}}, MessageID: &mid}
	if contextID != "" {
		msg.ContextID = &contextID
	}
	return msg
}

// VacantNext is the chain position after the tip (seq, hash) a store
// reports for a chain: seq+1, and the tip's hash (ZeroHash on an empty
// chain).
func VacantNext(tipSeq int64, tipHash string) (int64, string) {
	if tipSeq == 0 {
		tipHash = vacant.ZeroHash
	}
	return tipSeq + 1, tipHash
}

// SignVacant signs env with priv and returns its JSON-RPC wire form; an
// empty Idem is filled with a random UUID first.
func SignVacant(env *vacant.Envelope, priv ed25519.PrivateKey) ([]byte, error) {
	if env.Idem == "" {
		env.Idem = RandomUUID()
	}
	return vacant.Sign(env, priv)
}

// VacantID is the vacant id (hex public key) of priv.
func VacantID(priv ed25519.PrivateKey) string {
	return hex.EncodeToString(priv.Public().(ed25519.PublicKey))
}
