package store

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"
)

// ClaimDeliveries implements Store: up to limit pending hand-offs to target
// due at now (oldest message first) get attempts+1 and next attempt
// now+lease before they are returned, so a crash mid-delivery retries them
// after the lease (at-least-once) and two workers never take the same one
// within a lease.
func (s handoffRoom) ClaimDeliveries(ctx context.Context, target string, now time.Time, lease time.Duration, limit int) ([]Delivery, error) {
	ds, err := claim(ctx, s.core, "deliveries", func(sc scanner) (d Delivery, err error) {
		err = sc.Scan(&d.ID, &d.MessageID, &d.Target, &d.Attempts)
		return d, err
	}, `UPDATE deliveries SET attempts = attempts + 1, next_attempt_at = ?
		WHERE id IN (SELECT id FROM deliveries WHERE target = ? AND state = 'pending' AND next_attempt_at <= ?
			ORDER BY next_attempt_at, id LIMIT ?`+s.d.skipLocked+`)
		RETURNING id, message_id, target, attempts`,
		now.Add(lease).UTC().UnixNano(), target, now.UTC().UnixNano(), claimLimit(limit))
	if err != nil {
		return nil, err
	}
	sortByID(ds)
	return ds, nil
}

// sortByID orders deliveries by id (RETURNING order is unspecified).
func sortByID(ds []Delivery) {
	slices.SortFunc(ds, func(a, b Delivery) int { return cmp.Compare(a.ID, b.ID) })
}

// DeliveryDone implements Store.
func (s handoffRoom) DeliveryDone(ctx context.Context, id int64) error {
	return s.write(ctx, func(tx Tx) error {
		res, err := tx.Exec(`UPDATE deliveries SET state = 'done', last_error = '' WHERE id = ?`, id)
		return affected(res, err, "delivery", id)
	})
}

// DeliveryRetry implements Store: the hand-off stays pending, due at next.
func (s handoffRoom) DeliveryRetry(ctx context.Context, id int64, next time.Time, lastErr string) error {
	return s.write(ctx, func(tx Tx) error {
		res, err := tx.Exec(`UPDATE deliveries SET state = 'pending', next_attempt_at = ?, last_error = ? WHERE id = ?`,
			next.UTC().UnixNano(), lastErr, id)
		return affected(res, err, "delivery", id)
	})
}

// DeliveryRelease implements Store: a hand-off claimed but never
// attempted (the worker stopped first) is pending again, due now, and the
// attempt its claim counted is taken back, so ENVELOPD_ATTEMPT and the
// backoff count only real attempts.
func (s handoffRoom) DeliveryRelease(ctx context.Context, id int64, now time.Time) error {
	return s.write(ctx, func(tx Tx) error {
		res, err := tx.Exec(`UPDATE deliveries SET state = 'pending', next_attempt_at = ?,
			attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END
			WHERE id = ? AND state = 'pending'`, now.UTC().UnixNano(), id)
		return affected(res, err, "delivery", id)
	})
}

func affected(res sql.Result, err error, what string, id int64) error {
	if err != nil {
		return fmt.Errorf("store: %s %d: %w", what, id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("%s %d: %w", what, id, ErrNotFound)
	}
	return nil
}
