package main

import (
	"bufio"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/envelopd/envelopd/store"
)

// TestTablesEscapeControls: terminal escape sequences in a
// stored subject, sender, recipient or SMTP error reached the terminal
// through the inbox and queue tables. The tables now show them escaped;
// the --json forms stay exact.
func TestTablesEscapeControls(t *testing.T) {
	t.Parallel()
	const (
		evilSubject = "PAY | \x1b]0;pwned\x07\x1b[2Jcleared"
		evilSender  = "mallory\x1b[31m@evil.test"
		evilRcpt    = "bob\x1b[8m@evil.test"
		evilError   = "550 \x1b[1mno\u202e"
	)
	result, _ := json.Marshal(map[string]string{"subject": evilSubject})
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "e.db")
	st, err := store.OpenSQLite(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Ingest(ctx, &store.Incoming{Direction: store.DirIn, MessageID: "evil@x.test", Sender: evilSender,
		Subject: evilSubject, Raw: []byte("x"), ReceivedAt: time.Now(), Result: result}); err != nil {
		t.Fatal(err)
	}
	qid, err := st.Enqueue(ctx, &store.Outgoing{From: "a@x.test", Recipients: []string{evilRcpt}, Raw: []byte("y"), Kind: "send"})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.RecordDelivery(ctx, qid, evilRcpt, store.QueuePending, evilError, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	st.Close()

	for _, args := range [][]string{{"inbox", "--db", db}, {"queue", "--db", db}} {
		code, out, stderr := runCmd(t, "", args...)
		if code != 0 {
			t.Fatalf("%v: exit %d %s", args, code, stderr)
		}
		if strings.ContainsAny(out, "\x1b\x07\u202e") {
			t.Errorf("%v: a control character reached the table:\n%q", args, out)
		}
		for _, want := range map[string][]string{
			"inbox": {`\x1b]0;pwned\x07\x1b[2Jcl`, `mallory\x1b[31m@evil.test`},
			"queue": {`bob\x1b[8m@evil.test`, `550 \x1b[1mno\u202e`},
		}[args[0]] {
			if !strings.Contains(out, want) {
				t.Errorf("%v: table lacks %q:\n%s", args, want, out)
			}
		}
	}
	// JSON stays exact.
	_, out, _ := runCmd(t, "", "inbox", "--db", db, "--json")
	var v struct {
		Subject string `json:"subject"`
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	if !sc.Scan() || json.Unmarshal(sc.Bytes(), &v) != nil {
		t.Fatalf("inbox --json: %q", out)
	}
	if v.Subject != evilSubject {
		t.Errorf("inbox --json subject %q, want %q exactly", v.Subject, evilSubject)
	}
	_, out, _ = runCmd(t, "", "queue", "--db", db, "--json")
	var q store.QueueEntry
	if err := json.Unmarshal([]byte(out), &q); err != nil || len(q.Recipients) != 1 || q.Recipients[0].Rcpt != evilRcpt || q.Recipients[0].LastError != evilError {
		t.Errorf("queue --json: %+v %v, want the recipient and error exactly", q, err)
	}
}
