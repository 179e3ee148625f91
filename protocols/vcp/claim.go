package vcp

import (
	"github.com/envelopd/envelopd/protocols"
)

// ClaimKind is the Claim.Kind of VCP idempotency keys.
const ClaimKind = "vcp_idem"

// idemClaim returns the idempotency claim of a valid envelope, if it has a
// key. TODO: canonical request hash (waiting for protocols/canonjson).
func idemClaim(env map[string]any) (protocols.Claim, bool, error) {
	return protocols.Claim{}, false, nil
}
