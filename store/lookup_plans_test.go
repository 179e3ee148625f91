package store

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestLookupsUseIndexes: the lookups of messages by Envelopay id and by
// relay mailbox use their index, although both indexes leave out the
// mail that has neither (migration 34): each says envelopay_id <> ” or
// mailbox <> ”, as SQLite requires to use a partial index. The queries
// are the store's (check.go, ingest.go, thread.go, read.go, mailbox.go),
// on a store holding mail with and without either.
func TestLookupsUseIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := OpenSQLite(ctx, filepath.Join(t.TempDir(), "plans.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var where string
	if err := s.rdb.QueryRowContext(ctx, `SELECT group_concat(name || ':' || coalesce(substr(sql, instr(sql, 'WHERE')), ''), ' ')
		FROM sqlite_master WHERE name IN ('messages_eid', 'messages_mailbox') ORDER BY name`).Scan(&where); err != nil {
		t.Fatal(err)
	}
	if want := "messages_eid:WHERE envelopay_id <> '' messages_mailbox:WHERE mailbox <> ''"; where != want {
		t.Fatalf("indexes %q, want %q", where, want)
	}
	d := sqliteDialect
	for _, c := range []struct {
		name, index, sql string
		args             []any
	}{
		{"check: typed ref", "messages_eid", `SELECT count(*) FROM messages` + d.eidIndex + `
			WHERE envelopay_id = ? AND envelopay_id <> '' AND mailbox = ? AND (? = '' OR type = ?)`, []any{"o1", "", "offer", "offer"}},
		{"ingest: ACCEPT's OFFER", "messages_eid", `SELECT id, sender, status, want_amount, want_token, want_chain
			FROM messages` + d.eidIndex + `
			WHERE envelopay_id = ? AND envelopay_id <> '' AND mailbox = ? AND type = 'offer' AND want_amount IS NOT NULL`, []any{"o1", ""}},
		{"thread: typed refs", "messages_eid", `SELECT envelopay_id, id, thread_id, sender, status FROM messages` + d.eidIndex + `
			WHERE envelopay_id IN (?, ?) AND envelopay_id <> '' AND mailbox = ?`, []any{"o1", "i1", ""}},
		{"read: thread by ref", "messages_eid", `SELECT thread_id FROM messages WHERE envelopay_id = ? AND envelopay_id <> '' ORDER BY status = 'accepted' DESC, id LIMIT 1`, []any{"o1"}},
		{"mailbox: message count", "messages_mailbox", `SELECT b.address, b.password != '', b.created_at,
			(SELECT count(*) FROM messages m WHERE m.mailbox = b.address AND m.mailbox <> '')
			FROM mailboxes b ORDER BY b.address`, nil},
		{"mailbox: pending", "messages_mailbox", `SELECT count(*) FROM messages m, mailboxes b
			WHERE b.address = ? AND m.mailbox = b.address AND m.mailbox <> '' AND m.id > b.synced_id`, []any{"box@x.test"}},
		{"mailbox: filing", "messages_mailbox", `SELECT id, direction, status FROM messages m WHERE mailbox = ? AND mailbox <> '' AND id > ? ORDER BY id`, []any{"box@x.test", 0}},
	} {
		rows, err := s.rdb.QueryContext(ctx, "EXPLAIN QUERY PLAN "+c.sql, c.args...)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		used := false
		for _, p := range plan {
			if strings.HasPrefix(p, "SCAN m ") || p == "SCAN m" || p == "SCAN messages" || strings.HasPrefix(p, "SCAN messages ") {
				t.Errorf("%s: scans messages: %q", c.name, plan)
			}
			if strings.Contains(p, "INDEX "+c.index+" ") {
				used = true
			}
		}
		if !used {
			t.Errorf("%s: plan %q does not use %s", c.name, plan, c.index)
		}
	}
}
