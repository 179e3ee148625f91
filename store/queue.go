package store

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// DefaultExpiry is how long an outgoing message is retried when
// Outgoing.Expires is zero.
const DefaultExpiry = 24 * time.Hour

// Enqueue implements Store. Enqueue is idempotent per Message-ID: a second
// Outgoing with a Message-ID already queued returns the first entry's id
// and writes nothing (a crashed-and-retried `send` cannot send twice).
func (s queueRoom) Enqueue(ctx context.Context, out *Outgoing) (int64, error) {
	if err := checkOutgoing(out); err != nil {
		return 0, err
	}
	var id int64
	err := s.writeLogged(ctx, func(tx Tx) error {
		var err error
		id, _, err = enqueueTx(tx, out, time.Now().UTC(), nil)
		return err
	})
	if err != nil {
		return 0, err
	}
	return id, nil
}

// Queued is what EnqueueChecked did: the queue entry and its copy's
// outcome under Check's rules.
type Queued struct {
	ID int64 // queue entry id
	// Copy is the copy's outcome as Check reports it (the ingest rules and
	// unknown_ref; Outcome.ID is the stored copy's row id, 0 when the
	// Message-ID was already queued). Zero when the Outgoing has no Copy.
	Copy Outcome
}

// RefusedError is EnqueueChecked's refusal of an Envelopay message whose
// copy breaks a rule: nothing was written. Outcome holds the problems.
type RefusedError struct {
	Outcome Outcome
}

func (e *RefusedError) Error() string {
	codes := make([]string, 0, len(e.Outcome.Errors))
	for _, p := range e.Outcome.Errors {
		codes = append(codes, string(p.Code))
	}
	return "store: outgoing message refused: " + strings.Join(codes, ", ")
}

// EnqueueChecked is Enqueue with Check's rules applied to out.Copy in the
// same transaction, so that a send runs the rules once and writes its raw
// bytes once: when the copy is an Envelopay message (Copy.Type set) and
// the rules find errors, it is refused (*RefusedError, nothing written)
// unless force, which queues and stores it despite them. The stored copy
// keeps the errors Ingest finds (unknown_ref, which only an outgoing
// message can break, is reported in Queued.Copy, not stored), as when
// Check and Enqueue ran one after the other.
//
// A Message-ID already queued returns the first entry's id, as Enqueue
// does, with the copy's outcome as Check would report it now.
func (s queueRoom) EnqueueChecked(ctx context.Context, out *Outgoing, force bool) (Queued, error) {
	if err := checkOutgoing(out); err != nil {
		return Queued{}, err
	}
	var q Queued
	var refused bool
	err := s.writeLogged(ctx, func(tx Tx) error {
		q, refused = Queued{}, false
		// Its own savepoint: a refusal (or a repeat, checked as a dry
		// run) is rolled back without failing the writer's batch
		// (writer.go).
		if _, err := tx.Exec("SAVEPOINT enqueue"); err != nil {
			return fmt.Errorf("store: savepoint: %w", err)
		}
		id, o, err := enqueueTx(tx, out, time.Now().UTC(), &sendCheck{force: force, refused: &refused})
		q = Queued{ID: id, Copy: o}
		if err != nil || refused || id < 0 {
			if _, rerr := tx.Exec("ROLLBACK TO enqueue"); rerr != nil && err == nil {
				err = fmt.Errorf("store: rollback savepoint: %w", rerr)
			}
		}
		if _, rerr := tx.Exec("RELEASE enqueue"); rerr != nil && err == nil {
			err = fmt.Errorf("store: release savepoint: %w", rerr)
		}
		return err
	})
	if err != nil {
		return Queued{}, err
	}
	if q.ID < 0 {
		q.ID = -q.ID // already queued: the first entry's id
		q.Copy.ID = 0
	}
	if refused {
		q.Copy.ID = 0
		return Queued{}, &RefusedError{Outcome: q.Copy}
	}
	return q, nil
}

// sendCheck asks enqueueTx for Check's rules on the copy (EnqueueChecked).
type sendCheck struct {
	force   bool
	refused *bool // set when the copy is refused: the caller rolls back
}

