package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const serviceUnit = "../../contrib/envelopd.service"

// unitDirectives reads a systemd unit: directive → its values, in order.
func unitDirectives(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' || line[0] == '[' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: not a directive: %q", path, line)
		}
		d[k] = append(d[k], v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestServiceUnitHardening pins contrib/envelopd.service's sandbox (issue
// 18): dropping one of these is a visible change, not a silent one.
func TestServiceUnitHardening(t *testing.T) {
	t.Parallel()
	d := unitDirectives(t, serviceUnit)
	for _, want := range []struct{ key, value string }{
		{"DynamicUser", "yes"},
		{"StateDirectory", "envelopd"},
		{"ProtectSystem", "strict"},
		{"ProtectHome", "yes"},
		{"PrivateTmp", "yes"},
		{"PrivateDevices", "yes"},
		{"NoNewPrivileges", "yes"},
		{"AmbientCapabilities", "CAP_NET_BIND_SERVICE"},
		{"CapabilityBoundingSet", "CAP_NET_BIND_SERVICE"},
		{"RestrictAddressFamilies", "AF_INET AF_INET6 AF_UNIX"},
		{"SystemCallFilter", "@system-service"},
		{"SystemCallFilter", "~@privileged"},
		{"SystemCallArchitectures", "native"},
		{"MemoryDenyWriteExecute", "yes"},
		{"RestrictNamespaces", "yes"},
		{"UMask", "0077"},
	} {
		found := false
		for _, v := range d[want.key] {
			found = found || v == want.value
		}
		if !found {
			t.Errorf("%s: no %s=%s (have %q)", serviceUnit, want.key, want.value, d[want.key])
		}
	}
}

// TestServiceUnitExecStart: the unit's command line is one `envelopd serve`
// accepts (a renamed flag breaks this test, not a production start), and
// its database is in the StateDirectory, the one place it may write.
func TestServiceUnitExecStart(t *testing.T) {
	t.Parallel()
	d := unitDirectives(t, serviceUnit)
	if len(d["ExecStart"]) != 1 {
		t.Fatalf("ExecStart: %q, want one", d["ExecStart"])
	}
	// Specifiers as systemd expands them (%H host name, %d credentials).
	line := strings.NewReplacer("%H", "mx.example.test", "%d", "/run/credentials/envelopd.service").Replace(d["ExecStart"][0])
	args := strings.Fields(line)
	if len(args) < 2 || args[0] != "/usr/local/bin/envelopd" || args[1] != "serve" {
		t.Fatalf("ExecStart %q: want /usr/local/bin/envelopd serve …", line)
	}
	state := "/var/lib/" + d["StateDirectory"][0] + "/"
	db := ""
	for i, a := range args {
		if (a == "--db" || a == "-db") && i+1 < len(args) {
			db = args[i+1]
		}
	}
	if !strings.HasPrefix(db, state) {
		t.Errorf("ExecStart --db %q: want a file in %s (ProtectSystem=strict: nothing else is writable)", db, state)
	}
	if wd := d["WorkingDirectory"]; len(wd) != 1 || wd[0]+"/" != state {
		t.Errorf("WorkingDirectory %q, want %s", wd, state)
	}
	// serve parses flags left to right and stops at the first it does not
	// know: the sentinel, when every flag of the unit is known.
	var out, errb bytes.Buffer
	code := run(context.Background(), &env{args: append(args[1:], "--unit-test-sentinel"), stdin: strings.NewReader(""), stdout: &out, stderr: &errb})
	if first, _, _ := strings.Cut(errb.String(), "\n"); code != 2 || first != "flag provided but not defined: -unit-test-sentinel" {
		t.Errorf("envelopd %s: exit %d, first stderr line %q; want the sentinel as the only unknown flag", strings.Join(args[1:], " "), code, first)
	}
}

// TestServiceUnitVerify runs systemd-analyze verify on the unit, its
// ExecStart pointed at an executable that exists here; any complaint that
// names the unit fails (verify exits 0 on unknown directives). .ci/run
// does the same with the built binary.
func TestServiceUnitVerify(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not on PATH")
	}
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	unit, err := os.ReadFile(serviceUnit)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "envelopd.service")
	if err := os.WriteFile(path, bytes.ReplaceAll(unit, []byte("ExecStart=/usr/local/bin/envelopd "), []byte("ExecStart="+self+" ")), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(sa, "verify", path).CombinedOutput()
	if err != nil || bytes.Contains(out, []byte("envelopd")) {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}
