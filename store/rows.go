package store

import (
	"context"
	"fmt"
)

// queryAll runs q on r and scans each row with scan, in order. Every
// error says what was read ("store: drafts: …"). The list is never nil,
// so that an empty one encodes as [] in JSON.
func queryAll[T any](ctx context.Context, r reader, what string, scan func(scanner) (T, error), q string, args ...any) ([]T, error) {
	rows, err := r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", what, err)
	}
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("store: %s: %w", what, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: %s: %w", what, err)
	}
	return out, nil
}
