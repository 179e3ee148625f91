package pvp

import (
	"testing"

	"github.com/envelopd/envelopd/protocols/internal/vectors"
)

const vectorDir = "../../testdata/protocols/pvp"

// TestVectors runs every NAME.json in testdata/protocols/pvp against its
// NAME.expect (see the README there for the format, and vectors.Expect).
func TestVectors(t *testing.T) {
	vectors.RunExpect(t, vectorDir, Validate)
}
