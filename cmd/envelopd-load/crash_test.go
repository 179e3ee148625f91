package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"
)

// buildEnvelopd builds the envelopd binary into dir ($ENVELOPD_BIN, when
// set, is used instead).
func buildEnvelopd(t *testing.T, dir string) string {
	t.Helper()
	if bin := os.Getenv("ENVELOPD_BIN"); bin != "" {
		return bin
	}
	bin := filepath.Join(dir, "envelopd")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/envelopd")
	cmd.Dir = "../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build envelopd: %v\n%s", err, out)
	}
	return bin
}

// integrityCheck runs PRAGMA integrity_check on db, opened read-only.
func integrityCheck(t *testing.T, db string) {
	t.Helper()
	conn, err := sql.Open("sqlite", "file:"+db+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var res string
	if err := conn.QueryRow("PRAGMA integrity_check").Scan(&res); err != nil {
		t.Fatalf("integrity_check: %v", err)
	}
	if res != "ok" {
		t.Fatalf("integrity_check: %s", res)
	}
}

func normID(id string) string { return strings.Trim(strings.TrimSpace(id), "<>") }

// TestInteropCrashSafety (issue 11, "Crash safety"): envelopd serve under
// load is killed with SIGKILL at a random moment, five times, and restarted
// on the same database each time. Every Message-ID the client got a 250 for
// must be stored exactly once, the database must pass integrity_check, and
// the restarted server must take mail again. ENVELOPD_CRASH_SEED
// reproduces the kill points.
func TestInteropCrashSafety(t *testing.T) {
	if os.Getenv("ENVELOPD_INTEROP") != "1" {
		t.Skip("interop test: set ENVELOPD_INTEROP=1")
	}
	dir := t.TempDir()
	bin := buildEnvelopd(t, dir)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("ENVELOPD_CRASH_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("ENVELOPD_CRASH_SEED=%d", seed)
	rng := rand.New(rand.NewPCG(seed, 11))

	const rounds, perRound, after = 5, 1500, 20
	c, err := Generate(GenOptions{Messages: rounds*(perRound+after) + after, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	txt := filepath.Join(dir, "dkim.txt")
	if err := writeTXT(txt, c); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "envelopd.db")
	// The hand-off log: every accepted message is handed to this command
	// (one file per delivery, named by a counter-free mktemp) at least
	// once, across the kills; a delivery cut off by a kill is retried when
	// its claim lease (2 × --handoff-timeout) ends.
	handed := filepath.Join(dir, "handed")
	if err := os.Mkdir(handed, 0o755); err != nil {
		t.Fatal(err)
	}
	handoff := "cat > \"$(mktemp -p " + handed + ")\""
	ctx := context.Background()
	start := func(n int) (*server, string) {
		addr, err := freeAddr()
		if err != nil {
			t.Fatal(err)
		}
		s, err := startServer(ctx, bin, []string{"serve", "--smtp", addr, "--db", db, "--dkim-txt", txt,
			"--exec", handoff, "--handoff-timeout", "2s"},
			addr, filepath.Join(dir, fmt.Sprintf("serve-%d.log", n)))
		if err != nil {
			t.Fatal(err)
		}
		return s, addr
	}
	record := filepath.Join(dir, "accepted.txt")
	mails := c.Mails
	take := func(n int) []Mail {
		m := mails[:n]
		mails = mails[n:]
		return m
	}
	// check verifies the store against the record: each recorded id once.
	check := func(round int) {
		t.Helper()
		integrityCheck(t, db)
		ids, err := ReadRecord(record)
		if err != nil {
			t.Fatal(err)
		}
		views, err := Inbox(ctx, bin, db)
		if err != nil {
			t.Fatal(err)
		}
		stored := map[string]int{}
		for _, v := range views {
			stored[normID(v.MessageID)]++
		}
		for id, n := range stored {
			if n > 1 {
				t.Errorf("round %d: %s stored %d times", round, id, n)
			}
		}
		for _, id := range ids {
			if stored[normID(id)] != 1 {
				t.Errorf("round %d: %s was answered 250 but is stored %d times", round, id, stored[normID(id)])
			}
		}
		t.Logf("round %d: %d acknowledged, %d stored, integrity ok", round, len(ids), len(views))
	}

	srv, addr := start(0)
	for round := 1; round <= rounds; round++ {
		rec, err := OpenRecorder(record)
		if err != nil {
			t.Fatal(err)
		}
		batch := take(perRound)
		done := make(chan *Result, 1)
		go func() {
			done <- Drive(ctx, batch, DriveOptions{Addr: addr, Sessions: 10, KeepOpen: round%2 == 1, Record: rec, Timeout: 10 * time.Second})
		}()
		killAt := time.Duration(20+rng.IntN(600)) * time.Millisecond
		time.Sleep(killAt)
		srv.kill() // SIGKILL
		r := <-done
		if err := rec.Close(); err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: SIGKILL after %v: %d of %d answered 250", round, killAt, r.Accepted, perRound)
		if r.Accepted == perRound {
			t.Logf("round %d: the load finished before the kill", round)
		}
		// Restart on the same database; it must take mail again.
		srv, addr = start(round)
		rec, err = OpenRecorder(record)
		if err != nil {
			t.Fatal(err)
		}
		r = Drive(ctx, take(after), DriveOptions{Addr: addr, Sessions: 2, KeepOpen: true, Record: rec})
		rec.Close()
		if r.Accepted != after {
			t.Fatalf("round %d: after restart %d of %d accepted: %s", round, r.Accepted, after, r.FirstError)
		}
		check(round)
	}
	// The hand-off log resumes: after the last restart every accepted
	// message reaches the agent (at least once; a kill between the exec
	// and its "done" may repeat one).
	views, err := Inbox(ctx, bin, db)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]bool{}
	for _, v := range views {
		if v.Status == "accepted" {
			want[v.ID] = true
		}
	}
	var got map[int64]int
	for deadline := time.Now().Add(60 * time.Second); ; {
		got = handedIDs(t, handed)
		missing := 0
		for id := range want {
			if got[id] == 0 {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("hand-off did not resume: %d of %d accepted messages never reached the agent", missing, len(want))
		}
		time.Sleep(200 * time.Millisecond)
	}
	repeats := 0
	for id, n := range got {
		if !want[id] {
			t.Errorf("message %d was handed off but is not accepted", id)
		}
		repeats += n - 1
	}
	t.Logf("hand-off: %d accepted messages delivered, %d repeated deliveries", len(want), repeats)
	if err := srv.stop(); err != nil {
		t.Errorf("envelopd serve did not stop cleanly: %v", err)
	}
	check(rounds + 1)
}

// handedIDs reads the stored ids of the messages the hand-off command
// wrote (one JSON document per file), with how often each was handed.
func handedIDs(t *testing.T, dir string) map[int64]int {
	t.Helper()
	files, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64]int{}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f.Name()))
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			ID int64 `json:"id"`
		}
		if json.Unmarshal(b, &m) != nil {
			continue // still being written
		}
		got[m.ID]++
	}
	return got
}
