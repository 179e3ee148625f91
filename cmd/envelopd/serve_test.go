package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/envelopd/envelopd/internal/pgtest"
)

// startServe runs `envelopd serve` in-process on 127.0.0.1:0 with extra
// flags and returns its SMTP address and database path; the server stops
// when the test ends.
func startServe(t *testing.T, db string, flags ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan string, 1)
	done := make(chan int, 1)
	var errb bytes.Buffer
	args := append([]string{"serve", "--smtp", "127.0.0.1:0", "--db", db}, flags...)
	go func() {
		done <- run(ctx, &env{args: args, stdin: strings.NewReader(""), stdout: &bytes.Buffer{}, stderr: &errb,
			ready: func(a string) { addrc <- a }})
	}()
	select {
	case a := <-addrc:
		t.Cleanup(func() {
			cancel()
			if code := <-done; code != 0 {
				t.Errorf("serve exited %d", code)
			}
		})
		return a
	case code := <-done:
		cancel()
		t.Fatalf("serve exited %d before listening: %s", code, errb.String())
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatal("serve did not start")
	}
	return ""
}

func smtpSend(t *testing.T, addr, from, to string, msg []byte) {
	t.Helper()
	c, err := smtp.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SendMail(from, []string{to}, bytes.NewReader(msg)); err != nil {
		t.Fatalf("send: %v", err)
	}
}

// cli runs an envelopd command and returns stdout and the exit status.
func cli(t *testing.T, args ...string) (string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), &env{args: args, stdin: strings.NewReader(""), stdout: &out, stderr: &errb})
	if code == 2 {
		t.Fatalf("%v: exit 2: %s", args, errb.String())
	}
	return out.String(), code
}

type inboxLine struct {
	ID       int64  `json:"id"`
	Type     string `json:"type"`
	Status   string `json:"status"`
	ThreadID string `json:"thread_id"`
	Valid    bool   `json:"valid"`
	Errors   []struct {
		Code string `json:"code"`
	} `json:"errors"`
	Direction  string `json:"direction"`
	ReceivedAt string `json:"received_at"`
	MessageID  string `json:"message_id"`
}

// waitInbox is inboxJSON once it lists n messages (or after 10 s): the
// courtesy OOPS a mail is owed is queued, with its stored copy, by the
// owed-OOPS worker just after the mail's commit, not before the 250.
func waitInbox(t *testing.T, db string, n int) []inboxLine {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		all := inboxJSON(t, db)
		if len(all) >= n || time.Now().After(deadline) {
			return all
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func inboxJSON(t *testing.T, db string, filter ...string) []inboxLine {
	t.Helper()
	out, _ := cli(t, append([]string{"inbox", "--json", "--db", db}, filter...)...)
	var lines []inboxLine
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		var v inboxLine
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("inbox line %q: %v", l, err)
		}
		lines = append(lines, v)
	}
	return lines
}

// TestServeInboxThreadWatch drives the binary's own commands end to end:
// serve ingests the six-mail first-contact flow and a replayed proof, inbox
// lists them with their status, thread returns the whole flow, watch
// resumes from a cursor.
func TestServeInboxThreadWatch(t *testing.T) {
	testServeInboxThreadWatch(t, filepath.Join(t.TempDir(), "envelopd.db"))
}

// TestPostgresServeInboxThreadWatch is TestServeInboxThreadWatch with
// --db a postgres:// URL (skipped without Postgres).
func TestPostgresServeInboxThreadWatch(t *testing.T) {
	testServeInboxThreadWatch(t, pgtest.Schema(t))
}

