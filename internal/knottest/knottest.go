// Package knottest runs Knot DNS (knotd, Debian `knot`) on loopback as the
// authoritative server of test zones, for interop tests that need a real
// DNS server (the recipe of shared/interop/README.md, "An authoritative DNS
// server on loopback: Knot": no systemd, a temporary directory, a root zone
// so that names outside the test records are NXDOMAIN rather than REFUSED).
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
	"sort"
	"strings"
	"sync"
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

// SOA is the head of a test zone for origin: SOA and NS records.
func SOA(origin string) string {
	return fmt.Sprintf("$ORIGIN %s.\n$TTL 60\n@ IN SOA ns.%s. hostmaster.%s. 1 3600 600 86400 60\n@ IN NS ns.%s.\nns IN A 127.0.0.1\n",
		origin, origin, origin, origin)
}

// Start runs knotd serving records in the root zone (and SERVFAIL for the
// names in servfail, each made its own zone that fails to load) on a free
// port of 127.0.0.1 and returns its address (UDP and TCP). It stops when
// the test ends.
func Start(t testing.TB, records []Record, servfail ...string) string {
	t.Helper()
	return StartAt(t, FreeAddr(t), records, servfail...)
}

// StartAt is Start on a given address (ip:port), e.g. port 53 on a
// loopback address of its own for programs that read /etc/resolv.conf,
// which names no port.
func StartAt(t testing.TB, addr string, records []Record, servfail ...string) string {
	t.Helper()
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
	return serve(t, addr, map[string]string{".": zone.String()}, servfail)
}

// StartZones serves zones (origin without the trailing dot → zone file
// text) on a free port of 127.0.0.1 and returns its address. A zone file
// Knot cannot load fails the test.
func StartZones(t testing.TB, zones map[string]string) string {
	t.Helper()
	return StartZonesAt(t, FreeAddr(t), zones)
}

// StartZonesAt is StartZones on addr (from FreeAddr): for a test that must
// name the server before it knows the zones.
func StartZonesAt(t testing.TB, addr string, zones map[string]string) string {
	t.Helper()
	return serve(t, addr, zones, nil)
}

func serve(t testing.TB, addr string, zones map[string]string, servfail []string) string {
	t.Helper()
	bin, err := exec.LookPath("knotd")
	if err != nil {
		if _, err2 := os.Stat("/usr/sbin/knotd"); err2 != nil {
			t.Fatalf("interop peer knotd is missing (apt-get install knot): %v", err)
		}
		bin = "/usr/sbin/knotd"
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
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	var conf strings.Builder
	fmt.Fprintf(&conf, "server:\n    rundir: %q\n    listen: %s@%s\n    user: root:root\n", filepath.Join(dir, "run"), host, port)
	fmt.Fprintf(&conf, "database:\n    storage: %q\n", filepath.Join(dir, "db"))
	conf.WriteString("log:\n  - target: stderr\n    any: info\n")
	conf.WriteString("template:\n  - id: default\n    zonefile-sync: -1\n    zonefile-load: whole\n    journal-content: none\n    semantic-checks: off\nzone:\n")
	for i, n := range names {
		f := filepath.Join(dir, fmt.Sprintf("zone%d", i))
		if err := os.WriteFile(f, []byte(all[n]), 0o644); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&conf, "  - domain: %q\n    file: %q\n", n, f)
	}
	for i, name := range servfail {
		// A zone whose file does not parse stays configured, not loaded:
		// Knot answers SERVFAIL for it.
		f := filepath.Join(dir, fmt.Sprintf("broken%d.zone", i))
		if err := os.WriteFile(f, []byte("this is not a zone file\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&conf, "  - domain: %q\n    file: %q\n", strings.TrimSuffix(name, ".")+".", f)
	}
	cf := filepath.Join(dir, "knot.conf")
	if err := os.WriteFile(cf, []byte(conf.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-c", cf)
	var log syncBuilder
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
	// Ready when every good zone is loaded (Knot logs "loaded" per zone)
	// and the server answers over TCP.
	deadline := time.Now().Add(20 * time.Second)
	for {
		s := log.String()
		loaded := max(strings.Count(s, "loaded, serial"), strings.Count(s, "] loaded"))
		if loaded >= len(names) {
			if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
				c.Close()
				return addr
			}
		}
		if len(servfail) == 0 && (strings.Contains(s, "failed to load") || strings.Contains(s, "zone file parser") && strings.Contains(s, "error")) {
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
func FreeAddr(t testing.TB) string {
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

// syncBuilder is knotd's log: written by the process's copying goroutine,
// read by the readiness loop.
type syncBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuilder) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuilder) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
