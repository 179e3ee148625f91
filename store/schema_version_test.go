package store

import "testing"

// TestPostgresSchemaFollowsSQLite: every SQLite migration has its Postgres
// equivalent (pgMigrations ends at SchemaVersion). A new migration is
// appended to both lists, with the same version number.
func TestPostgresSchemaFollowsSQLite(t *testing.T) {
	if len(migrations) != SchemaVersion {
		t.Fatalf("%d SQLite migrations, SchemaVersion %d", len(migrations), SchemaVersion)
	}
	last := 0
	for _, m := range pgMigrations {
		if m.version <= last {
			t.Fatalf("Postgres migration %d after %d: versions must increase", m.version, last)
		}
		last = m.version
	}
	if last != SchemaVersion {
		t.Errorf("the Postgres schema ends at version %d, SQLite's at %d: append the Postgres equivalent of each new migration to pgMigrations (postgres_schema.go)", last, SchemaVersion)
	}
}
