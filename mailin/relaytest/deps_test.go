package relaytest

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// relaytest is imported by an agent's tests: what it imports ends up in the
// agent's build and go.mod. It needs the relay (mailin, store, imapview)
// but not the server's metrics stack, which lives in
// mailin/metrics and is imported by cmd/envelopd only.
var serverOnly = []string{
	"github.com/prometheus/",
	"google.golang.org/protobuf/",
	"github.com/envelopd/envelopd/mailin/metrics",
	"github.com/envelopd/envelopd/cmd/",
}

func TestDepsExcludeServerOnlyPackages(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH")
	}
	for _, pkg := range []string{".", "github.com/envelopd/envelopd/mailin"} {
		out, err := exec.Command(gobin, "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		deps := strings.Fields(string(out))
		// The list must be the real one: relaytest needs the relay itself.
		if !slices.Contains(deps, "github.com/envelopd/envelopd/store") {
			t.Fatalf("go list -deps %s: no github.com/envelopd/envelopd/store in %d packages", pkg, len(deps))
		}
		for _, d := range deps {
			for _, bad := range serverOnly {
				if strings.HasPrefix(d, bad) {
					t.Errorf("%s imports %s (server-only %s*)", pkg, d, bad)
				}
			}
		}
	}
}
