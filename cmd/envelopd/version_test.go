package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionOf(t *testing.T) {
	t.Parallel()
	str := func(s string) *string { return &s }
	yes, no := true, false
	vcs := func(rev, tm, mod string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.time", Value: tm}, {Key: "vcs.modified", Value: mod}}
	}
	const mod = "github.com/envelopd/envelopd"
	for _, c := range []struct {
		name string
		bi   *debug.BuildInfo
		want buildVersion
		line string
	}{
		{"no build info", nil,
			buildVersion{Version: "(devel)"},
			"envelopd (devel) (no VCS revision: built with -buildvcs=false or not from a git clone)"},
		{"-buildvcs=false", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: mod, Version: "(devel)"}},
			buildVersion{Version: "(devel)"},
			"envelopd (devel) (no VCS revision: built with -buildvcs=false or not from a git clone)"},
		{"git checkout, clean", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: mod, Version: "v0.0.0-20261125205937-fce44b71e6bf"},
			Settings: vcs("fce44b71e6bf144ae1d64bdbcf827311d5bbee45", "2026-11-25T20:59:37Z", "false")},
			buildVersion{Version: "v0.0.0-20261125205937-fce44b71e6bf", Revision: str("fce44b71e6bf144ae1d64bdbcf827311d5bbee45"), RevisionTime: str("2026-11-25T20:59:37Z"), Modified: &no},
			"envelopd v0.0.0-20261125205937-fce44b71e6bf (revision fce44b71e6bf144ae1d64bdbcf827311d5bbee45, 2026-11-25T20:59:37Z)"},
		{"git checkout, modified", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: mod, Version: "v0.3.0+dirty"},
			Settings: vcs("fce44b71e6bf144ae1d64bdbcf827311d5bbee45", "2026-11-25T20:59:37Z", "true")},
			buildVersion{Version: "v0.3.0+dirty", Revision: str("fce44b71e6bf144ae1d64bdbcf827311d5bbee45"), RevisionTime: str("2026-11-25T20:59:37Z"), Modified: &yes},
			"envelopd v0.3.0+dirty (revision fce44b71e6bf144ae1d64bdbcf827311d5bbee45, modified, 2026-11-25T20:59:37Z)"},
		// go install …@latest builds from the module zip: no VCS stamp,
		// the pseudo-version names the commit.
		{"go install @latest, untagged", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: mod, Version: "v0.0.0-20261125205937-fce44b71e6bf"}},
			buildVersion{Version: "v0.0.0-20261125205937-fce44b71e6bf", Revision: str("fce44b71e6bf"), RevisionTime: str("2026-11-25T20:59:37Z")},
			"envelopd v0.0.0-20261125205937-fce44b71e6bf (revision fce44b71e6bf, 2026-11-25T20:59:37Z)"},
		{"go install @latest, after a tag", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: mod, Version: "v0.3.1-0.20261125205937-fce44b71e6bf"}},
			buildVersion{Version: "v0.3.1-0.20261125205937-fce44b71e6bf", Revision: str("fce44b71e6bf"), RevisionTime: str("2026-11-25T20:59:37Z")},
			"envelopd v0.3.1-0.20261125205937-fce44b71e6bf (revision fce44b71e6bf, 2026-11-25T20:59:37Z)"},
		{"go install @v0.3.0", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: mod, Version: "v0.3.0"}},
			buildVersion{Version: "v0.3.0"},
			"envelopd v0.3.0 (no VCS revision: built with -buildvcs=false or not from a git clone)"},
	} {
		got := versionOf(c.bi)
		c.want.Module = mod
		c.want.GoVersion, c.want.Platform = got.GoVersion, got.Platform
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(c.want)
		if string(gj) != string(wj) {
			t.Errorf("%s:\n got %s\nwant %s", c.name, gj, wj)
		}
		if line := got.String(); line != c.line+" "+got.GoVersion+" "+got.Platform {
			t.Errorf("%s: line %q, want %q + Go and platform", c.name, line, c.line)
		}
	}
}

