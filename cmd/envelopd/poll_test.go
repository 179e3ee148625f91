package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"
	"github.com/emersion/go-imap/v2/imapserver/imapmemserver"

	"github.com/envelopd/envelopd/store"
)

// startMemIMAP serves go-imap/v2's in-memory server on 127.0.0.1:0 with
// testdata/imap/*.eml in INBOX and returns the poll URL and a password
// file.
func startMemIMAP(t *testing.T) (url, pwFile string) {
	t.Helper()
	const user, pass = "agent@lab.test", "secret"
	mem := imapmemserver.New()
	u := imapmemserver.NewUser(user, pass)
	if err := u.Create("INBOX", nil); err != nil {
		t.Fatal(err)
	}
	mem.AddUser(u)
	files, _ := filepath.Glob("../../testdata/imap/*.eml")
	if len(files) == 0 {
		t.Fatal("no testdata/imap/*.eml")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b = bytes.ReplaceAll(b, []byte("\n"), []byte("\r\n"))
		if _, err := u.Append("INBOX", memLiteral{bytes.NewReader(b)}, &imap.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	srv := imapserver.New(&imapserver.Options{
		NewSession: func(*imapserver.Conn) (imapserver.Session, *imapserver.GreetingData, error) {
			return mem.NewSession(), nil, nil
		},
		InsecureAuth: true,
		Caps:         imap.CapSet{imap.CapIMAP4rev1: {}, imap.CapUIDPlus: {}, imap.CapMove: {}},
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	pwFile = filepath.Join(t.TempDir(), "imap.pw")
	if err := os.WriteFile(pwFile, []byte(pass+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return "imap://" + strings.Replace(user, "@", "%40", 1) + "@" + ln.Addr().String() + "/INBOX", pwFile
}

type memLiteral struct{ *bytes.Reader }

func (l memLiteral) Size() int64 { return l.Reader.Size() }

// TestPollOnceExecHandsOff: `poll --once --exec` hands every stored
// accepted mail to the exec before exiting (the exec used to be killed, or
// never run, when poll stopped its workers). A successful exec runs once
// per accepted mail and a second --once runs it no more; a failing exec is
// tried once per mail and stays pending, so the next run tries again (at
// least once).
func TestPollOnceExecHandsOff(t *testing.T) {
	for _, tc := range []struct {
		name      string
		exit      string
		secondRun int // exec runs per accepted mail in the second --once
	}{
		{"succeeds", "exit 0", 0},
		{"fails", "exit 3", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, pwFile := startMemIMAP(t)
			dir := t.TempDir()
			db := filepath.Join(dir, "envelopd.db")
			runs := filepath.Join(dir, "runs")
			// Slow enough that a killed exec would not write its line.
			cmd := `cat >/dev/null; sleep 0.2; echo "$ENVELOPD_EVENT_ID" >> ` + runs + `; ` + tc.exit
			poll := func() pollSummary {
				t.Helper()
				var out, errb bytes.Buffer
				code := run(context.Background(), &env{args: []string{"poll", "--once", "--db", db, "--dkim-txt", os.DevNull,
					"--imap", url, "--imap-password-file", pwFile, "--exec", cmd},
					stdin: strings.NewReader(""), stdout: &out, stderr: &errb})
				if code != 0 {
					t.Fatalf("poll --once exited %d: %s\n%s", code, out.String(), errb.String())
				}
				t.Logf("poll --once: %s%s", out.String(), errb.String())
				var sum pollSummary
				if err := json.Unmarshal(out.Bytes(), &sum); err != nil {
					t.Fatalf("summary %q: %v", out.String(), err)
				}
				return sum
			}
			execRuns := func() map[string]int {
				b, _ := os.ReadFile(runs)
				m := map[string]int{}
				for _, l := range strings.Fields(string(b)) {
					m[l]++
				}
				return m
			}

			sum := poll()
			accepted := acceptedCount(t, db)
			if sum.Stored == 0 || accepted == 0 {
				t.Fatalf("first run stored %d, %d accepted: the corpus should hold accepted mail", sum.Stored, accepted)
			}
			first := execRuns()
			if len(first) != accepted {
				t.Errorf("first run: exec ran for %d deliveries, want the %d accepted mails", len(first), accepted)
			}
			for id, n := range first {
				if n != 1 {
					t.Errorf("first run: %s handed off %d times, want 1", id, n)
				}
			}

			time.Sleep(1100 * time.Millisecond) // past the first retry backoff
			if sum := poll(); sum.Stored != 0 {
				t.Errorf("second run stored %d, want 0", sum.Stored)
			}
			second := execRuns()
			for id, n := range second {
				if want := 1 + tc.secondRun; n != want {
					t.Errorf("after the second run: %s handed off %d times, want %d", id, n, want)
				}
			}
			if len(second) != accepted {
				t.Errorf("after the second run: %d deliveries handed off, want %d", len(second), accepted)
			}
		})
	}
}

func acceptedCount(t *testing.T, db string) int {
	t.Helper()
	st, err := store.OpenSQLite(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ms, err := st.Messages(context.Background(), store.Filter{Status: store.StatusAccepted})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range ms {
		if m.Direction == store.DirIn {
			n++
		}
	}
	return n
}
