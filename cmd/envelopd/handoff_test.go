package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/envelopd/envelopd/store"
)

// TestHandoffCommand: failed --exec hand-offs are listed
// (table and --json), dropped and retried; the next run delivers the
// retried ones and not the dropped ones.
func TestHandoffCommand(t *testing.T) {
	t.Parallel()
	url, pwFile := startMemIMAP(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "envelopd.db")
	runs := filepath.Join(dir, "runs")
	poll := func(exec string) {
		t.Helper()
		var out, errb bytes.Buffer
		code := run(context.Background(), &env{args: []string{"poll", "--once", "--db", db, "--dkim-txt", os.DevNull,
			"--imap", url, "--imap-password-file", pwFile, "--exec", exec},
			stdin: strings.NewReader(""), stdout: &out, stderr: &errb})
		if code != 0 {
			t.Fatalf("poll --once exited %d: %s\n%s", code, out.String(), errb.String())
		}
	}
	poll(`cat >/dev/null; echo "agent down" >&2; exit 3`)

	list := func(args ...string) []store.Handoff {
		t.Helper()
		code, out, stderr := runCmd(t, "", append([]string{"handoff", "list", "--json", "--db", db}, args...)...)
		if code != 0 {
			t.Fatalf("handoff list %v: exit %d %s", args, code, stderr)
		}
		hs := []store.Handoff{}
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if l == "" {
				continue
			}
			var h store.Handoff
			if err := json.Unmarshal([]byte(l), &h); err != nil {
				t.Fatalf("handoff list --json line %q: %v", l, err)
			}
			hs = append(hs, h)
		}
		return hs
	}
	failed := list("--state", "FAILED")
	if len(failed) < 2 {
		t.Fatalf("%d failed hand-offs, want one per accepted mail (at least 2)", len(failed))
	}
	for _, h := range failed {
		// One attempt, or two when the poll's worker retried (backoff 1 s)
		// before the --once drain did.
		if h.State != "pending" || !h.Failed || h.Attempts < 1 || h.Attempts > 2 || h.Target != "exec" || h.NextAttempt == nil ||
			!strings.Contains(h.LastError, "agent down") || h.Message.ID == 0 || h.Event == "" {
			t.Errorf("failed hand-off %+v", h)
		}
	}
	// The JSON keys, snake_case.
	_, out, _ := runCmd(t, "", "handoff", "--json", "--db", db, "--limit", "1")
	for _, k := range []string{`"id":`, `"event_id":"evt_`, `"target":"exec"`, `"state":"pending"`, `"failed":true`, `"attempts":`,
		`"next_attempt_at":"`, `"last_error":"`, `"message":{"id":`, `"message_id":`, `"envelopay_id":`, `"type":`, `"from":`, `"subject":`, `"received_at":`} {
		if !strings.Contains(out, k) {
			t.Errorf("handoff --json lacks %s: %s", k, out)
		}
	}
	// The table.
	code, table, _ := runCmd(t, "", "handoff", "--db", db)
	if code != 0 || !strings.HasPrefix(table, "ID  TARGET  STATE   ATTEMPTS  NEXT") || strings.Count(table, " failed ") != len(failed) {
		t.Errorf("handoff table (exit %d):\n%s", code, table)
	}

	drop, keep := failed[0], failed[1:]
	id := strconv.FormatInt(drop.ID, 10)
	if code, out, stderr := runCmd(t, "", "handoff", "drop", id, "--db", db); code != 0 || out != "handoff "+id+": dropped\n" {
		t.Fatalf("handoff drop: exit %d %q %s", code, out, stderr)
	}
	if d := list("--state", "dropped"); len(d) != 1 || d[0].ID != drop.ID || d[0].NextAttempt != nil {
		t.Errorf("dropped: %+v", d)
	}
	for _, h := range keep {
		id := strconv.FormatInt(h.ID, 10)
		if code, out, stderr := runCmd(t, "", "handoff", "retry", id, "--db", db); code != 0 || out != "handoff "+id+": due now\n" {
			t.Fatalf("handoff retry: exit %d %q %s", code, out, stderr)
		}
	}
	poll(`cat >/dev/null; echo "$ENVELOPD_MESSAGE_ID" >> ` + runs)
	b, _ := os.ReadFile(runs)
	got := strings.Fields(string(b))
	if len(got) != len(keep) {
		t.Errorf("after retry the exec ran for messages %v, want the %d retried ones", got, len(keep))
	}
	for _, m := range got {
		if m == strconv.FormatInt(drop.Message.ID, 10) {
			t.Errorf("the dropped hand-off of message %s was delivered", m)
		}
	}
	if d := list("--state", "done"); len(d) != len(keep) {
		t.Errorf("%d done, want %d", len(d), len(keep))
	}
	for _, tc := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"handoff", "retry", "999", "--db", db}, 1, "hand-off 999: store: not found"},
		{[]string{"handoff", "drop", strconv.FormatInt(keep[0].ID, 10), "--db", db}, 1, "already delivered"},
		{[]string{"handoff", "retry", "x", "--db", db}, 2, `bad id "x"`},
		{[]string{"handoff", "list", "--state", "bogus", "--db", db}, 2, `--state "bogus": want one of pending, failed, done, dropped, all`},
		{[]string{"handoff", "frob", "--db", db}, 2, `unknown subcommand "frob"`},
	} {
		code, _, stderr := runCmd(t, "", tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.err) {
			t.Errorf("%v: exit %d %q, want %d %q", tc.args, code, stderr, tc.code, tc.err)
		}
	}
}
