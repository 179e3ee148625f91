package main

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	goruntime "runtime"
	"runtime/debug"
	"strings"
	"time"
)

// buildVersion is what `envelopd version` prints (--json: these keys).
// Unknown values are null: a binary built with -buildvcs=false (or outside
// a VCS checkout) knows no revision.
type buildVersion struct {
	// Version is the main module's version: vX.Y.Z or a pseudo-version
	// for `go install …@version` and (Go 1.24+) builds in a git checkout,
	// "(devel)" when the toolchain could not tell.
	Version      string  `json:"version"`
	Revision     *string `json:"revision"`      // VCS commit
	RevisionTime *string `json:"revision_time"` // its commit time, RFC 3339
	// Modified: built from a checkout with uncommitted changes.
	Modified  *bool  `json:"modified"`
	Module    string `json:"module"`
	GoVersion string `json:"go_version"`
	Platform  string `json:"platform"` // GOOS/GOARCH
}

// pseudoRev matches the tail of a Go pseudo-version
// (vX.Y.Z-[pre.0.]yyyymmddhhmmss-abcdefabcdef, go.dev/ref/mod#pseudo-versions),
// which names the commit when there is no VCS stamp (go install …@latest
// builds from the module zip).
var pseudoRev = regexp.MustCompile(`[-.](\d{14})-([0-9a-f]{12})(?:\+incompatible)?(?:\+dirty)?$`)

// versionOf reads the build information the toolchain embeds
// (runtime/debug.ReadBuildInfo); bi is nil when there is none.
func versionOf(bi *debug.BuildInfo) buildVersion {
	v := buildVersion{Version: "(devel)", Module: "github.com/envelopd/envelopd", GoVersion: goruntime.Version(), Platform: goruntime.GOOS + "/" + goruntime.GOARCH}
	if bi == nil {
		return v
	}
	if bi.Main.Path != "" {
		v.Module = bi.Main.Path
	}
	if bi.Main.Version != "" {
		v.Version = bi.Main.Version
	}
	if bi.GoVersion != "" {
		v.GoVersion = bi.GoVersion
	}
	for _, s := range bi.Settings {
		val := s.Value
		switch s.Key {
		case "vcs.revision":
			v.Revision = &val
		case "vcs.time":
			v.RevisionTime = &val
		case "vcs.modified":
			m := val == "true"
			v.Modified = &m
		}
	}
	if m := pseudoRev.FindStringSubmatch(v.Version); m != nil && v.Revision == nil {
		rev := m[2]
		v.Revision = &rev
		if t, err := time.Parse("20060102150405", m[1]); err == nil {
			ts := t.UTC().Format(time.RFC3339)
			v.RevisionTime = &ts
		}
	}
	return v
}

// String is the one-line form: envelopd VERSION (REVISION[, modified], TIME) GO PLATFORM.
func (v buildVersion) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "envelopd %s", v.Version)
	switch {
	case v.Revision != nil:
		fmt.Fprintf(&b, " (revision %s", *v.Revision)
		if v.Modified != nil && *v.Modified {
			b.WriteString(", modified")
		}
		if v.RevisionTime != nil {
			fmt.Fprintf(&b, ", %s", *v.RevisionTime)
		}
		b.WriteString(")")
	default:
		b.WriteString(" (no VCS revision: built with -buildvcs=false or not from a git clone)")
	}
	fmt.Fprintf(&b, " %s %s", v.GoVersion, v.Platform)
	return b.String()
}

// runVersion: envelopd version [--json].
func runVersion(ctx context.Context, e *env) int {
	fs := newFlags(e, "version")
	asJSON := fs.Bool("json", false, "print one JSON object (version, revision, revision_time, modified, module, go_version, platform)")
	pos, err := parseArgs(fs, e.args)
	if err != nil || !noArgs(e, "version", pos) {
		return 2
	}
	bi, _ := debug.ReadBuildInfo()
	v := versionOf(bi)
	if *asJSON {
		if err := json.NewEncoder(e.stdout).Encode(v); err != nil {
			return failed(e, "version", err)
		}
		return 0
	}
	fmt.Fprintln(e.stdout, v)
	return 0
}
