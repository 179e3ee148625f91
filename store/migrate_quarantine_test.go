package store_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"slices"
	"testing"

	"github.com/envelopd/envelopd/store"
)

// TestMigrateQuarantine: the migration that adds the Quarantine folder
// (number 7) moves received mail that is not accepted out of an existing
// mailbox's INBOX into a new Quarantine folder, under new UIDs and a
// UIDVALIDITY of its own, and leaves accepted mail and Sent alone.
func TestMigrateQuarantine(t *testing.T) {
	const before = 8 // schema version before the Quarantine migration
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	if err := store.MigrateTo(ctx, path, before); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	const bob = "bob@agents.test"
	stmts := []string{
		`INSERT INTO mailboxes (address, created_at, next_validity, synced_id) VALUES ('` + bob + `', 0, 102, 4)`,
		`INSERT INTO folders VALUES ('` + bob + `', 'INBOX', 100, 4), ('` + bob + `', 'Sent', 101, 2)`,
	}
	for i, st := range []string{"accepted", "quarantined", "duplicate", "accepted"} {
		dir := "in"
		if i == 3 {
			dir = "out"
		}
		stmts = append(stmts, `INSERT INTO messages (mailbox, direction, message_id, content_hash, sender,
			recipients, subject, type, envelopay_id, status, thread_id, received_at, errors, warnings,
			auth_results, size) VALUES ('`+bob+`', '`+dir+`', 'm`+string(rune('1'+i))+`@x.test', x'00', 'a@x.test', '[]', 'WHICH | old', 'which',
			'', '`+st+`', 't', 0, '[]', '[]', '', 1)`)
	}
	stmts = append(stmts,
		`INSERT INTO folder_messages VALUES ('`+bob+`', 'INBOX', 1, 1, ''), ('`+bob+`', 'INBOX', 2, 2, '\Seen'), ('`+bob+`', 'INBOX', 3, 3, '')`,
		`INSERT INTO folder_messages VALUES ('`+bob+`', 'Sent', 1, 4, '\Seen')`)
	for _, st := range stmts {
		if _, err := db.Exec(st); err != nil {
			t.Fatalf("%s: %v", st, err)
		}
	}
	db.Close()
	s, err := store.OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fs, err := s.Folders(ctx, bob)
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 3 || fs[1].Name != store.FolderQuarantine || fs[1].UIDValidity != 102 || fs[1].UIDNext != 3 || fs[1].Count != 2 ||
		fs[0].UIDValidity != 100 || fs[0].UIDNext != 4 || fs[0].Count != 1 || fs[2].Count != 1 {
		t.Fatalf("folders after migration %+v", fs)
	}
	q, err := s.FolderMessages(ctx, bob, store.FolderQuarantine, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(q) != 2 || q[0].UID != 1 || q[0].ID != 2 || !slices.Equal(q[0].Flags, []string{`\Seen`}) || q[1].UID != 2 || q[1].ID != 3 {
		t.Errorf("Quarantine %+v", q)
	}
	in, err := s.FolderMessages(ctx, bob, store.FolderInbox, 0)
	if err != nil || len(in) != 1 || in[0].UID != 1 || in[0].ID != 1 {
		t.Errorf("INBOX %+v %v", in, err)
	}
	// The next folder created gets a fresh UIDVALIDITY.
	if err := s.CreateFolder(ctx, bob, "Archive"); err != nil {
		t.Fatal(err)
	}
	fs, _ = s.Folders(ctx, bob)
	for _, f := range fs {
		if f.Name == "Archive" && f.UIDValidity != 103 {
			t.Errorf("Archive UIDVALIDITY %d, want 103", f.UIDValidity)
		}
	}
}
