package store

import (
	"context"
	"database/sql"
)

// MigrateTo exposes migrate for the migration test: it brings the database
// at dsn to version v only.
func MigrateTo(ctx context.Context, path string, v int) error {
	db, err := sql.Open("sqlite", dsn(path, 5000e6, true))
	if err != nil {
		return err
	}
	defer db.Close()
	return migrate(ctx, db, v)
}
