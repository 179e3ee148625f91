package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/envelopd/envelopd/protocols"
)

// Payments: one row per received message that carries a payment proof
// (PAY, ORDER, ACCEPT, an OFFER's give), written in the message's ingest
// transaction and checked on the chain after commit by a claim/lease/
// backoff worker (package payments), as the hand-off log and the
// outbound queue are. The row is keyed by the message's row id: a
// message carries one proof at most. docs/payments.md says what each
// state means.

// Payment states (stable strings).
const (
	// PaymentUnverified: not checked — no rail serves the chain, the
	// message was not accepted, or its proof names no transaction.
	PaymentUnverified = "unverified"
	// PaymentPending: to be checked, or checked and not settled yet.
	PaymentPending = "pending"
	// PaymentVerified: the chain shows the transaction paying what was
	// wanted, with the required confirmations.
	PaymentVerified = "verified"
	// PaymentMismatch: the transaction does not pay what was wanted (or
	// the mail disagrees with what we asked for); Reason says how.
	PaymentMismatch = "mismatch"
	// PaymentFailed: the transaction was included and reverted.
	PaymentFailed = "failed"
	// PaymentNotFound: the transaction was not seen before the deadline
	// (or cannot exist: a malformed hash).
	PaymentNotFound = "not_found"
	// PaymentDuplicate: the proof was already presented in an earlier
	// message (duplicate_proof); never checked.
	PaymentDuplicate = "duplicate"
)

// PaymentStates are the values PaymentFilter.State takes ("" aside).
var PaymentStates = []string{PaymentUnverified, PaymentPending, PaymentVerified, PaymentMismatch,
	PaymentFailed, PaymentNotFound, PaymentDuplicate}

// Payment events in the event log (written by a trigger when a payment
// settles: migration 18).
const (
	EventPaymentVerified = "payment.verified"
	EventPaymentRejected = "payment.rejected" // mismatch, failed or not_found
)

// ProofFacts is what Incoming carries about its payment proof, for the
// payment row (Incoming.ProofFingerprint is its identity).
type ProofFacts struct {
	Chain  string // normalised chain name
	Tx     string // normalised transaction ("" when the proof names none)
	Token  string // the mail's token
	Amount string // the mail's amount, smallest units
	// Check: a rail serves Chain, so an accepted message's payment is
	// pending (checked after commit) rather than unverified.
	Check bool
	// Authenticated: the From address is verified (a passing DKIM
	// signature aligned with it, or the authenticated submission user).
	Authenticated bool
}

// Payment is a payment row as read back: the "payment" object of a
// message in every surface (docs/json.md).
type Payment struct {
	ID            int64      `json:"id"` // the message's row id
	Mailbox       string     `json:"mailbox,omitempty"`
	Sender        string     `json:"sender"` // the mail's From
	State         string     `json:"state"`
	Chain         string     `json:"chain"`
	Tx            string     `json:"tx"`
	Token         string     `json:"token"`
	Amount        string     `json:"amount"`
	Paid          string     `json:"paid"`
	To            string     `json:"to"`   // the wallet paid
	From          string     `json:"from"` // the payer address on the chain
	Block         uint64     `json:"block"`
	Confirmations uint64     `json:"confirmations"`
	CheckedAt     *time.Time `json:"checked_at"`
	Reason        string     `json:"reason"`
	Authenticated bool       `json:"authenticated"`
	Warnings      []string   `json:"warnings"`
	Attempts      int        `json:"attempts"`
	// NextCheck is when a pending payment is checked next; null otherwise.
	NextCheck *time.Time `json:"next_check_at"`
	CreatedAt time.Time  `json:"created_at"`
}

// Settlement is the outcome of one check of a claimed payment.
type Settlement struct {
	State         string // PaymentPending (retry at Next) or a final state
	Reason        string
	Token         string // as resolved by the rail ("" keeps the stored one)
	Paid          string
	To            string
	From          string
	Block         uint64
	Confirmations uint64
	Warnings      []string
	CheckedAt     time.Time
	Next          time.Time // PaymentPending: when to check again
}

