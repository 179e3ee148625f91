package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// nobody is the unprivileged user the read-only test runs serve as (root
// ignores file modes, so a read-only file needs another user).
const nobodyID = 65534

// TestInteropReadOnlyDB (read-only DB): envelopd
// serve, run as an unprivileged user, takes mail into its database; the
// database file is then made read-only (mode 0444) and serve is started
// on it again. SQLite opens it read-only, so every message must be
// answered 451 (temporary), never 250 and never a permanent error, and the
// server must stay up; the mail acknowledged before is all still there,
// and once the file is writable again the refused mails go through.
func TestInteropReadOnlyDB(t *testing.T) {
	if os.Getenv("ENVELOPD_INTEROP") != "1" {
		t.Skip("interop test: set ENVELOPD_INTEROP=1")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to run envelopd serve as another user (root ignores file modes)")
	}
	dir := t.TempDir()
	// serve runs as nobody: it must reach the binary, the key file and
	// the database directory (where SQLite creates -wal and -shm).
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	bin := buildEnvelopd(t, dir)
	c, err := Generate(GenOptions{Messages: 600, Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
	txt := filepath.Join(dir, "dkim.txt")
	if err := writeTXT(txt, c); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(txt, 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "envelopd.db")
	ctx := context.Background()
	asNobody := &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobodyID, Gid: nobodyID}}
	start := func(n int) (*server, string) {
		t.Helper()
		addr, err := freeAddr()
		if err != nil {
			t.Fatal(err)
		}
		s, err := startServerAttr(ctx, bin, []string{"serve", "--smtp", addr, "--db", db, "--dkim-txt", txt},
			addr, filepath.Join(dir, fmt.Sprintf("serve-%d.log", n)), asNobody)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.kill) // a failed test leaves no server behind
		return s, addr
	}
	stop := func(s *server) {
		t.Helper()
		if err := s.stop(); err != nil {
			t.Errorf("envelopd serve did not stop cleanly: %v (log %s)", err, s.log)
		}
	}
	drive := func(addr string, mails []Mail) *Result {
		return Drive(ctx, mails, DriveOptions{Addr: addr, Sessions: 4, KeepOpen: true, Timeout: 10 * time.Second})
	}

	// 1. Writable: the first 200 mails are accepted.
	srv, addr := start(0)
	if r := drive(addr, c.Mails[:200]); r.Accepted != 200 {
		stop(srv)
		t.Fatalf("writable database: %d of 200 accepted: %s", r.Accepted, r.FirstError)
	}
	stop(srv)
	// Created 0600 (it holds password hashes and keys), and
	// no warning about a database that is writable.
	if fi, err := os.Stat(db); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("database created with mode %v (%v), want 0600", fi.Mode().Perm(), err)
	}
	if log, _ := os.ReadFile(filepath.Join(dir, "serve-0.log")); strings.Contains(string(log), "not writable") {
		t.Errorf("writable database, yet serve warned: %s", log)
	}

	// 2. Read-only: every mail is refused with 451, the server stays up.
	if err := os.Chmod(db, 0o444); err != nil {
		t.Fatal(err)
	}
	srv, addr = start(1)
	r := drive(addr, c.Mails[200:400])
	t.Logf("read-only database: %d answered 250, %d refused %v, %d failed; first error: %s",
		r.Accepted, r.Rejected, r.RejectCodes, r.Failed, r.FirstError)
	if r.Accepted != 0 || r.Failed != 0 || r.RejectCodes["451"] != 200 || len(r.RejectCodes) != 1 {
		t.Errorf("read-only database: want all 200 refused with 451, none accepted, no connection lost")
	}
	if !srv.running() {
		t.Fatalf("envelopd serve exited on a read-only database: %v (log %s)", srv.err, srv.log)
	}
	stop(srv)
	// The read-only database is named at start, not found out
	// mail by mail.
	if log, _ := os.ReadFile(filepath.Join(dir, "serve-1.log")); !strings.Contains(string(log), "database is not writable") {
		t.Errorf("serve started on a read-only database without a warning: %s", log)
	}
	integrityCheck(t, db)
	if got := storedIDs(t, bin, db); len(got) != 200 {
		t.Errorf("after the read-only run %d messages are stored, want the 200 acknowledged before", len(got))
	}

	// 3. Writable again: the refused mails and the rest go through.
	if err := os.Chmod(db, 0o644); err != nil {
		t.Fatal(err)
	}
	srv, addr = start(2)
	defer stop(srv)
	if r := drive(addr, c.Mails[200:]); r.Accepted != 400 {
		t.Fatalf("writable again: %d of 400 accepted: %s", r.Accepted, r.FirstError)
	}
	stored := storedIDs(t, bin, db)
	for _, m := range c.Mails {
		if n := stored[normID(m.MessageID)]; n != 1 {
			t.Errorf("%s stored %d times, want once", m.MessageID, n)
		}
	}
}
