package store_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/envelopd/envelopd/internal/pgtest"
	"github.com/envelopd/envelopd/store"
)

// TestSearchPaths: a search answers the same pages whichever way the
// store walks it — from the index (SQLite's ordered FTS5 walk, a word's
// prefix expanded to the index's terms), probing the index per thread (a
// common search) or from the set of matches (a rare one) — in both
// orders and across page cursors.
func TestSearchPaths(t *testing.T) {
	testSearchPaths(t, filepath.Join(t.TempDir(), "s.db"))
}

// TestPostgresSearchPaths is TestSearchPaths on Postgres.
func TestPostgresSearchPaths(t *testing.T) {
	testSearchPaths(t, pgtest.Schema(t))
}

func testSearchPaths(t *testing.T, db string) {
	ctx := context.Background()
	s, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Two inboxes (a: threads one, three, five; b: two, four, six),
	// threads of two.
	subjects := []string{
		"Order one", "Re: Order one", "orders two", "Re: orders two", "ordering three", "Re: ordering three",
		"Ordnung four", "Re: Ordnung four", "crêpe five", "Re: crêpe five", "ORD six", "Re: ORD six",
	}
	for i, subj := range subjects {
		mid := fmt.Sprintf("p%d@x.test", i)
		var irt []string
		if i%2 == 1 {
			irt = []string{fmt.Sprintf("p%d@x.test", i-1)}
		}
		rcpt := []string{"a@x.test", "b@x.test"}[(i/2)%2]
		if _, err := s.Ingest(ctx, &store.Incoming{Direction: store.DirIn, MessageID: mid, InReplyTo: irt, References: irt,
			Sender: "s@y.test", Recipients: []string{rcpt}, Raw: []byte(mid), Subject: subj,
			Status: store.StatusAccepted, ReceivedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	waitIndexed(t, s, len(subjects), "a@x.test", "b@x.test")
	// pages walks every page of size 1 and returns the subjects.
	pages := func(q store.InboxQuery) []string {
		var got []string
		q.Limit = 1
		for range subjects {
			ms, err := s.InboxMessages(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if len(ms) == 0 {
				return got
			}
			got = append(got, ms[0].Subject)
			q.CursorID = ms[0].ID
		}
		return got
	}
	threads := func(q store.InboxQuery) []string {
		var got []string
		if q.Limit == 0 {
			q.Limit = 1
		}
		for range subjects {
			ts, err := s.InboxThreads(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if len(ts) == 0 {
				return got
			}
			for _, th := range ts {
				got = append(got, fmt.Sprint(th.Inbox, " ", th.LastID))
			}
			q.CursorID, q.CursorInbox = ts[len(ts)-1].LastID, ts[len(ts)-1].Inbox
		}
		return got
	}
	cases := []struct {
		search string
		inbox  string
		want   []string // newest first
	}{
		{"order", "a@x.test", []string{"Re: ordering three", "ordering three", "Re: Order one", "Order one"}},
		{"order", "b@x.test", []string{"Re: orders two", "orders two"}},
		{"ord", "b@x.test", []string{"Re: ORD six", "ORD six", "Re: Ordnung four", "Ordnung four", "Re: orders two", "orders two"}},
		{"ORDN re", "b@x.test", []string{"Re: Ordnung four"}},
		{"crepe", "b@x.test", nil},
		{"crepe", "a@x.test", []string{"Re: crêpe five", "crêpe five"}},
		{"orderz", "a@x.test", nil},
		{"one order", "a@x.test", []string{"Re: Order one", "Order one"}},
		{"re ONE", "a@x.test", []string{"Re: Order one"}},
		{"re one", "b@x.test", nil},
		{"re orderz", "a@x.test", nil},
	}
	for _, tc := range cases {
		q := store.InboxQuery{Inbox: tc.inbox, Search: tc.search}
		if got := pages(q); !slices.Equal(got, tc.want) {
			t.Errorf("search %q in %s: %q, want %q", tc.search, tc.inbox, got, tc.want)
		}
		q.Ascending = true
		want := slices.Clone(tc.want)
		slices.Reverse(want)
		if got := pages(q); !slices.Equal(got, want) {
			t.Errorf("search %q in %s ascending: %q, want %q", tc.search, tc.inbox, got, want)
		}
		// Threads, org-wide and in the inbox: the same whichever way.
		for _, tq := range []store.InboxQuery{{Search: tc.search}, {Search: tc.search, Inbox: tc.inbox}} {
			old := store.SetCommonMatches(1 << 40)
			rare := threads(tq)
			store.SetCommonMatches(1)
			common := threads(tq)
			store.SetCommonMatches(old)
			if !slices.Equal(rare, common) {
				t.Errorf("threads %q in %q: %q from the matches, %q probing", tc.search, tq.Inbox, rare, common)
			}
			if want := (len(tc.want) + 1) / 2; tq.Inbox != "" && len(rare) != want {
				t.Errorf("threads %q in %q: %q, want %d", tc.search, tq.Inbox, rare, want)
			}
		}
	}
	if store.IsPostgresDSN(db) {
		// Postgres asks its index for a search's rarer words only and
		// tests the common ones on the rows found (which words are common
		// is read from the statistics ANALYZE keeps): the same pages,
		// messages and threads, in both orders.
		before := map[string][]string{}
		for _, tc := range cases {
			for _, q := range []store.InboxQuery{{Inbox: tc.inbox, Search: tc.search}, {Inbox: tc.inbox, Search: tc.search, Ascending: true}} {
				before[fmt.Sprint("messages ", q)] = pages(q)
			}
			for _, q := range []store.InboxQuery{{Search: tc.search}, {Search: tc.search, Inbox: tc.inbox}, {Search: tc.search, Ascending: true}} {
				before[fmt.Sprint("threads ", q)] = threads(q)
			}
		}
		analyzeSearchIndex(t, db)
		// Of the 12 messages "re" is in 6, the terms starting with
		// "order" in 6, "ord" in 10, the others in 2 each.
		old := store.SetCommonShare(3000)
		defer store.SetCommonShare(old)
		for text, want := range map[string][]string{
			"ORDN re": {"ORDN"}, "one order": {"one"}, "re ONE": {"ONE"}, "re orderz": {"orderz"},
			"order": nil, "ord re": nil, "crepe five": nil,
		} {
			drive, err := store.SearchDrive(ctx, s, text)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(drive, want) {
				t.Errorf("search %q asks the index for %q, want %q", text, drive, want)
			}
		}
		for _, tc := range cases {
			for _, q := range []store.InboxQuery{{Inbox: tc.inbox, Search: tc.search}, {Inbox: tc.inbox, Search: tc.search, Ascending: true}} {
				if got, want := pages(q), before[fmt.Sprint("messages ", q)]; !slices.Equal(got, want) {
					t.Errorf("messages %+v, common words tested on the rows found: %q, want %q", q, got, want)
				}
			}
			for _, q := range []store.InboxQuery{{Search: tc.search}, {Search: tc.search, Inbox: tc.inbox}, {Search: tc.search, Ascending: true}} {
				if got, want := threads(q), before[fmt.Sprint("threads ", q)]; !slices.Equal(got, want) {
					t.Errorf("threads %+v, common words tested on the rows found: %q, want %q", q, got, want)
				}
			}
		}
	}
	// A late reply (no search word) makes a thread new whose matching
	// messages are far older than the window of threads the common walk
	// reads them from; pages of 1 to 3 threads find the same threads.
	for i := range 6 {
		mid := fmt.Sprintf("late%d@x.test", i)
		irt := []string{fmt.Sprintf("p%d@x.test", 2*i)}
		if _, err := s.Ingest(ctx, &store.Incoming{Direction: store.DirIn, MessageID: mid, InReplyTo: irt, References: irt,
			Sender: "s@y.test", Recipients: []string{[]string{"a@x.test", "b@x.test"}[i%2]}, Raw: []byte(mid), Subject: "late",
			Status: store.StatusAccepted, ReceivedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	waitIndexed(t, s, len(subjects)+6, "a@x.test", "b@x.test")
	for _, tq := range []store.InboxQuery{{Search: "order"}, {Search: "order", Inbox: "a@x.test"}, {Search: "ord", Labels: []string{"received"}},
		{Search: "order", Ascending: true}, {Search: "order", Inbox: "b@x.test", Ascending: true}} {
		old := store.SetCommonMatches(1 << 40)
		rare := threads(tq)
		store.SetCommonMatches(1)
		for limit := 1; limit <= 3; limit++ {
			tq.Limit = limit
			if common := threads(tq); !slices.Equal(rare, common) {
				t.Errorf("threads %q in %q after late replies, pages of %d: %q from the matches, %q probing", tq.Search, tq.Inbox, limit, rare, common)
			}
		}
		store.SetCommonMatches(old)
		if len(rare) == 0 {
			t.Errorf("threads %q in %q after late replies: none", tq.Search, tq.Inbox)
		}
	}
}

// analyzeSearchIndex makes Postgres gather the statistics of the search
// index (the expression of messages_fts, gathered with its table's) at
// once, which autovacuum would do in its time.
func analyzeSearchIndex(t *testing.T, dsn string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "ANALYZE messages"); err != nil {
		t.Fatal(err)
	}
}