// PaymentFilter selects payments; zero fields match every one.
type PaymentFilter struct {
	State   string
	Mailbox string
	AfterID int64 // only ids above
	Limit   int   // 0: no limit
}

// ProofCollision is an old message whose proof, identified anew by
// migration 18, names the transaction an earlier accepted message holds:
// it is kept as stored (not rewritten) and reported here and in the
// server's log at start.
type ProofCollision struct {
	MessageID   int64     `json:"message_id"`
	KeptID      int64     `json:"kept_id"` // the earlier message that holds the proof
	Fingerprint string    `json:"fingerprint"`
	FoundAt     time.Time `json:"found_at"`
}

// ErrPaymentFinal is returned by RecheckPayment for a payment that is
// never checked (duplicate).
var ErrPaymentFinal = errors.New("store: payment is not checked")

// Payments is the payments' room in the store (both backends).
type Payments interface {
	// ClaimPayments returns up to limit pending payments on chains due
	// at now — those of authenticated senders first, then the longest
	// due — after counting the attempt and pushing their next check to
	// now+lease, so that a crash mid-check retries them after the lease
	// and two workers (or nodes) never check one payment within a lease.
	// chains are the chains the caller can check (nil: every chain): a
	// node without a chain's rail leaves its payments to the others.
	ClaimPayments(ctx context.Context, now time.Time, lease time.Duration, limit int, chains []string) ([]Payment, error)
	// SettlePayment records the outcome of a check of a pending payment
	// (ErrNotFound when id is not pending). A final state writes the
	// event payment.verified or payment.rejected.
	SettlePayment(ctx context.Context, id int64, s Settlement) error
	// ReleasePayment puts a claimed payment back unchecked, due at next,
	// its claim's attempt taken back (a budget said not now).
	ReleasePayment(ctx context.Context, id int64, next time.Time) error
	// RecheckPayment makes a payment pending and due at now, its
	// attempts reset (envelopd payments check). A duplicate is
	// ErrPaymentFinal, an unknown id ErrNotFound.
	RecheckPayment(ctx context.Context, id int64, now time.Time) error
	GetPayment(ctx context.Context, id int64) (*Payment, error)
	ListPayments(ctx context.Context, f PaymentFilter) ([]Payment, error)
	// PaymentsFor returns the payments of the given message ids (those
	// without one are absent), for the readers that show messages.
	PaymentsFor(ctx context.Context, ids []int64) (map[int64]*Payment, error)
	// ProofCollisions lists what migration 18 found (ProofCollision).
	ProofCollisions(ctx context.Context) ([]ProofCollision, error)
	// OwePaymentOOPS decides the courtesy OOPS for the rejected payment
	// of message id by the rules of the ingest's (OOPSPlan: the caller's
	// suppression, then OOPSLimits counted in the store), records the
	// decision on the message, and queues the allowed OOPS. A message
	// that has a decision already gets none (nil, nil): one OOPS per
	// message, whichever node asks.
	OwePaymentOOPS(ctx context.Context, id int64, plan *OOPSPlan, lim OOPSLimits, now time.Time) (*OOPSRecord, error)
}

