package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/envelopd/envelopd/internal/pgtest"
	"github.com/envelopd/envelopd/store"
)

// TestPostgresMigrateSearchIndex: Postgres migration 32 (the search index
// an expression index over messages instead of the message_fts table; the
// event log's index by time keyed by the hour) over messages and events
// written at version 31: every search finds exactly the messages it found
// before (words of the subject, of the note column, of an old result's
// JSON note, prefixes, folded case and diacritics, several words), the
// event log reads back the same events, and the metrics' counts are
// exact at the edges of an hour, of the span and of its periods.
func TestPostgresMigrateSearchIndex(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Schema(t)
	db, err := store.PGMigrateTo(ctx, dsn, 31)
	if err != nil {
		t.Fatal(err)
	}
	const hour = int64(time.Hour)
	h := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC).UnixNano()
	old := []struct {
		subject string
		note    any // the note column (nil: NULL)
		result  any // the stored result (nil: NULL)
		at      int64
	}{
		{"Order one", nil, nil, h - 1},
		{"Crème brûlée", "about dessert", nil, h},
		{"Invoice", nil, []byte(`{"type":null,"note":"Überweisung pending"}`), h + 1},
		{"Re: order one", "dessert order", nil, h + hour - 1},
		{"nothing", nil, []byte(`{"type":null,"detail":"json"}`), h + hour},
		{"late ORDER", nil, nil, h + 2*hour + 5},
	}
	ids := make([]int64, len(old))
	for i, o := range old {
		ids[i] = int64(i+1) << 10
		if _, err := db.ExecContext(ctx, `INSERT INTO messages (id, mailbox, direction, message_id, content_hash, sender, recipients,
			subject, type, envelopay_id, status, thread_id, received_at, errors, warnings, auth_results, size, note, result)
			VALUES ($1, '', 'in', $2, '\x00', 's@x.test', '["in@x.test"]', $3, '', '', 'accepted', $4, $5, '[]', '[]', '', 1, $6, $7)`,
			ids[i], fmt.Sprintf("m%d@x.test", i), o.subject, fmt.Sprintf("t%d", i), o.at, o.note, o.result); err != nil {
			db.Close()
			t.Fatal(err)
		}
	}
	// Events no message carries, at the edges of the hours too.
	for i, at := range []int64{h + hour, h + 2*hour - 1, h + 3*hour} {
		if _, err := db.ExecContext(ctx, `INSERT INTO api_events (id, type, inbox, message_id, recipients, detail, created_at)
			VALUES ($1, 'message.bounced', 'in@x.test', $2, '["r@y.test"]', 'no such user', $3)`, int64(1+i), ids[0], at); err != nil {
			db.Close()
			t.Fatal(err)
		}
	}
	type row struct {
		id, mid, at           int64
		typ, inbox, rcpt, det string
	}
	var before []row
	rows, err := db.QueryContext(ctx, `SELECT id, type, inbox, message_id, recipients, detail, created_at FROM api_events ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.id, &r.typ, &r.inbox, &r.mid, &r.rcpt, &r.det, &r.at); err != nil {
			t.Fatal(err)
		}
		before = append(before, r)
	}
	if err := rows.Err(); err != nil || len(before) != len(old)+3 {
		t.Fatalf("events at version 31: %d %v, want %d", len(before), err, len(old)+3)
	}
	db.Close()

	s, err := store.OpenPostgres(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v, err := s.SchemaVersionPostgres(ctx); err != nil || v != store.SchemaVersion {
		t.Fatalf("schema version %d %v, want %d", v, err, store.SchemaVersion)
	}
	waitIndexed(t, s, len(old), "in@x.test")
	for _, tc := range []struct {
		search string
		want   []int // indexes into old, newest first
	}{
		{"order", []int{5, 3, 0}},
		{"ORD one", []int{3, 0}},
		{"creme", []int{1}},
		{"brulee", []int{1}},
		{"dessert", []int{3, 1}},
		{"uberweisung", []int{2}},
		{"pending invoice", []int{2}},
		{"nothing", []int{4}},
		{"json", nil},
		{"order dessert", []int{3}},
		{"orderz", nil},
	} {
		ms, err := s.InboxMessages(ctx, store.InboxQuery{Inbox: "in@x.test", Search: tc.search})
		if err != nil {
			t.Fatal(err)
		}
		var got, want []int64
		for _, m := range ms {
			got = append(got, m.ID)
		}
		for _, i := range tc.want {
			want = append(want, ids[i])
		}
		if !slices.Equal(got, want) {
			t.Errorf("search %q after the migration: %v, want %v", tc.search, got, want)
		}
	}
	// The migration gathered the statistics of the index's expression
	// (no ANALYZE here): which words are common is known at once.
	old31 := store.SetCommonShare(3000)
	defer store.SetCommonShare(old31)
	for text, want := range map[string][]string{"order uberweisung": {"uberweisung"}, "ORDER one": nil} {
		drive, err := store.SearchDrive(ctx, s, text)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(drive, want) {
			t.Errorf("search %q after the migration asks the index for %q, want %q", text, drive, want)
		}
	}
	evs, err := s.Events(ctx, store.EventFilter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != len(before) {
		t.Fatalf("events after the migration: %d, want %d", len(evs), len(before))
	}
	for i, e := range evs {
		b := before[i]
		rcpt, _ := json.Marshal(e.Recipients)
		if e.Recipients == nil {
			rcpt = []byte("[]")
		}
		if e.ID != b.id || e.Type != b.typ || e.Inbox != b.inbox || e.MessageID != b.mid || string(rcpt) != b.rcpt ||
			e.Detail != b.det || e.CreatedAt.UnixNano() != b.at {
			t.Errorf("event %d after the migration: %+v, want %+v", i, e, b)
		}
	}
	// Counts of spans starting and ending on and off the hours, in
	// periods shorter and longer than an hour: exactly the events whose
	// created_at is in [start, end), in their period.
	for _, sp := range []struct{ start, end, period int64 }{
		{h, h + hour, hour},
		{h - 1, h + hour, int64(time.Minute)},
		{h + 1, h + hour - 1, int64(time.Second)},
		{h + 1, h + hour, hour},
		{h - hour, h + 4*hour, hour},
		{h + hour - 1, h + 2*hour, hour / 9999},
		{h, h + 3*hour + 1, 2 * hour},
		{h + 2*hour + 6, h + 3*hour, hour},
	} {
		want := map[string]map[int64]int64{}
		for _, b := range before {
			if b.at >= sp.start && b.at < sp.end {
				typ := b.typ
				if want[typ] == nil {
					want[typ] = map[int64]int64{}
				}
				want[typ][(b.at-sp.start)/sp.period]++
			}
		}
		got, err := s.EventCounts(ctx, nil, nil, time.Unix(0, sp.start), time.Unix(0, sp.end), time.Duration(sp.period))
		if err != nil {
			t.Fatal(err)
		}
		gotN := map[string]map[int64]int64{}
		for typ, bs := range got {
			gotN[typ] = map[int64]int64{}
			for _, b := range bs {
				gotN[typ][(b.Start.UnixNano()-sp.start)/sp.period] = b.Count
			}
		}
		if fmt.Sprint(gotN) != fmt.Sprint(want) {
			t.Errorf("counts of [%d, %d) in periods of %d: %v, want %v", sp.start-h, sp.end-h, sp.period, gotN, want)
		}
	}
}
