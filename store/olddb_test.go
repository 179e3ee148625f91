package store_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/envelopd/envelopd/store"
)

// oldDatabase makes a database at schema version v holding what stmts
// write (raw SQL, as a program of that version would have stored it) and
// returns its path, for the tests of a migration.
func oldDatabase(t *testing.T, v int, stmts ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "old.db")
	if err := store.MigrateTo(context.Background(), path, v); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	return path
}