func checkOutgoing(out *Outgoing) error {
	if out == nil {
		return fmt.Errorf("%w: nil outgoing message", ErrBadInput)
	}
	if len(out.Recipients) == 0 {
		return fmt.Errorf("%w: outgoing message without recipients", ErrBadInput)
	}
	for _, r := range out.Recipients {
		if r == "" {
			return fmt.Errorf("%w: empty recipient", ErrBadInput)
		}
	}
	if out.Copy != nil {
		return checkIncoming(out.Copy)
	}
	return nil
}

// enqueueTx queues out inside tx, with one pending row per recipient due
// now, and stores out.Copy as a DirOut message (no hand-off, no OOPS).
// When the copy holds the same bytes as the entry, the entry keeps none
// of its own: ClaimDue reads them from the copy (copy_id), so they are
// written once.
//
// With chk, the copy also gets Check's rules (its outcome is returned) and
// may be refused (*chk.refused); an entry already queued under out's
// Message-ID is returned as its negated id with the copy checked as a dry
// run, for the caller to roll back. Without chk the outcome is the
// copy's Ingest outcome.
func enqueueTx(tx Tx, out *Outgoing, now time.Time, chk *sendCheck) (int64, Outcome, error) {
	if err := checkOutgoing(out); err != nil {
		return 0, Outcome{}, err
	}
	exp := out.Expires
	if exp.IsZero() {
		exp = now.Add(DefaultExpiry)
	}
	kind := out.Kind
	if kind == "" {
		kind = "send"
	}
	var cp Incoming
	if out.Copy != nil {
		cp = *out.Copy
		cp.Direction = DirOut
		cp.OOPS = nil
		if cp.ReceivedAt.IsZero() {
			cp.ReceivedAt = now
		}
	}
	raw := rawBytes(out.Raw)
	shared := out.Copy != nil && len(out.Raw) > 0 && bytes.Equal(out.Raw, out.Copy.Raw)
	if shared {
		raw = []byte{}
	}
	var id int64
	err := tx.QueryRow(`INSERT INTO queue (kind, sender, message_id, raw, created_at, expires_at)
		VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (message_id) WHERE message_id != '' DO NOTHING RETURNING id`,
		kind, out.From, out.MessageID, raw, now.UnixNano(), exp.UTC().UnixNano()).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		// Already queued under this Message-ID.
		if err := tx.QueryRow(`SELECT id FROM queue WHERE message_id = ?`, out.MessageID).Scan(&id); err != nil {
			return 0, Outcome{}, fmt.Errorf("store: enqueue: %w", err)
		}
		if chk == nil || out.Copy == nil {
			return id, Outcome{}, nil
		}
		o, err := checkTx(tx, &cp)
		if err != nil {
			return 0, Outcome{}, err
		}
		return -id, o, nil
	}
	if err != nil {
		return 0, Outcome{}, fmt.Errorf("store: enqueue: %w", err)
	}
	var o Outcome
	if out.Copy != nil {
		if chk != nil {
			o, err = checkTx(tx, &cp)
		} else {
			o, _, err = ingestTx(tx, &cp, false)
		}
		if err != nil {
			return 0, Outcome{}, fmt.Errorf("store: store copy of outgoing message: %w", err)
		}
		if chk != nil && cp.Type != "" && len(o.Errors) > 0 && !chk.force {
			*chk.refused = true
			return 0, o, nil
		}
		if _, err := tx.Exec(`UPDATE queue SET copy_id = ? WHERE id = ?`, o.ID, id); err != nil {
			return 0, Outcome{}, fmt.Errorf("store: enqueue: %w", err)
		}
	}
	tx.queued()
	for _, r := range out.Recipients {
		if _, err := tx.Exec(`INSERT INTO queue_rcpts (queue_id, rcpt, state, next_attempt_at)
			VALUES (?, ?, 'pending', ?) ON CONFLICT DO NOTHING`, id, r, now.UnixNano()); err != nil {
			return 0, Outcome{}, fmt.Errorf("store: enqueue recipient: %w", err)
		}
	}
	return id, o, nil
}

