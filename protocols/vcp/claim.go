package vcp

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/protocols/canonjson"
)

// ClaimKind is the Claim.Kind of VCP idempotency keys.
const ClaimKind = "vcp_idem"

// transmissionFields differ between two sends of the same request and are
// left out of the canonical request (see the package doc).
var transmissionFields = [...]string{"msg_id", "ts", "signature"}

// CanonicalRequest returns the bytes whose SHA-256 is compared for
// idempotency: the envelope minus msg_id, ts and signature, as Python's
// json.dumps(sort_keys=True, separators=(",",":"), ensure_ascii=True)
// prints it. env is the decoded envelope (canonjson.Parse).
func CanonicalRequest(env map[string]any) ([]byte, error) {
	req := make(map[string]any, len(env))
	for k, v := range env {
		req[k] = v
	}
	for _, k := range transmissionFields {
		delete(req, k)
	}
	return canonjson.Python(req, true)
}

// idemClaim returns the idempotency claim of a valid envelope, if it has a
// non-null idempotency_key: same digest again is a replay that is only
// marked (OnSame ""), another digest is idempotency_conflict ("Idempotency").
func idemClaim(env map[string]any) (protocols.Claim, bool, error) {
	key, ok := env["idempotency_key"].(string)
	if !ok {
		return protocols.Claim{}, false, nil
	}
	from, _ := env["from"].(string)
	b, err := CanonicalRequest(env)
	if err != nil {
		return protocols.Claim{}, false, err
	}
	sum := sha256.Sum256(b)
	return protocols.Claim{
		Kind:       ClaimKind,
		Key:        from + "\x00" + key,
		Value:      hex.EncodeToString(sum[:]),
		OnConflict: protocols.CodeIdempotencyConflict,
	}, true, nil
}