// insertPayment writes the payment row of the received message id in
// its ingest transaction: pending when it is accepted, its proof names a
// transaction and a rail serves its chain; duplicate when its proof was
// presented before; unverified otherwise, with the reason. One INSERT.
func insertPayment(tx Tx, id int64, in *Incoming, status string, errs protocols.Problems, now time.Time) error {
	p := in.Proof
	state, reason := PaymentUnverified, ""
	switch {
	case errs.Has(protocols.CodeDuplicateProof):
		state = PaymentDuplicate
		for _, e := range errs {
			if e.Code == protocols.CodeDuplicateProof {
				reason = e.Message
			}
		}
	case status != StatusAccepted:
		reason = "the message is " + status + ": its payment is not checked"
	case p.Tx == "":
		reason = "the proof names no transaction"
	case !p.Check:
		reason = fmt.Sprintf("no rail serves chain %q", p.Chain)
	default:
		state = PaymentPending
	}
	next := int64(0)
	if state == PaymentPending {
		next = now.UnixNano()
	}
	if _, err := tx.Exec(`INSERT INTO payments (message_id, mailbox, sender, authenticated, chain, tx, token, amount,
		state, reason, next_check_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		id, in.Mailbox, in.Sender, p.Authenticated, p.Chain, p.Tx, p.Token, p.Amount, state, reason, next, now.UnixNano()); err != nil {
		return fmt.Errorf("store: payment: %w", err)
	}
	return nil
}

const paymentCols = `message_id, mailbox, sender, authenticated, chain, tx, token, amount, state, reason, paid,
	to_addr, from_addr, block, confirmations, warnings, checked_at, attempts, next_check_at, created_at`

func scanPayment(sc scanner) (Payment, error) {
	var p Payment
	var warns string
	var checked, next, created, block, confs int64
	if err := sc.Scan(&p.ID, &p.Mailbox, &p.Sender, &p.Authenticated, &p.Chain, &p.Tx, &p.Token, &p.Amount,
		&p.State, &p.Reason, &p.Paid, &p.To, &p.From, &block, &confs, &warns, &checked, &p.Attempts, &next, &created); err != nil {
		return Payment{}, err
	}
	p.Block, p.Confirmations = uint64(block), uint64(confs)
	p.Warnings = []string{}
	_ = json.Unmarshal([]byte(warns), &p.Warnings)
	if checked != 0 {
		t := time.Unix(0, checked).UTC()
		p.CheckedAt = &t
	}
	if p.State == PaymentPending {
		t := time.Unix(0, next).UTC()
		p.NextCheck = &t
	}
	p.CreatedAt = time.Unix(0, created).UTC()
	return p, nil
}

// ClaimPayments implements Payments.
func (s paymentRoom) ClaimPayments(ctx context.Context, now time.Time, lease time.Duration, limit int, chains []string) ([]Payment, error) {
	if chains != nil && len(chains) == 0 {
		return nil, nil
	}
	where, args := "", []any{now.Add(lease).UTC().UnixNano(), now.UTC().UnixNano()}
	if chains != nil {
		c, a := inList("chain", chains)
		where, args = " AND "+c, append(args, a...)
	}
	args = append(args, claimLimit(limit))
	ps, err := claim(ctx, s.core, "payments", scanPayment, `UPDATE payments SET attempts = attempts + 1, next_check_at = ?
		WHERE message_id IN (SELECT message_id FROM payments WHERE state = 'pending' AND next_check_at <= ?`+where+`
			ORDER BY authenticated DESC, next_check_at, message_id LIMIT ?`+s.d.skipLocked+`)
		RETURNING `+paymentCols, args...)
	if err != nil {
		return nil, err
	}
	// RETURNING order is unspecified: authenticated first, then by id.
	sortPayments(ps)
	return ps, nil
}

func sortPayments(ps []Payment) {
	for i := 1; i < len(ps); i++ {
		for j := i; j > 0 && paymentBefore(ps[j], ps[j-1]); j-- {
			ps[j], ps[j-1] = ps[j-1], ps[j]
		}
	}
}

func paymentBefore(a, b Payment) bool {
	if a.Authenticated != b.Authenticated {
		return a.Authenticated
	}
	return a.ID < b.ID
}

// SettlePayment implements Payments.
func (s paymentRoom) SettlePayment(ctx context.Context, id int64, st Settlement) error {
	switch st.State {
	case PaymentPending, PaymentVerified, PaymentMismatch, PaymentFailed, PaymentNotFound:
	default:
		return fmt.Errorf("%w: payment state %q", ErrBadInput, st.State)
	}
	checked := st.CheckedAt
	if checked.IsZero() {
		checked = time.Now()
	}
	next := int64(0)
	if st.State == PaymentPending {
		next = st.Next.UTC().UnixNano()
	}
	warns := st.Warnings
	if warns == nil {
		warns = []string{}
	}
	return s.writeLogged(ctx, func(tx Tx) error {
		res, err := tx.Exec(`UPDATE payments SET state = ?, reason = ?, token = CASE WHEN ? != '' THEN ? ELSE token END,
			paid = ?, to_addr = ?, from_addr = ?, block = ?, confirmations = ?, warnings = ?, checked_at = ?, next_check_at = ?
			WHERE message_id = ? AND state = 'pending'`,
			st.State, st.Reason, st.Token, st.Token, st.Paid, st.To, st.From, int64(st.Block), int64(st.Confirmations),
			jsonOrEmpty(warns, "[]"), checked.UTC().UnixNano(), next, id)
		if err := affected(res, err, "payment", id); err != nil {
			return err
		}
		return releaseHeld(tx, id, st, checked)
	})
}

// heldHandoff is the next attempt time of a hand-off held until its
// message's payment is verified (Incoming.HandoffVerified): never, until
// SettlePayment makes it due or drops it.
var heldHandoff = time.Unix(0, math.MaxInt64)

// releaseHeld makes the held hand-offs of message id due at now when its
// payment is verified, and drops them when it is rejected.
func releaseHeld(tx Tx, id int64, st Settlement, now time.Time) error {
	var err error
	switch st.State {
	case PaymentVerified:
		// Held by a person too (HandoffHold): held by the person only.
		_, err = tx.Exec(`UPDATE deliveries SET next_attempt_at = CASE WHEN next_attempt_at = ? THEN CAST(? AS BIGINT) ELSE CAST(? AS BIGINT) END
			WHERE message_id = ? AND state = 'pending' AND next_attempt_at IN (?, ?)`,
			personHeldPayment.UnixNano(), personHeld.UnixNano(), now.UTC().UnixNano(), id,
			heldHandoff.UnixNano(), personHeldPayment.UnixNano())
	case PaymentMismatch, PaymentFailed, PaymentNotFound:
		_, err = tx.Exec(`UPDATE deliveries SET state = 'dropped', last_error = ? WHERE message_id = ? AND state = 'pending' AND next_attempt_at IN (?, ?)`,
			"payment "+st.State+": "+st.Reason, id, heldHandoff.UnixNano(), personHeldPayment.UnixNano())
	}
	if err != nil {
		return fmt.Errorf("store: payment %d hand-off: %w", id, err)
	}
	return nil
}

// ReleasePayment implements Payments.
func (s paymentRoom) ReleasePayment(ctx context.Context, id int64, next time.Time) error {
	return s.write(ctx, func(tx Tx) error {
		res, err := tx.Exec(`UPDATE payments SET next_check_at = ?,
			attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END
			WHERE message_id = ? AND state = 'pending'`, next.UTC().UnixNano(), id)
		return affected(res, err, "payment", id)
	})
}

// RecheckPayment implements Payments.
func (s paymentRoom) RecheckPayment(ctx context.Context, id int64, now time.Time) error {
	return s.settleUnless(ctx, "payment", id, `SELECT state FROM payments WHERE message_id = ?`, PaymentDuplicate, ErrPaymentFinal,
		`UPDATE payments SET state = 'pending', attempts = 0, next_check_at = ? WHERE message_id = ?`, now.UTC().UnixNano(), id)
}

// GetPayment implements Payments.
func (s paymentRoom) GetPayment(ctx context.Context, id int64) (*Payment, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	p, err := scanPayment(s.r.QueryRowContext(ctx, `SELECT `+paymentCols+` FROM payments WHERE message_id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("payment %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: payment %d: %w", id, err)
	}
	return &p, nil
}

