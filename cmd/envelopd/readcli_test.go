package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/envelopd/envelopd/message"
	"github.com/envelopd/envelopd/store"
)

// readFixture is a store with a received OFFER (row 1) and a sent,
// queued ACCEPT answering it (row 2).
func readFixture(t *testing.T) (db string, offerMID string) {
	t.Helper()
	db = filepath.Join(t.TempDir(), "r.db")
	storeOffer(t, db)
	if code, _, errs := runCmd(t, "", "reply", "1", "--type", "ACCEPT", "--json", cliData+"accept.json", "--db", db); code != 0 {
		t.Fatalf("reply: %d %s", code, errs)
	}
	st, err := store.OpenSQLite(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	m, err := st.Message(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	return db, m.MessageID
}

// TestReadCommandsNeverCreate: a command that only reads (or changes what
// is there) never creates a database: a missing file is an error naming
// the path, exit 2, and no file appears.
func TestReadCommandsNeverCreate(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "typo.db")
	for _, args := range [][]string{
		{"inbox"}, {"inbox", "--json"}, {"thread", "1"}, {"watch", "--once"}, {"queue"}, {"queue", "retry", "1"},
		{"queue", "drop", "1"}, {"keys", "list"}, {"mailbox", "list"},
		{"reply", "1", "--type", "FULFILL"}, {"compose", "--from", "a@a.test", "--to", "b@b.test", "--type", "WHICH"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, out, errs := runCmd(t, "", append(args, "--db", missing)...)
			if code != 2 || !strings.Contains(errs, missing) || !strings.Contains(errs, "does not exist") || out != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want 2 naming %s", code, out, errs, missing)
			}
			if _, err := os.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s was created (%v)", missing, err)
			}
		})
	}
}

// TestFlagValuesChecked: a filter value outside its set is a usage error
// listing the set; the natural ones are case-insensitive.
func TestFlagValuesChecked(t *testing.T) {
	db, _ := readFixture(t)
	for _, tc := range []struct {
		args   []string
		code   int
		stderr string
		lines  int // JSON lines printed, when code is 0
	}{
		{[]string{"inbox", "--status", "bogus"}, 2, "want one of accepted, quarantined, duplicate", 0},
		{[]string{"inbox", "--status", "Accepted"}, 0, "", 2},
		{[]string{"inbox", "--type", "refund"}, 2, "want one of which, methods, pay", 0},
		{[]string{"inbox", "--type", "Offer"}, 0, "", 1},
		{[]string{"inbox", "--direction", "sideways"}, 2, "want one of in, out", 0},
		{[]string{"inbox", "--direction", "OUT"}, 0, "", 1},
		{[]string{"inbox", "--limit", "-1"}, 2, "--limit", 0},
		{[]string{"watch", "--once", "--all", "--status", "bogus"}, 2, "want one of accepted", 0},
		{[]string{"queue", "--state", "bogus"}, 2, "want one of pending, sent, failed, dropped", 0},
		{[]string{"queue", "--state", "Pending"}, 0, "", 1},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			args := append(tc.args, "--db", db)
			if args[0] != "watch" {
				args = append(args, "--json")
			}
			code, out, errs := runCmd(t, "", args...)
			if code != tc.code || !strings.Contains(errs, tc.stderr) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, errs, tc.code, tc.stderr)
			}
			if n := strings.Count(out, "\n"); code == 0 && n != tc.lines {
				t.Errorf("%d lines, want %d: %s", n, tc.lines, out)
			}
		})
	}
}

