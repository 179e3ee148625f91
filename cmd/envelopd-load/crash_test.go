package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"maps"
	"math/rand/v2"
	"net"
	"net/mail"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	_ "modernc.org/sqlite"

	"github.com/envelopd/envelopd/dkim"
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

// TestInteropCrashSafety: envelopd serve under
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
	// The outbound queue: one mail in 25 carries, besides its passing
	// signature, one whose key is not published, so it has dkim_failed
	// while its sender is verified (a passing signature aligned with
	// From: no OOPS goes to unverified senders), and envelopd
	// queues a courtesy OOPS (dkim_failed) for that sender — within the
	// OOPS rate limits — signed for envelopd.load.test and delivered
	// through a sink standing in for the smarthost.
	for i := range c.Mails {
		if i%25 == 7 {
			d := c.Mails[i].From[strings.LastIndexByte(c.Mails[i].From, '@')+1:]
			bogus := "DKIM-Signature: v=1; a=ed25519-sha256; c=relaxed/relaxed; d=" + d +
				"; s=unpublished; h=from; bh=AAAA; b=AAAA\r\n"
			c.Mails[i].Data = append([]byte(bogus), c.Mails[i].Data...)
		}
	}
	oopsKey, err := dkim.GenerateKey("ed25519")
	if err != nil {
		t.Fatal(err)
	}
	oopsPEM, err := dkim.MarshalKeyPEM(oopsKey)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "oops.pem")
	if err := os.WriteFile(keyFile, oopsPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	sink := startSink(t)
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
			"--dkim-key", keyFile, "--dkim-selector", "oops", "--dkim-domain", "envelopd.load.test",
			"--exec", handoff, "--handoff-timeout", "2s",
			"--smtp-url", "smtp://" + sink.addr, "--submit-timeout", "2s"},
			addr, filepath.Join(dir, fmt.Sprintf("serve-%d.log", n)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.kill) // a failed test leaves no server behind
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
		// Hand-off is for received mail; the stored copies of the
		// courtesy OOPS mails envelopd sent are not handed off.
		if v.Status == "accepted" && v.Direction == "in" {
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
			logTail(t, filepath.Join(dir, fmt.Sprintf("serve-%d.log", rounds)))
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
	// The outbound queue resumes: every queued OOPS is sent (a claim cut
	// off by a kill is retried when its 4 s lease ends) and reached the
	// sink at least once.
	var entries []queueView
	for deadline := time.Now().Add(90 * time.Second); ; {
		entries = queueEntries(t, bin, db)
		unsent := 0
		for _, e := range entries {
			for _, r := range e.Recipients {
				if r.State != "sent" {
					unsent++
				}
			}
		}
		if unsent == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("outbound queue did not resume: %d of %d entries have unsent recipients", unsent, len(entries))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if len(entries) == 0 {
		t.Fatal("no courtesy OOPS was queued for the altered mails")
	}
	seen := sink.received()
	for _, e := range entries {
		if seen[normID(e.MessageID)] == 0 {
			t.Errorf("queue entry %d (%s) is sent but never reached the smarthost", e.ID, e.MessageID)
		}
	}
	t.Logf("outbound queue: %d courtesy OOPS sent, %d submissions seen by the smarthost", len(entries), sink.total())
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

// logTail logs the last lines of a server log (on failure).
func logTail(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Logf("%s: %v", path, err)
		return
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	t.Logf("last lines of %s:\n%s", path, strings.Join(lines[max(0, len(lines)-15):], "\n"))
}

// queueView is the part of `envelopd queue --json` the crash test reads.
type queueView struct {
	ID         int64  `json:"id"`
	MessageID  string `json:"message_id"`
	Recipients []struct {
		Rcpt  string `json:"rcpt"`
		State string `json:"state"`
	} `json:"recipients"`
}

func queueEntries(t *testing.T, bin, db string) []queueView {
	t.Helper()
	out, err := exec.Command(bin, "queue", "--db", db, "--json").Output()
	if err != nil {
		t.Fatalf("envelopd queue: %v", err)
	}
	var vs []queueView
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var v queueView
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("envelopd queue --json: %v", err)
		}
		vs = append(vs, v)
	}
	return vs
}

// sink is the smarthost of the crash test: a go-smtp server that keeps the
// Message-ID of every message it accepts.
type sink struct {
	addr string
	mu   sync.Mutex
	ids  map[string]int
	n    int
}

func startSink(t *testing.T) *sink {
	t.Helper()
	k := &sink{ids: map[string]int{}}
	srv := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return &sinkSession{k: k}, nil }))
	srv.Domain = "smarthost.test"
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	srv.ErrorLog = log.New(io.Discard, "", 0)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	k.addr = ln.Addr().String()
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return k
}

func (k *sink) received() map[string]int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return maps.Clone(k.ids)
}

func (k *sink) total() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.n
}

type sinkSession struct{ k *sink }

func (s *sinkSession) Mail(string, *smtp.MailOptions) error { return nil }
func (s *sinkSession) Rcpt(string, *smtp.RcptOptions) error { return nil }
func (s *sinkSession) Reset()                               {}
func (s *sinkSession) Logout() error                        { return nil }
func (s *sinkSession) Data(r io.Reader) error {
	m, err := mail.ReadMessage(r)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, m.Body)
	s.k.mu.Lock()
	s.k.ids[normID(m.Header.Get("Message-ID"))]++
	s.k.n++
	s.k.mu.Unlock()
	return nil
}
