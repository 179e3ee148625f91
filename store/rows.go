package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
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
	rows, err := r.QueryContext(ctx, q, args...)
	out, err := collect(rows, err, "store: "+what, scan)
	if out == nil && err == nil {
		out = []T{}
	}
	return out, err
}

// collect scans each row of rows, the result of a query that returned
// err, with scan, in order (eachRow); nil when there are none.
func collect[T any](rows *sql.Rows, err error, prefix string, scan func(scanner) (T, error)) ([]T, error) {
	var out []T
	err = eachRow(rows, err, prefix, func(sc scanner) error {
		v, err := scan(sc)
		out = append(out, v)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// one is the outcome of reading one row: sql.ErrNoRows becomes
// ErrNotFound naming the row (what: "draft d_1"), any other error says
// what was read (op: "store: draft: …").
func one[T any](v T, err error, op, what string) (T, error) {
	var zero T
	if errors.Is(err, sql.ErrNoRows) {
		return zero, fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	if err != nil {
		return zero, fmt.Errorf("store: %s: %w", op, err)
	}
	return v, nil
}

// execOne runs a statement in tx that changes one row: an error says op
// ("store: delete domain: …"); no row changed is ErrNotFound naming the
// row (what: "domain example.org").
func execOne(tx Tx, op, what, q string, args ...any) error {
	res, err := tx.Exec(q, args...)
	if err != nil {
		return fmt.Errorf("store: %s: %w", op, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	return nil
}

// writeOne is execOne in a write of its own.
func (s *core) writeOne(ctx context.Context, op, what, q string, args ...any) error {
	return s.write(ctx, func(tx Tx) error { return execOne(tx, op, what, q, args...) })
}

// tunable is a number the store reads at each use, which tests set
// small to take the other path (batches, thresholds).
func tunable(n int64) *atomic.Int64 {
	var v atomic.Int64
	v.Store(n)
	return &v
}

// unixTime is a Scan destination for a time the schema keeps as Unix
// nanoseconds (an integer column): it sets *T to that time, in UTC.
type unixTime struct{ T *time.Time }

// Scan implements sql.Scanner; NULL is an error, as for an int64.
func (n unixTime) Scan(v any) error {
	var i sql.NullInt64
	if err := i.Scan(v); err != nil {
		return err
	}
	if !i.Valid {
		return errors.New("converting NULL to a time is unsupported")
	}
	*n.T = time.Unix(0, i.Int64).UTC()
	return nil
}
