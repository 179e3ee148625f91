package store_test

import (
	"context"
	"database/sql"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/envelopd/envelopd/internal/pgtest"
	"github.com/envelopd/envelopd/store"
)

// usageOldIndex is an inbox index of schema 27: three messages of two
// threads in inbox a, one of them also in b, indexed (api_sync at 3).
// h0 is 2026-03-01T10:00Z in Unix ns.
const usageH0 = int64(1772359200) * 1e9

func usageOldIndex() []string {
	msg := func(id int, rcpts, thread string, at int64, size int) string {
		return `INSERT INTO messages (id, mailbox, direction, message_id, content_hash, sender, recipients, subject, type, envelopay_id,
			status, thread_id, received_at, errors, warnings, auth_results, size) VALUES (` + itoa(int64(id)) + `, '', 'in', 'm` + itoa(int64(id)) + `@x.test', '\x00',
			's@x.test', '` + rcpts + `', 's', '', '', 'accepted', '` + thread + `', ` + itoa(at) + `, '[]', '[]', '', ` + itoa(int64(size)) + `)`
	}
	return []string{
		msg(1, `["a@u.test"]`, "t1", usageH0+int64(10*time.Minute), 100),
		msg(2, `["a@u.test","b@u.test"]`, "t2", usageH0+int64(70*time.Minute), 50),
		msg(3, `["a@u.test"]`, "t1", usageH0+int64(3*time.Hour), 30),
		`INSERT INTO api_inboxes (address, created_at, updated_at) VALUES ('a@u.test', 1, 1), ('b@u.test', 1, 1)`,
		`INSERT INTO inbox_messages (inbox, message_id, thread_id) VALUES ('a@u.test', 1, 't1'), ('a@u.test', 2, 't2'), ('b@u.test', 2, 't2'), ('a@u.test', 3, 't1')`,
		`INSERT INTO inbox_threads (inbox, thread_id, last_id) VALUES ('a@u.test', 't1', 3), ('a@u.test', 't2', 2), ('b@u.test', 't2', 2)`,
		`UPDATE api_sync SET synced_id = 3`,
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// checkUsageBackfill checks the counters migration 30 filled from the
// index as it stood.
func checkUsageBackfill(t *testing.T, s store.DB) {
	t.Helper()
	ctx := context.Background()
	h0 := time.Unix(0, usageH0).UTC()
	_, a, err := s.Usage(ctx, []string{"a@u.test"}, h0.Add(-time.Hour), h0.Add(4*time.Hour), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for i := range a {
		a[i].Inboxes = 0
	}
	want := []store.Usage{{}, {Messages: 1, Bytes: 100, Threads: 1}, {Messages: 2, Bytes: 150, Threads: 2}, {Messages: 2, Bytes: 150, Threads: 2}, {Messages: 3, Bytes: 180, Threads: 2}}
	if !slices.Equal(a, want) {
		t.Errorf("inbox a: %+v, want %+v", a, want)
	}
	_, org, err := s.Usage(ctx, nil, h0, h0.Add(5*time.Hour), 5*time.Hour)
	if err != nil || org[0] != (store.Usage{Messages: 4, Bytes: 230, Threads: 3, Inboxes: 2}) {
		t.Errorf("organisation: %+v %v", org, err)
	}
}

// TestMigrateUsage: migration 30 fills the usage counters from the inbox
// index (a message per inbox that shows it, in its hour; a thread in the
// hour of its first message in the inbox; the organisation the sum).
func TestMigrateUsage(t *testing.T) {
	ctx := context.Background()
	path := oldDatabase(t, 27, usageOldIndex()...)
	s, err := store.OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkUsageBackfill(t, s)
}

// TestPostgresMigrateUsage is TestMigrateUsage on Postgres.
func TestPostgresMigrateUsage(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Schema(t)
	db, err := store.PGMigrateTo(ctx, dsn, 27)
	if err != nil {
		t.Fatal(err)
	}
	func(db *sql.DB) {
		defer db.Close()
		for _, q := range usageOldIndex() {
			if _, err := db.ExecContext(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
	}(db)
	s, err := store.OpenPostgres(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkUsageBackfill(t, s)
}