func testServeInboxThreadWatch(t *testing.T, db string) {
	// Signed senders: the replayed proof's sender is verified, so it is
	// owed the courtesy OOPS (sent from agent@server.test, a signing domain).
	k := newTestDKIM(t, "buyer.test", "worker.test", "payer.test")
	addr := startServe(t, db, k.flags("server.test")...)
	files, _ := filepath.Glob("../../testdata/flows/first-contact-unpaid/*.eml")
	files = append(files, "../../testdata/flows/replay/01-pay.eml", "../../testdata/flows/replay/02-pay-same-proof.eml")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		smtpSend(t, addr, "agent@client.test", "agent@server.test", k.sign(t, b))
	}

	all := waitInbox(t, db, 9)
	// 8 received, and the courtesy OOPS answering the replayed proof.
	if len(all) != 9 {
		t.Fatalf("inbox lists %d messages, want 9", len(all))
	}
	var types []string
	for _, m := range all[:6] {
		types = append(types, m.Type)
		if m.Status != "accepted" || !m.Valid || m.ThreadID != all[0].ThreadID || m.Direction != "in" || m.ReceivedAt == "" {
			t.Errorf("message %d: %+v", m.ID, m)
		}
	}
	if got := strings.Join(types, ","); got != "which,methods,order,invoice,pay,fulfill" {
		t.Errorf("types %s", got)
	}
	// The second PAY carries the first PAY's proof (keys reordered): a
	// replay, stored as a duplicate, not accepted.
	if last := all[7]; last.Status != "duplicate" || len(last.Errors) != 1 || last.Errors[0].Code != "duplicate_proof" {
		t.Errorf("replayed proof: %+v", last)
	}
	if oops := all[8]; oops.Type != "oops" || oops.Direction != "out" || oops.ThreadID != all[7].ThreadID {
		t.Errorf("courtesy OOPS for the replay: %+v", oops)
	}
	if dups := inboxJSON(t, db, "--status", "duplicate"); len(dups) != 1 {
		t.Errorf("--status duplicate lists %d", len(dups))
	}
	if pays := inboxJSON(t, db, "--type", "PAY"); len(pays) != 3 {
		t.Errorf("--type PAY lists %d", len(pays))
	}

	out, code := cli(t, "thread", "--db", db, "ful_7g8h")
	var th struct {
		ThreadID string      `json:"thread_id"`
		Messages []inboxLine `json:"messages"`
	}
	if err := json.Unmarshal([]byte(out), &th); err != nil || code != 0 {
		t.Fatalf("thread: %v, exit %d, %s", err, code, out)
	}
	if th.ThreadID != all[0].ThreadID || len(th.Messages) != 6 {
		t.Errorf("thread %s has %d messages, want %s with 6", th.ThreadID, len(th.Messages), all[0].ThreadID)
	}
	if _, code := cli(t, "thread", "--db", db, "no-such-id"); code != 1 {
		t.Errorf("unknown thread exit %d, want 1", code)
	}

	// Ids are increasing, not dense (Postgres numbers them by
	// transaction): resume after the fifth.
	out, _ = cli(t, "watch", "--once", "--db", db, "--since", fmt.Sprint(all[4].ID))
	if n := strings.Count(out, "\n"); n != 4 {
		t.Errorf("watch --since 5 printed %d lines, want 4", n)
	}
}

