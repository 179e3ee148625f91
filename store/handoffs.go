package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// Hand-off (delivery log) states as `envelopd handoff` shows them.
// HandoffFailed is not stored: it is a pending hand-off whose last attempt
// failed (it has an error and waits for its retry).
const (
	HandoffPending = "pending"
	HandoffFailed  = "failed"
	HandoffDone    = "done"
	HandoffDropped = "dropped"
)

// HandoffStates are the values HandoffFilter.State takes ("" and "all"
// aside).
var HandoffStates = []string{HandoffPending, HandoffFailed, HandoffDone, HandoffDropped}

// ErrHandoffDone is returned by HandoffRetry and HandoffDrop for a
// hand-off that was already delivered.
var ErrHandoffDone = errors.New("store: hand-off already delivered")

// HandoffFilter selects hand-offs. State "" is every hand-off not done
// (what needs attention), "all" every one.
type HandoffFilter struct {
	State  string
	Target string // "exec", "webhook"; "" for every target
	Limit  int    // 0: no limit
	// MessageID, when set, selects the hand-offs of that message (row id).
	MessageID int64
}

// Handoff is one entry of the delivery log with its message, as
// `envelopd handoff list --json` prints it.
type Handoff struct {
	ID     int64  `json:"id"`
	Event  string `json:"event_id"` // evt_ID_TARGET, what the agent saw
	Target string `json:"target"`
	State  string `json:"state"` // pending, done, dropped
	// Failed: pending after a failed attempt (LastError is set).
	Failed   bool `json:"failed"`
	Attempts int  `json:"attempts"`
	// NextAttempt is when a pending hand-off is tried next (or when the
	// claim of one being delivered ends); null unless pending.
	NextAttempt *time.Time `json:"next_attempt_at"`
	// Held: pending, waiting for its message's payment to be verified
	// (serve --handoff-verified); NextAttempt is then null.
	Held bool `json:"held"`
	// HeldBy says who holds it: "payment" (until verified), "person"
	// (HandoffHold, until HandoffRelease), or "person,payment".
	HeldBy    string         `json:"held_by,omitempty"`
	LastError string         `json:"last_error"`
	Message   HandoffMessage `json:"message"`
}

// HandoffMessage names the stored message of a hand-off with the keys of
// its View JSON.
type HandoffMessage struct {
	ID          int64     `json:"id"` // row id: what thread, reply and ENVELOPD_MESSAGE_ID use
	MessageID   string    `json:"message_id"`
	EnvelopayID string    `json:"envelopay_id"`
	Type        string    `json:"type"`
	From        string    `json:"from"`
	Subject     string    `json:"subject"`
	ReceivedAt  time.Time `json:"received_at"`
}

// Handoffs lists the delivery log, oldest first.
func (s handoffRoom) Handoffs(ctx context.Context, f HandoffFilter) ([]Handoff, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	var where []string
	var args []any
	switch f.State {
	case "":
		where = append(where, "d.state != 'done'")
	case "all":
	case HandoffFailed:
		where = append(where, "d.state = 'pending' AND d.last_error != ''")
	case HandoffPending, HandoffDone, HandoffDropped:
		where = append(where, "d.state = ?")
		args = append(args, f.State)
	default:
		return nil, fmt.Errorf("store: hand-off state %q: want one of %s, all", f.State, strings.Join(HandoffStates, ", "))
	}
	if f.Target != "" {
		where = append(where, "d.target = ?")
		args = append(args, f.Target)
	}
	if f.MessageID != 0 {
		where = append(where, "d.message_id = ?")
		args = append(args, f.MessageID)
	}
	q := `SELECT d.id, d.target, d.state, d.attempts, d.next_attempt_at, d.last_error,
		m.id, m.message_id, m.envelopay_id, m.type, m.sender, m.subject, m.received_at
		FROM deliveries d JOIN messages m ON m.id = d.message_id`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY d.id"
	if f.Limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", f.Limit)
	}
	return queryAll(ctx, s.r, "hand-offs", func(sc scanner) (h Handoff, err error) {
		var next, recv int64
		m := &h.Message
		if err := sc.Scan(&h.ID, &h.Target, &h.State, &h.Attempts, &next, &h.LastError,
			&m.ID, &m.MessageID, &m.EnvelopayID, &m.Type, &m.From, &m.Subject, &recv); err != nil {
			return h, err
		}
		h.Event = fmt.Sprintf("evt_%d_%s", h.ID, h.Target)
		if h.State == HandoffPending {
			h.Failed = h.LastError != ""
			if by := heldBy(next); by != "" {
				h.Held, h.HeldBy = true, by
			} else {
				t := time.Unix(0, next).UTC()
				h.NextAttempt = &t
			}
		}
		m.ReceivedAt = time.Unix(0, recv).UTC()
		return h, nil
	}, q, args...)
}

