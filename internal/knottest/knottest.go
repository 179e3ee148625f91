// Package knottest runs Knot DNS (Debian's knot, /usr/sbin/knotd) as an
// authoritative server on loopback for interop tests: one root zone (".")
// holding every test record, so that any name outside them is NXDOMAIN
// rather than REFUSED (the recipe of shared/interop/README.md, "An
// authoritative DNS server on loopback: Knot").
//
// Tests using it are TestInterop… tests: they run under ENVELOPD_INTEROP=1,
// where a missing knotd is a failure.
package knottest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Record is one resource record in zone-file presentation: Name is fully
// qualified or relative to the root, Type is "TXT", "A", …, Data the
// RDATA as a zone file writes it (TXT strings quoted by TXT).
type Record struct {
	Name, Type, Data string
	TTL              int // 0: 300
}

// TXT returns a TXT record of value, split into quoted character-strings
// of at most 255 bytes with '"' and '\' escaped and other bytes outside
// printable ASCII written as \DDD (RFC 1035 §5.1).
func TXT(name string, strs ...string) Record {
	var parts []string
	for _, s := range strs {
		for {
			n := min(len(s), 255)
			parts = append(parts, quote(s[:n]))
			s = s[n:]
			if s == "" {
				break
			}
		}
	}
	return Record{Name: name, Type: "TXT", Data: strings.Join(parts, " ")}
}

func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c > 0x7e:
			fmt.Fprintf(&b, "\\%03d", c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// Start runs knotd serving records (and SERVFAIL for the names in
// servfail, each made its own zone that fails to load) and returns its
// address (127.0.0.1:port, UDP and TCP). It stops when the test ends.
func Start(t testing.TB, records []Record, servfail ...string) string {
	t.Helper()
	return StartAt(t, "", records, servfail...)
}

// StartAt is Start on a given address (ip:port; "" picks a free port on
// 127.0.0.1), e.g. port 53 on a loopback address of its own for programs
// that read /etc/resolv.conf, which names no port.
func StartAt(t testing.TB, addr string, records []Record, servfail ...string) string {
	t.Helper()
	knotd, err := exec.LookPath("knotd")
	if err != nil {
		if _, err2 := os.Stat("/usr/sbin/knotd"); err2 != nil {
			t.Fatalf("knotd not found (apt-get install knot): %v", err)
		}
		knotd = "/usr/sbin/knotd"
	}
	dir := t.TempDir()
	for _, d := range []string{"run", "db"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var zone strings.Builder
	zone.WriteString("$TTL 300\n. SOA ns.test. hostmaster.test. 1 60 60 60 60\n. NS ns.test.\n")
	for _, r := range records {
		name := r.Name
		if !strings.HasSuffix(name, ".") {
			name += "."
		}
		ttl := r.TTL
		if ttl == 0 {
			ttl = 300
		}
		fmt.Fprintf(&zone, "%s %d IN %s %s\n", name, ttl, r.Type, r.Data)
	}
	if err := os.WriteFile(filepath.Join(dir, "root.zone"), []byte(zone.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if addr == "" {
		addr = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	var conf strings.Builder
	fmt.Fprintf(&conf, "server:\n    rundir: \"%s/run\"\n    listen: %s@%s\n    user: root:root\n", dir, host, port)
	fmt.Fprintf(&conf, "database:\n    storage: \"%s/db\"\n", dir)
	conf.WriteString("log:\n  - target: stderr\n    any: info\n")
	conf.WriteString("template:\n  - id: default\n    zonefile-sync: -1\n    zonefile-load: whole\n    journal-content: none\n    semantic-checks: off\n")
	fmt.Fprintf(&conf, "zone:\n  - domain: .\n    file: \"%s/root.zone\"\n", dir)
	for i, name := range servfail {
		// A zone whose file does not parse stays configured, not loaded:
		// Knot answers SERVFAIL for it.
		f := filepath.Join(dir, fmt.Sprintf("broken%d.zone", i))
		os.WriteFile(f, []byte("this is not a zone file\n"), 0o644)
		fmt.Fprintf(&conf, "  - domain: %s\n    file: \"%s\"\n", strings.TrimSuffix(name, ".")+".", f)
	}
	cf := filepath.Join(dir, "knot.conf")
	if err := os.WriteFile(cf, []byte(conf.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(knotd, "-c", cf)
	var logb strings.Builder
	cmd.Stdout, cmd.Stderr = &logb, &logb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	// Ready when the root zone answers over TCP.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			if strings.Contains(logb.String(), "loaded") || strings.Contains(logb.String(), "serial") {
				return addr
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("knotd did not start: %s", logb.String())
	return ""
}

// freePort returns a port free for both UDP and TCP on 127.0.0.1.
func freePort(t testing.TB) int {
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
		l.Close()
		if err == nil {
			u.Close()
			return port
		}
	}
	t.Fatal("no free port")
	return 0
}
