package main

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/envelopd/envelopd/message"
	"github.com/envelopd/envelopd/store"
)

// storeOffer ingests an OFFER from seller@s.test to buyer@b.test (want
// 30 USDC on base) into db, as serve would, and returns its row id.
func storeOffer(t *testing.T, db string) int64 {
	t.Helper()
	ctx := context.Background()
	code, raw, errs := runCmd(t, "", "compose", "--from", "seller@s.test", "--to", "buyer@b.test", "--type", "OFFER",
		"--note", "10 USDC for 30", "--json", cliData+"offer.json")
	if code != 0 {
		t.Fatalf("compose OFFER: %d %s", code, errs)
	}
	st, err := store.OpenSQLite(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	a := message.Analyze(ctx, []byte(raw), message.AnalyzeOptions{})
	oc, err := st.Ingest(ctx, message.Incoming(a, []byte(raw), store.DirIn))
	if err != nil || oc.Status != store.StatusAccepted {
		t.Fatalf("ingest OFFER: %+v %v", oc, err)
	}
	return oc.ID
}

func queueLen(t *testing.T, db string) int {
	t.Helper()
	st, err := store.OpenSQLite(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	q, err := st.Queue(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	return len(q)
}

// TestOutboundChecked: send, reply and compose check an outgoing message
// against the thread's stored state (store.Check) before queueing it: an
// ACCEPT short of its OFFER's want, or a typed ref naming nothing stored,
// prints the typed errors and exits 1 with nothing queued; --force sends
// anyway and says so.
func TestOutboundChecked(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "b.db")
	offer := strconv.FormatInt(storeOffer(t, db), 10)

	for _, tc := range []struct {
		name    string
		args    []string
		code    int
		stderr  []string
		queued  int // queue entries after the command
		printed bool
	}{
		{"reply short ACCEPT", []string{"reply", offer, "--type", "ACCEPT", "--json", cliData + "accept-short.json", "--db", db},
			1, []string{"amount_mismatch (amount)", "not queued; fix the message, or give --force to send it anyway"}, 0, false},
		{"reply --print short ACCEPT", []string{"reply", offer, "--print", "--type", "ACCEPT", "--json", cliData + "accept-short.json", "--db", db},
			1, []string{"amount_mismatch (amount)", "not printed; fix the message, or give --force to print it anyway"}, 0, false},
		{"send unknown offer_ref", []string{"send", "--db", db, "--from", "buyer@b.test", "--to", "seller@s.test", "--type", "ACCEPT",
			"--json", "-", "--note", "x"}, 1, []string{"unknown_ref (offer_ref)", `"ofr_nope"`}, 0, false},
		{"compose --db short ACCEPT", []string{"compose", "--db", db, "--from", "buyer@b.test", "--to", "seller@s.test", "--type", "ACCEPT",
			"--json", "-"}, 1, []string{"amount_mismatch (amount)", "not printed; fix the message, or give --force to print it anyway"}, 0, false},
		{"compose without --db", []string{"compose", "--from", "buyer@b.test", "--to", "seller@s.test", "--type", "ACCEPT",
			"--json", "-"}, 0, nil, 0, true},
		{"reply matching ACCEPT", []string{"reply", offer, "--type", "ACCEPT", "--json", cliData + "accept.json", "--db", db},
			0, nil, 1, false},
		{"reply --force short ACCEPT", []string{"reply", offer, "--force", "--type", "ACCEPT", "--json", cliData + "accept-short.json", "--db", db},
			0, []string{"amount_mismatch (amount)", "--force: sending anyway despite 1 problem(s)"}, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdin := ""
			if strings.Contains(tc.name, "unknown") {
				stdin = `{"v":"0.2.0","type":"accept","id":"acc_x1","offer_ref":"ofr_nope","amount":"1","token":"USDC","chain":"base","proof":{"tx":"0x1"}}`
			} else if strings.Contains(tc.name, "compose") {
				stdin = `{"v":"0.2.0","type":"accept","id":"acc_x2","offer_ref":"ofr_2k3m","amount":"1","token":"USDC","chain":"base","proof":{"tx":"0x2"}}`
			}
			code, out, errs := runCmd(t, stdin, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stdout %q stderr %q", code, tc.code, out, errs)
			}
			for _, s := range tc.stderr {
				if !strings.Contains(errs, s) {
					t.Errorf("stderr %q lacks %q", errs, s)
				}
			}
			if tc.code != 0 && out != "" {
				t.Errorf("refused, yet printed %q", out)
			}
			if tc.printed != strings.Contains(out, "ACCEPT") {
				t.Errorf("printed %v, stdout %q", tc.printed, out)
			}
			if n := queueLen(t, db); n != tc.queued {
				t.Errorf("%d queue entries, want %d", n, tc.queued)
			}
		})
	}
}