// HandoffRetry makes a pending or dropped hand-off due now and starts its
// backoff over (attempts 0); its last error is kept until the next
// attempt. A delivered one is ErrHandoffDone, an unknown id ErrNotFound.
func (s handoffRoom) HandoffRetry(ctx context.Context, id int64) error {
	return s.setHandoff(ctx, id, `UPDATE deliveries SET state = 'pending', attempts = 0, next_attempt_at = ?
		WHERE id = ? AND state != 'done'`, time.Now().UTC().UnixNano(), id)
}

// HandoffDrop gives a pending hand-off up: it is never attempted again
// (HandoffRetry brings it back). A delivered one is ErrHandoffDone, an
// unknown id ErrNotFound.
func (s handoffRoom) HandoffDrop(ctx context.Context, id int64) error {
	return s.setHandoff(ctx, id, `UPDATE deliveries SET state = 'dropped' WHERE id = ? AND state != 'done'`, id)
}

func (s handoffRoom) setHandoff(ctx context.Context, id int64, update string, args ...any) error {
	return s.settleUnless(ctx, "hand-off", id, `SELECT state FROM deliveries WHERE id = ?`, HandoffDone, ErrHandoffDone, update, args...)
}

// A person may hold the pending hand-offs of a message (HandoffHold) and
// release them (HandoffRelease): a held hand-off is not attempted. The
// hold is kept, like the payment's (heldHandoff), in next_attempt_at, as
// times no clock reaches, so the worker's claim (next_attempt_at <= now)
// passes them over with no other condition: personHeld for a hand-off
// that was due, personHeldPayment for one that also waits for its
// payment (released, it waits for the payment again; the payment
// verified, it stays held by the person).
var (
	personHeld        = time.Unix(0, math.MaxInt64-1)
	personHeldPayment = time.Unix(0, math.MaxInt64-2)
)

// heldBy names who holds a pending hand-off due at next ("": nobody).
func heldBy(next int64) string {
	switch next {
	case heldHandoff.UnixNano():
		return "payment"
	case personHeld.UnixNano():
		return "person"
	case personHeldPayment.UnixNano():
		return "person,payment"
	}
	return ""
}

// ErrNoPendingHandoff is returned by HandoffHold and HandoffRelease when
// the message has no pending hand-off to hold (none, or all delivered or
// dropped) or none held to release.
var ErrNoPendingHandoff = errors.New("store: no pending hand-off")

// HandoffHold holds every pending hand-off of message id (row id) until
// HandoffRelease: the agent is not handed the message meanwhile. Holding
// a held hand-off changes nothing. It returns the message's hand-offs; an
// unknown message is ErrNotFound, one without a pending hand-off
// ErrNoPendingHandoff. A hand-off being delivered at that moment may
// still complete.
func (s handoffRoom) HandoffHold(ctx context.Context, id int64) ([]Handoff, error) {
	return s.holdHandoffs(ctx, id, func(tx Tx) (int64, error) {
		res, err := tx.Exec(`UPDATE deliveries SET next_attempt_at = CASE WHEN next_attempt_at = ? THEN CAST(? AS BIGINT) ELSE CAST(? AS BIGINT) END
			WHERE message_id = ? AND state = 'pending'`,
			heldHandoff.UnixNano(), personHeldPayment.UnixNano(), personHeld.UnixNano(), id)
		if err != nil {
			return 0, err
		}
		return res.RowsAffected()
	})
}

// HandoffRelease undoes HandoffHold: the message's hand-offs held by a
// person are due now, or wait for their payment again when they did
// before. None held is ErrNoPendingHandoff.
func (s handoffRoom) HandoffRelease(ctx context.Context, id int64) ([]Handoff, error) {
	return s.holdHandoffs(ctx, id, func(tx Tx) (int64, error) {
		res, err := tx.Exec(`UPDATE deliveries SET next_attempt_at = CASE WHEN next_attempt_at = ? THEN CAST(? AS BIGINT) ELSE CAST(? AS BIGINT) END
			WHERE message_id = ? AND state = 'pending' AND next_attempt_at IN (?, ?)`,
			personHeldPayment.UnixNano(), heldHandoff.UnixNano(), time.Now().UTC().UnixNano(), id,
			personHeld.UnixNano(), personHeldPayment.UnixNano())
		if err != nil {
			return 0, err
		}
		return res.RowsAffected()
	})
}

func (s handoffRoom) holdHandoffs(ctx context.Context, id int64, update func(Tx) (int64, error)) ([]Handoff, error) {
	err := s.write(ctx, func(tx Tx) error {
		var one int
		err := tx.QueryRow(`SELECT 1 FROM messages WHERE id = ?`, id).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("message %d: %w", id, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("store: hand-offs of %d: %w", id, err)
		}
		n, err := update(tx)
		if err != nil {
			return fmt.Errorf("store: hand-offs of %d: %w", id, err)
		}
		if n == 0 {
			return fmt.Errorf("message %d: %w", id, ErrNoPendingHandoff)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.Handoffs(ctx, HandoffFilter{State: "all", MessageID: id})
}
