package store

import (
	"context"
	"database/sql"
	"fmt"
)

// eachRow calls fn with each row of rows, the result of a query that
// returned err, and closes rows before it returns. Every error it returns
// starts with prefix, which says what was read ("store: drafts").
func eachRow(rows *sql.Rows, err error, prefix string, fn func(sc scanner) error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", prefix, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return fmt.Errorf("%s: %w", prefix, err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("%s: %w", prefix, err)
	}
	return nil
}

// queryAll runs q on r and scans each row with scan, in order; errors
// say what was read ("store: drafts: …"). The list is never nil, so that
// an empty one encodes as [] in JSON.
func queryAll[T any](ctx context.Context, r reader, what string, scan func(scanner) (T, error), q string, args ...any) ([]T, error) {
	out := []T{}
	rows, err := r.QueryContext(ctx, q, args...)
	err = eachRow(rows, err, "store: "+what, func(sc scanner) error {
		v, err := scan(sc)
		out = append(out, v)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