// ListPayments implements Payments: oldest first.
func (s paymentRoom) ListPayments(ctx context.Context, f PaymentFilter) ([]Payment, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	where, args := []string{"message_id > ?"}, []any{f.AfterID}
	if f.State != "" {
		ok := false
		for _, st := range PaymentStates {
			ok = ok || st == f.State
		}
		if !ok {
			return nil, fmt.Errorf("%w: payment state %q: want one of %s", ErrBadInput, f.State, strings.Join(PaymentStates, ", "))
		}
		where, args = append(where, "state = ?"), append(args, f.State)
	}
	if f.Mailbox != "" {
		where, args = append(where, "mailbox = ?"), append(args, f.Mailbox)
	}
	q := `SELECT ` + paymentCols + ` FROM payments WHERE ` + strings.Join(where, " AND ") + ` ORDER BY message_id`
	if f.Limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", f.Limit)
	}
	return s.queryPayments(ctx, q, args...)
}

func (s paymentRoom) queryPayments(ctx context.Context, q string, args ...any) ([]Payment, error) {
	return queryAll(ctx, s.r, "payments", scanPayment, q, args...)
}

// PaymentsFor implements Payments.
func (s paymentRoom) PaymentsFor(ctx context.Context, ids []int64) (map[int64]*Payment, error) {
	out := map[int64]*Payment{}
	if s.isClosed() {
		return nil, ErrClosed
	}
	for len(ids) > 0 {
		n := min(len(ids), 500)
		args := make([]any, n)
		for i, id := range ids[:n] {
			args[i] = id
		}
		ps, err := s.queryPayments(ctx, `SELECT `+paymentCols+` FROM payments WHERE message_id IN (`+placeholders(n)+`)`, args...)
		if err != nil {
			return nil, err
		}
		for i := range ps {
			out[ps[i].ID] = &ps[i]
		}
		ids = ids[n:]
	}
	return out, nil
}

