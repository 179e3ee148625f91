package vcp

import (
	"testing"

	"github.com/envelopd/envelopd/protocols/internal/vectors"
)

const vectorDir = "../../testdata/protocols/vcp"

// TestVectors runs every NAME.json in testdata/protocols/vcp against its
// NAME.expect (see the README there for the format, and vectors.Expect).
func TestVectors(t *testing.T) {
	vectors.RunExpect(t, vectorDir, Validate)
}