// TestServeCourtesyOOPS checks the OOPS for an unknown type from a
// verified (signed, aligned) sender is queued, threaded to the offending
// mail and stored as an outbound message; that an OOPS is never answered
// with an OOPS; and that a forged, unsigned sender gets none (no
// backscatter), its stored record saying why.
func TestServeCourtesyOOPS(t *testing.T) {
	db := filepath.Join(t.TempDir(), "envelopd.db")
	k := newTestDKIM(t, "buyer.test", "x.test")
	addr := startServe(t, db, k.flags("worker.test")...)
	smtpSend(t, addr, "alice@buyer.test", "bob@worker.test", k.sign(t, []byte("From: alice@buyer.test\r\nTo: bob@worker.test\r\n"+
		"Subject: REFUND | please\r\nMessage-ID: <refund-1@buyer.test>\r\n\r\nhello\r\n")))
	waitInbox(t, db, 2) // its OOPS, stored (in its thread) before the next mail
	smtpSend(t, addr, "carol@x.test", "bob@worker.test", k.sign(t, []byte("From: carol@x.test\r\nTo: bob@worker.test\r\n"+
		"Subject: OOPS\r\nMessage-ID: <oops-in@x.test>\r\n\r\n{\"v\":\"0.2.0\",\"type\":\"oops\"}\r\n")))
	smtpSend(t, addr, "", "bob@worker.test", k.sign(t, []byte("From: mailer-daemon@x.test\r\nTo: bob@worker.test\r\n"+
		"Subject: NOPE\r\nMessage-ID: <bounce@x.test>\r\n\r\nbounce\r\n")))
	smtpSend(t, addr, "x@attacker.test", "bob@worker.test", []byte("From: victim@buyer.test\r\nTo: bob@worker.test\r\n"+
		"Subject: REFUND | forged\r\nMessage-ID: <forged@attacker.test>\r\n\r\nhello\r\n"))
	all := waitInbox(t, db, 5)
	if len(all) != 5 {
		t.Fatalf("%d messages stored, want 4 received + 1 OOPS", len(all))
	}
	out, _ := cli(t, "inbox", "--json", "--db", db, "--status", "quarantined")
	var forged struct {
		OOPS     json.RawMessage `json:"oops"`
		Decision struct {
			Sent   bool   `json:"sent"`
			Reason string `json:"reason"`
		} `json:"oops_decision"`
		Warnings []struct {
			Code string `json:"code"`
		} `json:"warnings"`
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &forged); err != nil {
		t.Fatal(err)
	}
	if string(forged.OOPS) != "null" || forged.Decision.Sent || forged.Decision.Reason != "sender_unverified" ||
		len(forged.Warnings) != 1 || forged.Warnings[0].Code != "oops_suppressed" {
		t.Errorf("forged mail: %s", lines[len(lines)-1])
	}
	oops := all[1]
	if oops.Direction != "out" || oops.Type != "oops" || oops.ThreadID != all[0].ThreadID {
		t.Errorf("courtesy OOPS: %+v (offending mail in thread %s)", oops, all[0].ThreadID)
	}
	out, _ = cli(t, "queue", "--json", "--db", db)
	if strings.Count(out, `"kind":"oops"`) != 1 || !strings.Contains(out, "alice@buyer.test") {
		t.Errorf("queue: %s", out)
	}
}

// TestRelayKeyTableExport: --dkim-txt-out publishes the relay's own
// per-domain keys in the --dkim-txt format, the same key across restarts,
// so verifiers in other processes (envelopd poll, dkim verify) can check
// relay-signed mail.
func TestRelayKeyTableExport(t *testing.T) {
	dir := t.TempDir()
	db, table := filepath.Join(dir, "relay.db"), filepath.Join(dir, "keys.txt")
	var first string
	for i := range 2 {
		ctx, cancel := context.WithCancel(context.Background())
		addrc, done := make(chan string, 1), make(chan int, 1)
		var errb bytes.Buffer
		go func() {
			done <- run(ctx, &env{args: []string{"serve", "--smtp", "127.0.0.1:0", "--db", db, "--dkim-txt", os.DevNull,
				"--relay", "--domain", "agents.test", "--sign-local", "--dkim-txt-out", table},
				stdin: strings.NewReader(""), stdout: &bytes.Buffer{}, stderr: &errb, ready: func(a string) { addrc <- a }})
		}()
		select {
		case <-addrc:
		case code := <-done:
			t.Fatalf("serve exited %d: %s", code, errb.String())
		}
		cancel()
		<-done
		b, err := os.ReadFile(table)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "\nenvelopd._domainkey.agents.test v=DKIM1; k=ed25519; p=") {
			t.Fatalf("key table:\n%s", b)
		}
		if i == 0 {
			first = string(b)
		} else if string(b) != first {
			t.Errorf("the key changed across a restart:\n%s\n%s", first, b)
		}
	}
}
