// Package knottest runs Knot DNS (knotd, Debian `knot`) on loopback as
// the authoritative server of test zones, for interop tests that need a
// real DNS server (the recipe of /work/shared/interop/README.md: no
// systemd, a temporary directory, a root zone so unknown names are
// NXDOMAIN, not REFUSED).
package knottest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// SOA is the head of a test zone for origin: SOA and NS records.
func SOA(origin string) string {
	return fmt.Sprintf("$ORIGIN %s.\n$TTL 60\n@ IN SOA ns.%s. hostmaster.%s. 1 3600 600 86400 60\n@ IN NS ns.%s.\nns IN A 127.0.0.1\n",
		origin, origin, origin, origin)
}

// Start serves zones (origin without the trailing dot → zone file text)
// with knotd on 127.0.0.1 and returns its address; the server stops at
// the end of the test. A zone file Knot cannot load fails the test.
func Start(t *testing.T, zones map[string]string) string {
	t.Helper()
	return StartAt(t, FreeAddr(t), zones)
}

// StartAt is Start on addr (127.0.0.1:PORT, from FreeAddr): for a test
// that must name the server before it knows the zones.
func StartAt(t *testing.T, addr string, zones map[string]string) string {
	t.Helper()
	bin, err := exec.LookPath("knotd")
	if err != nil {
		if _, err2 := os.Stat("/usr/sbin/knotd"); err2 == nil {
			bin = "/usr/sbin/knotd"
		} else {
			t.Fatalf("interop peer knotd is missing (Debian knot): %v", err)
		}
	}
	dir := t.TempDir()
	for _, d := range []string{"run", "db"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	all := map[string]string{".": ". 60 IN SOA ns.root. hostmaster.root. 1 3600 600 86400 60\n. 60 IN NS ns.root.\n"}
	for k, v := range zones {
		all[k] = v
	}
	names := make([]string, 0, len(all))
	for k := range all {
		names = append(names, k)
	}
	sort.Strings(names)
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	var conf strings.Builder
	fmt.Fprintf(&conf, "server:\n    rundir: %q\n    listen: 127.0.0.1@%s\ndatabase:\n    storage: %q\n", filepath.Join(dir, "run"), port, filepath.Join(dir, "db"))
	conf.WriteString("template:\n  - id: default\n    zonefile-sync: -1\n    zonefile-load: whole\n    journal-content: none\nzone:\n")
	for i, n := range names {
		f := filepath.Join(dir, fmt.Sprintf("zone%d", i))
		if err := os.WriteFile(f, []byte(all[n]), 0o644); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&conf, "  - domain: %q\n    file: %q\n", n, f)
	}
	cf := filepath.Join(dir, "knot.conf")
	if err := os.WriteFile(cf, []byte(conf.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-c", cf)
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("knotd log:\n%s", log.String())
		}
	})
	// Ready when every zone is loaded: Knot logs "loaded" per zone.
	deadline := time.Now().Add(20 * time.Second)
	for {
		s := log.String()
		if strings.Count(s, "loaded, serial") >= len(names) || strings.Count(s, "] loaded") >= len(names) {
			return addr
		}
		if strings.Contains(s, "failed to load") || strings.Contains(s, "zone file parser") && strings.Contains(s, "error") {
			t.Fatalf("knotd could not load a zone:\n%s", s)
		}
		if time.Now().After(deadline) {
			t.Fatalf("knotd did not load its zones in time:\n%s", s)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// FreeAddr returns an address on 127.0.0.1 whose port is free for both
// UDP and TCP.
func FreeAddr(t *testing.T) string {
	t.Helper()
	for range 20 {
		u, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		port := u.LocalAddr().(*net.UDPAddr).Port
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		u.Close()
		if err == nil {
			l.Close()
			return fmt.Sprintf("127.0.0.1:%d", port)
		}
	}
	t.Fatal("no free port")
	return ""
}
