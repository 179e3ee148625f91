package store

import (
	"context"
	"fmt"
)

// The claim half of every claim → lease → attempt → settle worker: one
// statement (UPDATE … WHERE id IN (SELECT … LIMIT ? skipLocked)
// RETURNING …) leases the due rows and returns them, so that two
// workers, on one node or many, never take the same row within a lease.

// claimLimit is limit, or 100 when it is not positive.
func claimLimit(limit int) int {
	if limit <= 0 {
		return 100
	}
	return limit
}

// claimed runs the claiming statement q in tx and scans each returned
// row with scan, in the order returned (which is unspecified: callers
// sort). Errors say what was claimed ("store: claim drafts: …"); the rows
// are closed when it returns, so that tx may run its next statement.
func claimed[T any](tx Tx, what string, scan func(scanner) (T, error), q string, args ...any) ([]T, error) {
	rows, err := tx.Query(q, args...)
	return collect(rows, err, "store: claim "+what, scan)
}

// claim runs claimed in a write transaction of its own.
func claim[T any](ctx context.Context, c *core, what string, scan func(scanner) (T, error), q string, args ...any) ([]T, error) {
	var out []T
	err := c.write(ctx, func(tx Tx) error {
		var err error
		out, err = claimed(tx, what, scan, q, args...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// settleUnless runs update (with args) in a write transaction, once the
// row id, whose state the query state reads (with id), exists (else
// ErrNotFound) and is not final (else finalErr): the settle of a row a
// person may act on (what: "hand-off", "payment") whatever its worker
// is doing.
func (c *core) settleUnless(ctx context.Context, what string, id int64, state, final string, finalErr error, update string, args ...any) error {
	return c.write(ctx, func(tx Tx) error {
		name := fmt.Sprintf("%s %d", what, id)
		var now string
		if _, err := one(0, tx.QueryRow(state, id).Scan(&now), name, name); err != nil {
			return err
		}
		if now == final {
			return fmt.Errorf("%s: %w", name, finalErr)
		}
		if _, err := tx.Exec(update, args...); err != nil {
			return fmt.Errorf("store: %s: %w", name, err)
		}
		return nil
	})
}
