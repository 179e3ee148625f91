package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/envelopd/envelopd/internal/pgtest"
	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/store"
)

// TestSearchHostile: the web inbox's search and filter index (migration
// 14) takes whatever a message carries — a parse result that is not JSON
// or not UTF-8, a note with a NUL escape, an error code with one, a
// sender longer than an index entry — without failing the ingest, and
// the filters still answer exactly.
func TestSearchHostile(t *testing.T) {
	t.Parallel()
	testSearchHostile(t, filepath.Join(t.TempDir(), "s.db"))
}

// TestPostgresSearchHostile is TestSearchHostile on Postgres (tsvector
// index, envelopd_note, envelopd_codes).
func TestPostgresSearchHostile(t *testing.T) {
	t.Parallel()
	testSearchHostile(t, pgtest.Schema(t))
}

func testSearchHostile(t *testing.T, db string) {
	ctx := context.Background()
	s, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	long := fmt.Sprintf("%01200d@x.test", 0)
	cases := []struct {
		subject, sender string
		result          json.RawMessage
		errs            protocols.Problems
	}{
		{"one crêpe", "a@x.test", json.RawMessage(`{"note":"sweet \u0000 galette"}`), nil},
		{"two", "a@x.test", json.RawMessage("not json"), protocols.Problems{{Code: "bad\x00code", Message: "x"}}},
		{"three", "a@x.test", json.RawMessage("{\xff\xfe"), nil},
		{"four galette", long, nil, protocols.Problems{{Code: "amount_mismatch", Message: "x"}}},
	}
	for i, c := range cases {
		status := store.StatusAccepted
		if len(c.errs) > 0 {
			status = store.StatusQuarantined
		}
		if _, err := s.Ingest(ctx, &store.Incoming{Direction: store.DirIn, MessageID: fmt.Sprintf("h%d@x.test", i), Sender: c.sender,
			Recipients: []string{"in@x.test"}, Raw: []byte(fmt.Sprintf("m%d", i)), Subject: c.subject, Result: c.result,
			Errors: c.errs, Status: status, ReceivedAt: time.Now()}); err != nil {
			t.Fatalf("ingest %q: %v", c.subject, err)
		}
	}
	waitIndexed(t, s, len(cases), "in@x.test")
	for _, tc := range []struct {
		q    store.InboxQuery
		want []string
	}{
		{store.InboxQuery{Search: "CREPE"}, []string{"one crêpe"}},
		{store.InboxQuery{Search: "galette"}, []string{"four galette", "one crêpe"}},
		{store.InboxQuery{Search: "galet swe"}, []string{"one crêpe"}},
		{store.InboxQuery{Search: "json"}, nil},
		{store.InboxQuery{Search: "!!"}, []string{"four galette", "three", "two", "one crêpe"}},
		{store.InboxQuery{ErrorCode: "amount_mismatch"}, []string{"four galette"}},
		{store.InboxQuery{Sender: long}, []string{"four galette"}},
		{store.InboxQuery{Sender: "a@x.test", Labels: []string{store.StatusQuarantined}}, []string{"two"}},
	} {
		tc.q.Inbox = "in@x.test"
		ms, err := s.InboxMessages(ctx, tc.q)
		if err != nil {
			t.Errorf("%+v: %v", tc.q, err)
			continue
		}
		var got []string
		for _, m := range ms {
			got = append(got, m.Subject)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("search %q error %q sender %.20q labels %v: %q, want %q", tc.q.Search, tc.q.ErrorCode, tc.q.Sender, tc.q.Labels, got, tc.want)
		}
	}
}

// waitIndexed indexes s's messages until the inboxes show n of them
// (Postgres shows a commit to a cursor once older transactions end), or
// 10 s have passed.
func waitIndexed(t *testing.T, s store.DB, n int, inboxes ...string) {
	ctx := context.Background()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := s.SyncInboxes(ctx, 0); err != nil {
			t.Fatal(err)
		}
		got := 0
		for _, b := range inboxes {
			ms, err := s.InboxMessages(ctx, store.InboxQuery{Inbox: b})
			if err != nil {
				t.Fatal(err)
			}
			got += len(ms)
		}
		if got == n || time.Now().After(deadline) {
			return
		}
	}
}