// ProofCollisions implements Payments.
func (s paymentRoom) ProofCollisions(ctx context.Context) ([]ProofCollision, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	return queryAll(ctx, s.r, "proof collisions", func(sc scanner) (c ProofCollision, err error) {
		err = sc.Scan(&c.MessageID, &c.KeptID, &c.Fingerprint, unixTime{&c.FoundAt})
		return c, err
	}, `SELECT message_id, kept_id, fingerprint, found_at FROM proof_collisions ORDER BY message_id`)
}

// OwePaymentOOPS implements Payments.
func (s paymentRoom) OwePaymentOOPS(ctx context.Context, id int64, plan *OOPSPlan, lim OOPSLimits, now time.Time) (*OOPSRecord, error) {
	if plan == nil {
		return nil, fmt.Errorf("%w: no OOPS plan", ErrBadInput)
	}
	var rec *OOPSRecord
	owed := false
	err := s.write(ctx, func(tx Tx) error {
		rec, owed = nil, false
		var thread, errsJSON, warnsJSON string
		var oops, result []byte
		err := tx.QueryRow(`SELECT thread_id, errors, warnings, result, oops FROM messages WHERE id = ?`+tx.dialect().forUpdate, id).
			Scan(&thread, &errsJSON, &warnsJSON, &result, &oops)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("message %d: %w", id, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("store: payment OOPS: %w", err)
		}
		if len(oops) > 0 && string(oops) != "null" {
			return nil // decided already
		}
		r := &OOPSRecord{Code: plan.Code, To: plan.To}
		reason, detail := plan.Suppressed, plan.Detail
		if reason == "" {
			if reason, detail, err = oopsLimited(tx, lim, plan, thread, now); err != nil {
				return err
			}
		}
		if reason == "" && plan.From == "" {
			reason, detail = OOPSNoSigningDomain, "no domain to send it from"
		}
		errs, warns, err := problemsOfRow(id, errsJSON, warnsJSON, result)
		if err != nil {
			return err
		}
		if reason == "" {
			if err := insertOwedOOPS(tx, plan, thread, id, now); err != nil {
				return err
			}
			r.Pending, owed = true, true
		} else {
			r.Reason = reason
			warns = append(warns, suppressedWarning(plan.Code, reason, detail))
		}
		if err := setWarnings(tx, id, r, errs, warns); err != nil {
			return fmt.Errorf("store: payment OOPS: %w", err)
		}
		rec = r
		return nil
	})
	if err == nil && owed {
		// Committed as owed: wake the owed-OOPS worker
		// (MessagesChanged), which composes and queues it.
		s.notify()
	}
	return rec, err
}
