package pvp

import (
	"testing"

	"github.com/envelopd/envelopd/protocols/internal/vectors"
)

// FuzzPVP feeds arbitrary bytes to Validate: it must never panic, must
// always name the protocol, and must be valid exactly when it reports no
// problem; claims come only from valid envelopes, and the same input always
// gives the same report (vectors.FuzzValidate).
func FuzzPVP(f *testing.F) {
	vectors.FuzzValidate(f, vectorDir, Protocol, Validate)
}
