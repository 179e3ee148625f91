// Package proof gives an Envelopay payment proof its identity: the
// on-chain transaction it names (Envelopay v0.2.0, "Verification":
// "Replay protection (sender + protocol id + proof deduplication)").
//
// Two proofs naming the same (chain, transaction) are the same proof,
// whatever else they hold and however they are written: the transaction
// is taken out of whatever carries it (a bare JSON string, or an object's
// "tx", "signature" or "hash"), trimmed, and normalised per chain kind —
// EVM transaction hashes as lower-case 0x-hex, Solana signatures as
// base58 (case kept: base58 is case-sensitive). Chain names are trimmed
// and lower-cased; "solana", "solana-devnet" and "solana-testnet" are
// Solana, every other name is EVM.
//
// A proof naming no recognisable transaction keeps the identity of its
// text (the chain and the proof's canonical JSON) and says so with the
// warning WarnUnrecognised. A transaction of the right alphabet but the
// wrong length (an EVM hash that is not 32 bytes, a Solana signature that
// is not 64) is identified like a well-formed one — so its variants are
// still one proof — and carries WarnMalformed: no chain can hold it.
//
// The package depends on nothing in envelopd but canonjson; the store
// keys its duplicate_proof rule on Identity.Fingerprint.
package proof

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"

	"github.com/envelopd/envelopd/payments/rail"

	"github.com/envelopd/envelopd/protocols/canonjson"
)

// Chain kinds (the values of rail.Kind).
const (
	KindEVM    = string(rail.EVM)
	KindSolana = string(rail.Solana)
)

// Warnings (stable codes, as protocols.Code values).
const (
	// WarnUnrecognised: no transaction was found in the proof; its
	// identity is its text.
	WarnUnrecognised = "proof_unrecognised"
	// WarnMalformed: the transaction has the chain kind's alphabet but
	// not its length; it cannot exist on any chain.
	WarnMalformed = "proof_malformed"
)

// Lengths of a well-formed transaction id, in bytes.
const (
	EVMHashBytes         = 32
	SolanaSignatureBytes = 64
)

// maxTxLen bounds the transaction string considered (base58 of 64 bytes
// is at most 88 characters; 0x-hex of 32 bytes 66). Longer strings are
// not transactions.
const maxTxLen = 256

// Identity is what a proof is, for replay detection and verification.
type Identity struct {
	Chain string // trimmed, lower case
	Kind  string // KindEVM or KindSolana
	// Tx is the normalised transaction, "" when none was recognised.
	Tx string
	// Fingerprint is the key of the proof: the hex SHA-256 of (chain,
	// tx), or of (chain, canonical proof JSON) when Tx is "". "" when
	// there is no proof at all.
	Fingerprint string
	// Warning is "", WarnUnrecognised or WarnMalformed; Detail says it
	// in a sentence.
	Warning string
	Detail  string
}

// Valid reports whether the identity names a well-formed transaction:
// one a rail can look up.
func (id Identity) Valid() bool { return id.Tx != "" && id.Warning == "" }

// NormChain trims and lower-cases an Envelopay chain name.
func NormChain(chain string) string { return strings.ToLower(strings.TrimSpace(chain)) }

// KindOf is the kind of a chain name: Solana for "solana",
// "solana-devnet" and "solana-testnet", EVM for every other name.
func KindOf(chain string) string { return string(rail.KindOf(chain)) }

// Identify returns the identity of proof (raw JSON, as in the message)
// on chain. An empty or null proof has no identity (Fingerprint "").
// Identify never fails: bad input is an unrecognised proof.
func Identify(chain string, proof json.RawMessage) Identity {
	id := Identity{Chain: NormChain(chain), Kind: KindOf(chain)}
	p := strings.TrimSpace(string(proof))
	if p == "" || p == "null" {
		return id
	}
	if raw, ok := txString(proof); ok {
		if tx, warn := normTx(id.Kind, raw); tx != "" {
			id.Tx, id.Warning = tx, warn
			if warn != "" {
				id.Detail = malformedDetail(id.Kind, tx)
			}
			id.Fingerprint = fingerprint("tx", id.Chain, []byte(tx))
			return id
		}
	}
	id.Warning = WarnUnrecognised
	id.Detail = "the proof names no " + kindName(id.Kind) + " transaction (a string, or an object's tx, signature or hash); it is identified by its text"
	text := []byte(p)
	if v, err := canonjson.Parse(proof); err == nil {
		if c, err := canonjson.JS(v); err == nil {
			text = c
		}
	}
	id.Fingerprint = fingerprint("text", id.Chain, text)
	return id
}

// txString takes the transaction string out of a proof: the proof itself
// when it is a JSON string, else the first string among an object's
// "tx", "signature" and "hash" members.
func txString(proof json.RawMessage) (string, bool) {
	var s string
	switch t := bytes.TrimSpace(proof); {
	case len(t) > 0 && t[0] == '"':
		return s, json.Unmarshal(t, &s) == nil
	case len(t) == 0 || t[0] != '{':
		return "", false
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(proof, &obj) != nil {
		return "", false
	}
	for _, k := range []string{"tx", "signature", "hash"} {
		if v, ok := obj[k]; ok && json.Unmarshal(v, &s) == nil && strings.TrimSpace(s) != "" {
			return s, true
		}
	}
	return "", false
}

// normTx normalises a transaction string for kind. It returns "" when s
// is not one (wrong alphabet, empty, too long), and WarnMalformed with
// the normalised string when only its length is wrong.
func normTx(kind, s string) (string, string) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > maxTxLen {
		return "", ""
	}
	if kind == KindSolana {
		// A base58 value is never longer in bytes than in characters.
		b, err := rail.DecodeBase58(s, len(s))
		if err != nil {
			return "", ""
		}
		if len(b) != SolanaSignatureBytes {
			return s, WarnMalformed
		}
		return s, ""
	}
	h := s
	if len(h) >= 2 && h[0] == '0' && (h[1] == 'x' || h[1] == 'X') {
		h = h[2:]
	}
	// The bound applies to the normalised form ("0x" and the digits), so
	// that a hash written with and without its prefix is the same proof.
	if h == "" || 2+len(h) > maxTxLen {
		return "", ""
	}
	for i := 0; i < len(h); i++ {
		if !isHex(h[i]) {
			return "", ""
		}
	}
	h = "0x" + strings.ToLower(h)
	if len(h) != 2+2*EVMHashBytes {
		return h, WarnMalformed
	}
	return h, ""
}

func malformedDetail(kind, tx string) string {
	if kind == KindSolana {
		return "the signature " + tx + " is not 64 bytes: no Solana transaction has it"
	}
	return "the transaction hash " + tx + " is not 32 bytes: no EVM transaction has it"
}

func kindName(kind string) string {
	if kind == KindSolana {
		return "Solana"
	}
	return "EVM"
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// fingerprint hashes a kind of identity ("tx" or "text"), the chain and
// the identifying bytes, NUL-separated (no chain name holds a NUL that
// matters: it would only make another key).
func fingerprint(what, chain string, b []byte) string {
	h := sha256.New()
	h.Write([]byte(what))
	h.Write([]byte{0})
	h.Write([]byte(chain))
	h.Write([]byte{0})
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}