// TestVersionJSONKeys pins the JSON contract of `envelopd version --json`.
func TestVersionJSONKeys(t *testing.T) {
	t.Parallel()
	var out, errb bytes.Buffer
	if code := run(context.Background(), &env{args: []string{"version", "--json"}, stdout: &out, stderr: &errb}); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var alias bytes.Buffer
	if code := run(context.Background(), &env{args: []string{"--version", "--json"}, stdout: &alias, stderr: &errb}); code != 0 || alias.String() != out.String() {
		t.Errorf("envelopd --version --json: exit %d, %q; want %q", code, alias.String(), out.String())
	}
	var m map[string]any
	if err := json.Unmarshal(out.Bytes(), &m); err != nil {
		t.Fatalf("%v: %q", err, out.String())
	}
	for _, k := range []string{"version", "revision", "revision_time", "modified", "module", "go_version", "platform"} {
		if _, ok := m[k]; !ok {
			t.Errorf("no %q in %s", k, out.String())
		}
	}
	if len(m) != 7 {
		t.Errorf("%d keys, want 7: %s", len(m), out.String())
	}
}

// TestVersionOfBuiltBinary builds envelopd as `go install ./cmd/envelopd`
// does and asks it its version: from a git checkout (a .git directory; the
// toolchain does not stamp git worktrees) it names HEAD; built with
// -buildvcs=false, as .ci/run does, it says "(devel)" and no revision.
func TestVersionOfBuiltBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH")
	}
	t.Parallel()
	head := ""
	if top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output(); err == nil {
		if st, err := os.Stat(filepath.Join(strings.TrimSpace(string(top)), ".git")); err == nil && st.IsDir() {
			if h, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil {
				head = strings.TrimSpace(string(h))
			}
		}
	}
	dir := t.TempDir()
	for _, c := range []struct {
		buildvcs string
		rev      string // "" → null
	}{
		{"false", ""},
		{"auto", head},
	} {
		bin := filepath.Join(dir, "envelopd-vcs-"+c.buildvcs)
		cmd := exec.Command(gobin, "build", "-buildvcs="+c.buildvcs, "-o", bin, ".")
		if out, err := cmd.CombinedOutput(); err != nil {
			if c.buildvcs == "auto" && bytes.Contains(out, []byte("error obtaining VCS status")) {
				// git refuses the checkout (e.g. owned by another user):
				// the environment, which .ci/run's -buildvcs=false avoids.
				t.Skipf("go build -buildvcs=auto: %s", out)
			}
			t.Fatalf("go build -buildvcs=%s: %v\n%s", c.buildvcs, err, out)
		}
		out, err := exec.Command(bin, "version", "--json").Output()
		if err != nil {
			t.Fatalf("-buildvcs=%s: envelopd version --json: %v", c.buildvcs, err)
		}
		var v buildVersion
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("%v: %q", err, out)
		}
		switch {
		case c.rev == "":
			if v.Revision != nil || v.Version != "(devel)" {
				t.Errorf("-buildvcs=%s: %s, want version (devel) and no revision", c.buildvcs, out)
			}
		case v.Revision == nil || *v.Revision != c.rev || v.Modified == nil || v.RevisionTime == nil:
			t.Errorf("-buildvcs=%s: %s, want revision %s, its time and modified", c.buildvcs, out, c.rev)
		case v.Version == "(devel)":
			// Go 1.24+: a tag or a pseudo-version naming the commit.
			t.Errorf("-buildvcs=%s: version %q, want one from the git tag or commit", c.buildvcs, v.Version)
		}
		line, err := exec.Command(bin, "version").Output()
		if err != nil || !strings.HasPrefix(string(line), "envelopd "+v.Version+" ") {
			t.Errorf("-buildvcs=%s: envelopd version: %q %v", c.buildvcs, line, err)
		}
		t.Logf("-buildvcs=%s: %s", c.buildvcs, line)
	}
}
