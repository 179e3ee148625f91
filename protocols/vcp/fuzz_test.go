package vcp

import (
	"testing"

	"github.com/envelopd/envelopd/protocols/internal/vectors"
)

// FuzzVCP feeds arbitrary bytes to Validate: it must never panic, must
// always name the protocol, and must be valid exactly when it reports no
// problem; claims come only from valid envelopes, and the same input always
// gives the same report (vectors.FuzzValidate).
func FuzzVCP(f *testing.F) {
	vectors.FuzzValidate(f, vectorDir, Protocol, Validate)
}
