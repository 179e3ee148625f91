package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestInteropDiskFull (disk full): envelopd
// serve runs with a file size limit (RLIMIT_FSIZE, set on the running
// process) a little above its database's size, so the write-ahead log
// soon cannot grow: the kernel answers EFBIG exactly where a full disk
// answers ENOSPC, and SQLite fails the commit. Every message must then be
// answered 451 (temporary: the client keeps it and retries), the server
// must stay up, and nothing it answered 250 may be lost: after a restart
// without the limit each acknowledged Message-ID is stored exactly once,
// the database passes integrity_check, and the refused mails go through
// when sent again.
func TestInteropDiskFull(t *testing.T) {
	if os.Getenv("ENVELOPD_INTEROP") != "1" {
		t.Skip("interop test: set ENVELOPD_INTEROP=1")
	}
	dir := t.TempDir()
	bin := buildEnvelopd(t, dir)
	const total = 1500
	c, err := Generate(GenOptions{Messages: total, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	txt := filepath.Join(dir, "dkim.txt")
	if err := writeTXT(txt, c); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "envelopd.db")
	ctx := context.Background()
	start := func(n int) (*server, string) {
		addr, err := freeAddr()
		if err != nil {
			t.Fatal(err)
		}
		s, err := startServer(ctx, bin, []string{"serve", "--smtp", addr, "--db", db, "--dkim-txt", txt},
			addr, filepath.Join(dir, fmt.Sprintf("serve-%d.log", n)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.kill) // a failed test leaves no server behind
		return s, addr
	}

	srv, addr := start(0)
	// The limit: 1 MiB above the largest file now. The WAL's automatic
	// checkpoint runs at 1000 pages (4 MiB), so the log fills first and
	// stays full.
	var largest int64
	for _, f := range []string{db, db + "-wal"} {
		if fi, err := os.Stat(f); err == nil && fi.Size() > largest {
			largest = fi.Size()
		}
	}
	limit := uint64(largest + 1<<20)
	rl := unix.Rlimit{Cur: limit, Max: limit}
	if err := unix.Prlimit(srv.cmd.Process.Pid, unix.RLIMIT_FSIZE, &rl, nil); err != nil {
		srv.kill()
		t.Fatalf("prlimit: %v", err)
	}
	record := filepath.Join(dir, "accepted.txt")
	rec, err := OpenRecorder(record)
	if err != nil {
		t.Fatal(err)
	}
	r := Drive(ctx, c.Mails[:1000], DriveOptions{Addr: addr, Sessions: 10, KeepOpen: true, Record: rec, Timeout: 10 * time.Second})
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("with a %d-byte file size limit: %d answered 250, %d refused %v, %d failed; first error: %s",
		limit, r.Accepted, r.Rejected, r.RejectCodes, r.Failed, r.FirstError)
	if r.Accepted == 0 {
		t.Errorf("no message was accepted before the log filled (limit too low for the test)")
	}
	if r.Rejected == 0 {
		t.Fatalf("no message was refused: the file size limit never bit")
	}
	for code, n := range r.RejectCodes {
		if code != "451" {
			t.Errorf("%d messages answered %s; a full disk must answer 451 (temporary)", n, code)
		}
	}
	if r.Failed != 0 {
		t.Errorf("%d sessions failed (connection lost): the server must stay up on a full disk", r.Failed)
	}
	if !srv.running() {
		t.Fatalf("envelopd serve exited on a full disk: %v (log %s)", srv.err, srv.log)
	}
	// A stop on a full disk may fail its final checkpoint; what matters is
	// the database the restart finds.
	if err := srv.stop(); err != nil {
		t.Logf("envelopd serve stopped with %v (log %s)", err, srv.log)
	}

	srv, addr = start(1)
	defer srv.stop()
	integrityCheck(t, db)
	acked, err := ReadRecord(record)
	if err != nil {
		t.Fatal(err)
	}
	stored := storedIDs(t, bin, db)
	for _, id := range acked {
		if stored[normID(id)] != 1 {
			t.Errorf("%s was answered 250 but is stored %d times", id, stored[normID(id)])
		}
	}
	// The refused mails (and the rest) go through once there is room.
	var retry []Mail
	ackedSet := map[string]bool{}
	for _, id := range acked {
		ackedSet[normID(id)] = true
	}
	for _, m := range c.Mails {
		if !ackedSet[normID(m.MessageID)] {
			retry = append(retry, m)
		}
	}
	r2 := Drive(ctx, retry, DriveOptions{Addr: addr, Sessions: 4, KeepOpen: true})
	if r2.Accepted != len(retry) {
		t.Fatalf("after the restart %d of %d mails accepted: %s", r2.Accepted, len(retry), r2.FirstError)
	}
	stored = storedIDs(t, bin, db)
	for _, m := range c.Mails {
		if n := stored[normID(m.MessageID)]; n != 1 {
			t.Errorf("%s stored %d times, want once", m.MessageID, n)
		}
	}
	t.Logf("after the restart: %d acknowledged before were all kept; %d resent, all accepted; %d stored",
		len(acked), len(retry), len(stored))
}

// storedIDs counts the stored messages by normalised Message-ID.
func storedIDs(t *testing.T, bin, db string) map[string]int {
	t.Helper()
	views, err := Inbox(context.Background(), bin, db)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]int{}
	for _, v := range views {
		m[normID(v.MessageID)]++
	}
	return m
}
