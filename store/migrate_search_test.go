package store_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/envelopd/envelopd/store"
)

// TestMigrateSearchIndexOutOfIngest: migration 15 moves the web inbox's
// search and filter index out of the ingest transaction. A message stored
// before it (indexed by the old triggers) and one stored after (indexed
// by SyncInboxes) are each found once, by text and by tag.
func TestMigrateSearchIndexOutOfIngest(t *testing.T) {
	ctx := context.Background()
	path := oldDatabase(t, 14, `INSERT INTO messages (mailbox, direction, message_id, content_hash, sender,
		recipients, subject, type, envelopay_id, status, thread_id, received_at, errors, warnings,
		auth_results, size, result) VALUES ('', 'in', 'old@x.test', x'00', 'a@x.test', '["b@y.test"]', 'PAY | coffee', 'pay',
		'pay_1', 'accepted', 't_old', 0, '[]', '[]', '', 1, '{"note":"coffee"}')`)
	s, err := store.OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ingest(ctx, &store.Incoming{MessageID: "new@x.test", Direction: store.DirIn, Sender: "a@x.test",
		Recipients: []string{"b@y.test"}, Subject: "PAY | coffee again", Type: "pay", Status: store.StatusAccepted,
		Result: []byte(`{"note":"coffee again"}`), Raw: []byte("y")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SyncInboxes(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SyncInboxes(ctx, 0); err != nil { // nothing new: indexes nothing twice
		t.Fatal(err)
	}
	s.Close()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, c := range []struct {
		query string
		want  int
	}{
		{`SELECT count(*) FROM message_fts WHERE message_fts MATCH 'coffee'`, 2},
		{`SELECT count(*) FROM message_fts WHERE message_fts MATCH 'again'`, 1},
		{`SELECT count(*) FROM message_tags WHERE tag = 'type:pay'`, 2},
		{`SELECT count(*) FROM message_tags WHERE tag = 'status:accepted'`, 2},
	} {
		var n int
		if err := db.QueryRow(c.query).Scan(&n); err != nil || n != c.want {
			t.Errorf("%s: %d %v, want %d", c.query, n, err, c.want)
		}
	}
}