// TestMessageRefForms: thread and reply accept the same three forms of a
// message (row id, Message-ID, Envelopay id; thread also a thread id), and
// flags after positional arguments work everywhere.
func TestMessageRefForms(t *testing.T) {
	db, mid := readFixture(t)
	var want string
	for _, ref := range []string{"1", mid, "<" + mid + ">", "ofr_2k3m", "2", "acc_4n5q"} {
		code, out, errs := runCmd(t, "", "thread", ref, "--db", db)
		var th struct {
			ThreadID string            `json:"thread_id"`
			Messages []json.RawMessage `json:"messages"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &th) != nil || len(th.Messages) != 2 {
			t.Fatalf("thread %s: exit %d, %q %q", ref, code, out, errs)
		}
		if want == "" {
			want = th.ThreadID
		}
		if th.ThreadID != want {
			t.Errorf("thread %s: %s, want %s", ref, th.ThreadID, want)
		}
		if code, _, errs := runCmd(t, "", "reply", ref, "--print", "--type", "OOPS", "--note", "check", "--db", db); code != 0 {
			t.Errorf("reply %s --print: exit %d %s", ref, code, errs)
		}
	}
	if code, _, _ := runCmd(t, "", "thread", want, "--db", db); code != 0 {
		t.Errorf("thread by thread id: exit %d", code)
	}
	if code, _, _ := runCmd(t, "", "thread", "999", "--db", db); code != 1 {
		t.Errorf("thread 999: exit %d, want 1", code)
	}
	// Flags after positional arguments, and an unexpected argument is
	// an error, not an empty answer.
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"keys", "list", "aicp", "--json", "--db", db}, 0},
		{[]string{"queue", "retry", "1", "--db", db}, 0},
		{[]string{"inbox", "--db", db, "stray"}, 2},
		{[]string{"watch", "--once", "--db", db, "stray"}, 2},
	} {
		if code, _, errs := runCmd(t, "", tc.args...); code != tc.code {
			t.Errorf("%v: exit %d (%s), want %d", tc.args, code, errs, tc.code)
		}
	}
}

// lineWriter is a concurrency-safe buffer that signals each write.
type lineWriter struct {
	mu    sync.Mutex
	b     bytes.Buffer
	wrote chan struct{}
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	select {
	case w.wrote <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (w *lineWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestWatchFilters: watch filters by direction, type, status and mailbox
// like inbox, both over what is stored and while following new messages.
func TestWatchFilters(t *testing.T) {
	db, _ := readFixture(t)
	for _, tc := range []struct {
		filter []string
		types  string
	}{
		{[]string{"--direction", "out"}, "accept"},
		{[]string{"--direction", "in"}, "offer"},
		{[]string{"--type", "ACCEPT"}, "accept"},
		{[]string{"--status", "accepted"}, "offer,accept"},
		{[]string{"--status", "duplicate"}, ""},
		{[]string{"--mailbox", "nobody@x.test"}, ""},
	} {
		code, out, errs := runCmd(t, "", append([]string{"watch", "--once", "--all", "--db", db}, tc.filter...)...)
		if code != 0 {
			t.Fatalf("watch %v: %d %s", tc.filter, code, errs)
		}
		var types []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			var v struct {
				Type string `json:"type"`
			}
			if l != "" && json.Unmarshal([]byte(l), &v) == nil {
				types = append(types, v.Type)
			}
		}
		if got := strings.Join(types, ","); got != tc.types {
			t.Errorf("watch %v: %s, want %s", tc.filter, got, tc.types)
		}
	}

	// Following: a new message that does not match is skipped, the next
	// one that does is printed.
	// --since the last stored id: whenever the goroutine starts, it
	// follows from there (without it, a watch that started after the
	// ingests below would begin past them and print nothing).
	_, all, _ := runCmd(t, "", "watch", "--once", "--all", "--db", db)
	lines := strings.Split(strings.TrimSpace(all), "\n")
	var last struct {
		ID int64 `json:"id"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || last.ID == 0 {
		t.Fatalf("last stored id: %q %v", lines[len(lines)-1], err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &lineWriter{wrote: make(chan struct{}, 1)}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, &env{args: []string{"watch", "--db", db, "--type", "pay", "--since", fmt.Sprint(last.ID)},
			stdin: strings.NewReader(""), stdout: out, stderr: &bytes.Buffer{}})
	}()
	st, err := store.OpenSQLite(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, f := range []string{"../../testdata/flows/first-contact-unpaid/01-which.eml", "../../testdata/flows/replay/01-pay.eml"} {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		a := message.Analyze(ctx, raw, message.AnalyzeOptions{})
		if _, err := st.Ingest(ctx, message.Incoming(a, raw, store.DirIn)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-out.wrote:
	case <-time.After(10 * time.Second):
		t.Fatal("watch printed nothing")
	}
	cancel()
	<-done
	if s := out.String(); strings.Count(s, "\n") != 1 || !strings.Contains(s, `"type":"pay"`) {
		t.Errorf("watch --type pay printed %q, want the PAY only", s)
	}
}