// ClaimDue implements Store. Pending recipients whose entry has expired are
// first marked failed ("expired"); then up to limit due recipients (oldest
// due first) get attempts+1 and next attempt now+lease before they are
// returned.
func (s queueRoom) ClaimDue(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]Due, error) {
	limit = claimLimit(limit)
	var dues []Due
	n := now.UTC().UnixNano()
	// Expiring a recipient logs its bounce: only then is this a logged
	// write (the read keeps an idle claim from catching the log up).
	write := s.write
	var expiring bool
	if err := s.r.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM queue_rcpts WHERE state = 'pending'
		AND queue_id IN (SELECT id FROM queue WHERE expires_at <= ?))`, n).Scan(&expiring); err != nil || expiring {
		write = s.writeLogged
	}
	err := write(ctx, func(tx Tx) error {
		if _, err := tx.Exec(`UPDATE queue_rcpts SET state = 'failed', last_error = 'expired: delivery given up'
			WHERE state = 'pending' AND queue_id IN (SELECT id FROM queue WHERE expires_at <= ?)`, n); err != nil {
			return fmt.Errorf("store: expire queue: %w", err)
		}
		var err error
		dues, err = claimed(tx, "due", func(sc scanner) (d Due, err error) {
			err = sc.Scan(&d.QueueID, &d.Rcpt, &d.Attempts)
			return d, err
		}, `UPDATE queue_rcpts SET attempts = attempts + 1, next_attempt_at = ?
			WHERE (queue_id, rcpt) IN (SELECT queue_id, rcpt FROM queue_rcpts
				WHERE state = 'pending' AND next_attempt_at <= ? ORDER BY next_attempt_at, queue_id LIMIT ?`+s.d.skipLocked+`)
			RETURNING queue_id, rcpt, attempts`, now.Add(lease).UTC().UnixNano(), n, limit)
		if err != nil {
			return err
		}
		for i := range dues {
			var exp int64
			// An entry with no bytes of its own shares its copy's
			// (enqueueTx).
			var copyRaw []byte
			var codec int64
			if err := tx.QueryRow(`SELECT q.sender, q.raw, q.expires_at, `+rawCols+` FROM queue q
				LEFT JOIN message_raw r ON r.message_id = q.copy_id AND length(q.raw) = 0 WHERE q.id = ?`, dues[i].QueueID).
				Scan(&dues[i].From, &dues[i].Raw, &exp, &copyRaw, &codec); err != nil {
				return fmt.Errorf("store: claim due: %w", err)
			}
			if len(dues[i].Raw) == 0 && copyRaw != nil {
				raw, err := raws.decode(copyRaw, codec)
				if err != nil {
					return fmt.Errorf("store: claim due: queue entry %d: %w", dues[i].QueueID, err)
				}
				dues[i].Raw = raw
			}
			dues[i].Expires = time.Unix(0, exp).UTC()
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sortDues(dues)
	return dues, nil
}

// sortDues orders dues by queue entry and recipient (RETURNING order is
// unspecified).
func sortDues(d []Due) {
	slices.SortFunc(d, func(a, b Due) int {
		if c := cmp.Compare(a.QueueID, b.QueueID); c != 0 {
			return c
		}
		return strings.Compare(a.Rcpt, b.Rcpt)
	})
}

// RecordDelivery implements Store. state is QueueSent, QueueFailed,
// QueueDropped, or QueuePending with next as the next attempt time.
func (s queueRoom) RecordDelivery(ctx context.Context, queueID int64, rcpt, state, lastErr string, next time.Time) error {
	switch state {
	case QueueSent, QueueFailed, QueuePending, QueueDropped:
	default:
		return fmt.Errorf("%w: queue state %q", ErrBadInput, state)
	}
	return s.writeLogged(ctx, func(tx Tx) error {
		res, err := tx.Exec(`UPDATE queue_rcpts SET state = ?, last_error = ?, next_attempt_at = ?
			WHERE queue_id = ? AND rcpt = ?`, state, lastErr, next.UTC().UnixNano(), queueID, rcpt)
		if err != nil {
			return fmt.Errorf("store: record delivery: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("queue %d recipient %s: %w", queueID, rcpt, ErrNotFound)
		}
		return nil
	})
}

// Queue implements Store: the entries with at least one recipient in state
// ("" for all), oldest first, each with all its recipients.
func (s queueRoom) Queue(ctx context.Context, state string) ([]QueueEntry, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	rows, err := s.r.QueryContext(ctx, `SELECT id, kind, sender, message_id, created_at, expires_at FROM queue
		WHERE ? = '' OR id IN (SELECT queue_id FROM queue_rcpts WHERE state = ?) ORDER BY id`, state, state)
	if err != nil {
		return nil, fmt.Errorf("store: queue: %w", err)
	}
	var es []QueueEntry
	idx := map[int64]int{}
	for rows.Next() {
		var e QueueEntry
		var c, x int64
		if err := rows.Scan(&e.ID, &e.Kind, &e.From, &e.MessageID, &c, &x); err != nil {
			rows.Close()
			return nil, fmt.Errorf("store: queue: %w", err)
		}
		e.CreatedAt, e.Expires = time.Unix(0, c).UTC(), time.Unix(0, x).UTC()
		e.Recipients = []QueueRecipient{}
		idx[e.ID] = len(es)
		es = append(es, e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: queue: %w", err)
	}
	if len(es) == 0 {
		return es, nil
	}
	rows, err = s.r.QueryContext(ctx, `SELECT queue_id, rcpt, state, attempts, next_attempt_at, last_error
		FROM queue_rcpts WHERE queue_id >= ? AND queue_id <= ? ORDER BY queue_id, rcpt`, es[0].ID, es[len(es)-1].ID)
	if err != nil {
		return nil, fmt.Errorf("store: queue: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var qid, next int64
		var r QueueRecipient
		if err := rows.Scan(&qid, &r.Rcpt, &r.State, &r.Attempts, &next, &r.LastError); err != nil {
			return nil, fmt.Errorf("store: queue: %w", err)
		}
		if r.State == QueuePending {
			r.NextAttempt = time.Unix(0, next).UTC()
		}
		if i, ok := idx[qid]; ok {
			es[i].Recipients = append(es[i].Recipients, r)
		}
	}
	return es, rows.Err()
}

// QueueRetry implements Store: every recipient not yet sent becomes pending
// and due now, and an expired entry gets a new DefaultExpiry from now.
func (s queueRoom) QueueRetry(ctx context.Context, id int64) error {
	return s.write(ctx, func(tx Tx) error {
		now := time.Now().UTC()
		res, err := tx.Exec(`UPDATE queue SET expires_at = `+s.d.greatest+`(expires_at, ?) WHERE id = ?`,
			now.Add(DefaultExpiry).UnixNano(), id)
		if err != nil {
			return fmt.Errorf("store: queue retry: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("queue %d: %w", id, ErrNotFound)
		}
		if _, err := tx.Exec(`UPDATE queue_rcpts SET state = 'pending', next_attempt_at = ?
			WHERE queue_id = ? AND state != 'sent'`, now.UnixNano(), id); err != nil {
			return fmt.Errorf("store: queue retry: %w", err)
		}
		tx.queued()
		return nil
	})
}

// QueueDrop implements Store: every recipient not yet sent becomes dropped.
func (s queueRoom) QueueDrop(ctx context.Context, id int64) error {
	return s.write(ctx, func(tx Tx) error {
		var one int
		if err := tx.QueryRow(`SELECT 1 FROM queue WHERE id = ?`, id).Scan(&one); errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("queue %d: %w", id, ErrNotFound)
		} else if err != nil {
			return fmt.Errorf("store: queue drop: %w", err)
		}
		if _, err := tx.Exec(`UPDATE queue_rcpts SET state = 'dropped' WHERE queue_id = ? AND state != 'sent'`, id); err != nil {
			return fmt.Errorf("store: queue drop: %w", err)
		}
		return nil
	})
}
