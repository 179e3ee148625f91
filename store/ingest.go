package store

import (
	"cmp"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/envelopd/envelopd/protocols"
)

// ErrBadInput is wrapped by the errors Ingest and Enqueue return for input
// they cannot store at all (nil, unknown direction or status).
var ErrBadInput = errors.New("store: bad input")

// duplicateFamily reports whether a code makes a message a duplicate rather
// than quarantining it: the same id, the same proof, a replayed claim or
// chain link (Envelopay v0.2.0 "Verification"; Vacant P6 replay_protect),
// or a retry (the same content resent under a new Message-ID).
func duplicateFamily(c protocols.Code) bool {
	return c == protocols.CodeDuplicateID || c == protocols.CodeDuplicateProof || c == protocols.CodeReplayDetected ||
		c == protocols.CodeRetry
}

// finalStatus applies the status rule: any problem outside the duplicate
// family (or a stateless quarantine) quarantines; otherwise a duplicate
// problem or a marked replay makes a duplicate; otherwise accepted.
func finalStatus(stateless string, errs protocols.Problems, replay bool) string {
	quarantine := stateless == StatusQuarantined
	dup := replay
	for _, e := range errs {
		if duplicateFamily(e.Code) {
			dup = true
		} else {
			quarantine = true
		}
	}
	switch {
	case quarantine:
		return StatusQuarantined
	case dup:
		return StatusDuplicate
	}
	return StatusAccepted
}

// Ingest implements Store. See ingestTx for the rules.
func (s rulesRoom) Ingest(ctx context.Context, in *Incoming) (Outcome, error) {
	if err := checkIncoming(in); err != nil {
		return Outcome{}, err
	}
	var out Outcome
	write := s.write
	if in.Direction == DirOut {
		write = s.writeLogged // logs message.sent
	}
	err := write(ctx, func(tx Tx) error {
		o, _, err := ingestTx(tx, in, true)
		out = o
		return err
	})
	if err != nil {
		return Outcome{}, err
	}
	// An OOPS the mail is owed is a row committed with it (OwedOOPS): the
	// owed-OOPS worker, woken by this commit (MessagesChanged), composes,
	// signs and queues it.
	return out, nil
}

func checkIncoming(in *Incoming) error {
	if in == nil {
		return fmt.Errorf("%w: nil message", ErrBadInput)
	}
	switch in.Direction {
	case DirIn, DirOut, "":
	default:
		return fmt.Errorf("%w: direction %q", ErrBadInput, in.Direction)
	}
	switch in.Status {
	case StatusAccepted, StatusQuarantined, "":
	default:
		return fmt.Errorf("%w: stateless status %q", ErrBadInput, in.Status)
	}
	return nil
}

// ingestTx stores in and makes every stateful decision inside tx:
//
//  1. Threading (thread.go) and ACCEPT against its OFFER's want
//     (Envelopay v0.2.0, ACCEPT table): amount, token and chain must
//     match, else amount_mismatch. Both only read.
//  2. Exact redelivery: the message row is inserted with ON CONFLICT DO
//     NOTHING on (message_id, mailbox, direction, content hash); a
//     conflict returns the earlier row, writes nothing, hands off nothing,
//     owes no OOPS.
//  3. The raw bytes.
//  4. Uniqueness: (sender, Envelopay id) → duplicate_id, proof fingerprint
//     → duplicate_proof, protocol claims and chain links. They are taken
//     under a nested savepoint and kept only when the final status is
//     accepted: a quarantined or duplicate message reports the conflicts it
//     would cause but never holds an id, a proof, a claim or a chain tip,
//     so a rejected (e.g. forged) message cannot poison later ones.
//  5. Status, hand-off rows (accepted only) and the courtesy OOPS decision,
//     an owed OOPS recorded as a row (callOOPS false for stored copies of
//     outgoing mail); owed is its plan, or nil.
func ingestTx(tx Tx, in *Incoming, callOOPS bool) (Outcome, *OOPSPlan, error) {
	dir := in.Direction
	if dir == "" {
		dir = DirIn
	}
	now := in.ReceivedAt
	if now.IsZero() {
		now = time.Now()
	}
	now = now.UTC()
	sum := sha256.Sum256(in.Raw)
	errs := append(protocols.Problems{}, in.Errors...)
	warns := append(protocols.Problems{}, in.Warnings...)
	rcpts := jsonOrEmpty(in.Recipients, "[]")

	// Read-only decisions first, so that the common case writes the row
	// once: the thread and the ACCEPT check.
	thread, err := threadFor(tx, in, sum[:])
	if err != nil {
		return Outcome{}, nil, err
	}
	if in.Type == "accept" && in.AcceptPaid != nil {
		p, err := checkAccept(tx, in)
		if err != nil {
			return Outcome{}, nil, err
		}
		errs = append(errs, p...)
	}
	status := finalStatus(in.Status, errs, false)

	var wantAmount, wantToken, wantChain any
	if in.OfferWant != nil {
		wantAmount, wantToken, wantChain = in.OfferWant.Amount, in.OfferWant.Token, in.OfferWant.Chain
	}
	var as string
	if dir == DirIn {
		if as, err = receivedAs(tx, in.Mailbox, in.Sender, rcpts, thread, in.unauthenticated()); err != nil {
			return Outcome{}, nil, err
		}
	}
	errsCol, warnsCol := problemCols(problemsJSON(errs), problemsJSON(warns), in.Result)
	id, inserted, err := tx.InsertMessage(rawBytes(in.Raw),
		in.Mailbox, dir, in.MessageID, sum[:], in.Sender, rcpts, in.Subject, in.Type, in.EnvelopayID,
		status, thread, now.UnixNano(), errsCol, warnsCol,
		raws.encodeResult(in.Result), nullJSON(in.DKIM), in.AuthResults, len(in.Raw),
		wantAmount, wantToken, wantChain, resultNote(in.Result), as, tx.dialect().codes(codeTags(errs, warns)))
	if err != nil {
		return Outcome{}, nil, fmt.Errorf("store: insert message: %w", err)
	}
	if !inserted {
		o, err := redelivery(tx, dir, in.Mailbox, in.MessageID, sum[:])
		return o, nil, err
	}

	// Uniqueness facts, kept only if the message ends up accepted. A
	// message whose keys are too long to be one (oversizeKeys) takes
	// none: it is quarantined with invalid_field. They are taken under a
	// savepoint, rolled back unless accepted — except in the common case,
	// a message accepted so far whose only facts are its id and proof:
	// those two rows are removed by key if a conflict makes it a
	// duplicate (undoPlainFacts), which spares every message the
	// savepoint (three statements and a sub-journal copy of the pages
	// the facts touch).
	plain := status == StatusAccepted && !hasProtocolFacts(in)
	if !plain {
		if _, err := tx.Exec("SAVEPOINT uniq"); err != nil {
			return Outcome{}, nil, fmt.Errorf("store: savepoint: %w", err)
		}
	}
	claimErrs, replay := oversizeKeys(in), false
	if len(claimErrs) == 0 {
		if claimErrs, replay, err = takeUnique(tx, id, dir, in, now); err != nil {
			return Outcome{}, nil, err
		}
	}
	errs = append(errs, claimErrs...)
	final := finalStatus(in.Status, errs, replay)
	if final != StatusAccepted && plain {
		if err := undoPlainFacts(tx, id, dir, in); err != nil {
			return Outcome{}, nil, err
		}
	}
	if final != StatusAccepted && !plain {
		if _, err := tx.Exec("ROLLBACK TO uniq"); err != nil {
			return Outcome{}, nil, fmt.Errorf("store: rollback savepoint: %w", err)
		}
	}
	if !plain {
		if _, err := tx.Exec("RELEASE uniq"); err != nil {
			return Outcome{}, nil, fmt.Errorf("store: release savepoint: %w", err)
		}
	}
	if final != status || len(claimErrs) > 0 {
		status = final
		if _, err := tx.Exec(`UPDATE messages SET status = ?, errors = ?, codes = ? WHERE id = ?`,
			status, problemsJSON(errs), tx.dialect().codes(codeTags(errs, warns)), id); err != nil {
			return Outcome{}, nil, fmt.Errorf("store: update message: %w", err)
		}
	}
	paid := dir == DirIn && in.Proof != nil && in.ProofFingerprint != ""
	if paid {
		if err := insertPayment(tx, id, in, status, errs, now); err != nil {
			return Outcome{}, nil, err
		}
	}
	if status == StatusAccepted {
		due := now
		if paid && in.HandoffVerified {
			due = heldHandoff
		}
		if err := logHandoff(tx, id, in.Handoff, due); err != nil {
			return Outcome{}, nil, err
		}
	}
	out := Outcome{ID: id, Status: status, ThreadID: thread, Errors: errs, Warnings: warns, Replay: replay}
	var owed *OOPSPlan
	if callOOPS && in.OOPS != nil {
		if prob, ok := in.OOPS.Owed(in.Type, out.Errors); ok {
			t := in.OOPS
			plan := &OOPSPlan{Code: prob.Code, To: t.To, From: t.From, Suppressed: t.Suppressed, Detail: t.Detail}
			ok, err := courtesyOOPS(tx, plan, in.OOPSLimits, &out, now)
			if err != nil {
				return Outcome{}, nil, err
			}
			if ok {
				owed = plan
			}
		}
	}
	return out, owed, nil
}

// courtesyOOPS records the decision on the OOPS plan the stored message
// out is owed, in the ingest's transaction: the caller may have
// suppressed it (plan.Suppressed), else the limits apply — at most
// PerThreadCode OOPS per thread and error code, and at most
// PerRecipientHour OOPS to one address in the hour before the message's
// receipt — counted over oops_sent under advisory locks, so that
// concurrent ingests cannot both pass a limit.
//
// An allowed OOPS is recorded as owed: its oops_sent row (queue_id 0,
// with its sender) is the work item of the owed-OOPS worker, which
// composes, signs and queues it after the commit (ClaimOwedOOPS,
// ResolveOOPS). The message's record says pending until then. A
// suppressed OOPS adds the warning oops_suppressed. owed reports a row.
func courtesyOOPS(tx Tx, plan *OOPSPlan, lim OOPSLimits, out *Outcome, now time.Time) (owed bool, err error) {
	rec := &OOPSRecord{Code: plan.Code, To: plan.To}
	reason, detail := plan.Suppressed, plan.Detail
	if reason == "" {
		if reason, detail, err = oopsLimited(tx, lim, plan, out.ThreadID, now); err != nil {
			return false, err
		}
	}
	if reason == "" && plan.From == "" {
		reason, detail = OOPSNoSigningDomain, "no domain to send it from"
	}
	if reason == "" {
		if err := insertOwedOOPS(tx, plan, out.ThreadID, out.ID, now); err != nil {
			return false, err
		}
		rec.Pending, owed = true, true
	} else {
		rec.Reason = reason
		out.Warnings = append(out.Warnings, suppressedWarning(plan.Code, reason, detail))
	}
	out.OOPS = rec
	if err := setWarnings(tx, out.ID, rec, out.Errors, out.Warnings); err != nil {
		return false, fmt.Errorf("store: record courtesy OOPS: %w", err)
	}
	return owed, nil
}

// insertOwedOOPS records plan as owed to message id (thread thread): an
// oops_sent row with queue_id 0, due at once (next_at 0).
func insertOwedOOPS(tx Tx, plan *OOPSPlan, thread string, id int64, now time.Time) error {
	if _, err := tx.Exec(`INSERT INTO oops_sent (recipient, thread_id, code, sent_at, message_id, queue_id, sender)
		VALUES (?, ?, ?, ?, ?, 0, ?)`, plan.To, thread, string(plan.Code), now.UnixNano(), id, plan.From); err != nil {
		return fmt.Errorf("store: courtesy OOPS: %w", err)
	}
	return nil
}

// OwedOOPS is a courtesy OOPS a stored message is owed whose limits
// allowed it and which is not queued yet: a row of its own, recorded in
// the transaction that decided it (the message's ingest, or a payment's
// rejection), for the owed-OOPS worker.
type OwedOOPS struct {
	ID        int64          // oops_sent row
	MessageID int64          // the stored message it answers
	Code      protocols.Code // the error it answers
	To        string
	// From is the address it is sent from ("" for rows recorded before
	// the sender was: the worker works it out again).
	From     string
	At       time.Time // when it was decided (the message's receipt)
	Attempts int       // claims so far, this one included (ClaimOwedOOPS)
}

func suppressedWarning(code protocols.Code, reason, detail string) protocols.Problem {
	if detail == "" {
		detail = reason
	}
	return protocols.New(protocols.CodeOOPSSuppressed, "oops", "no courtesy OOPS for %s: %s", code, detail)
}

const owedCols = `id, message_id, code, recipient, sender, sent_at, attempts`

func scanOwed(rows scanner) (OwedOOPS, error) {
	var o OwedOOPS
	var code string
	var at int64
	if err := rows.Scan(&o.ID, &o.MessageID, &code, &o.To, &o.From, &at, &o.Attempts); err != nil {
		return OwedOOPS{}, fmt.Errorf("store: owed OOPS: %w", err)
	}
	o.Code, o.At = protocols.Code(code), time.Unix(0, at).UTC()
	return o, nil
}

// ClaimOwedOOPS leases up to limit owed courtesy OOPS due at now (a new
// one is due at once), oldest first: each is hidden from other workers
// (on every node) until now+lease and its Attempts counted, so that a
// worker killed between the claim and ResolveOOPS leaves it to be
// claimed again when the lease ends. ResolveOOPS settles it once.
func (s rulesRoom) ClaimOwedOOPS(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]OwedOOPS, error) {
	out, err := claim(ctx, s.core, "owed OOPS", scanOwed, `UPDATE oops_sent SET next_at = ?, attempts = attempts + 1
		WHERE id IN (SELECT id FROM oops_sent WHERE queue_id = 0 AND next_at <= ? ORDER BY id LIMIT ?`+s.d.skipLocked+`)
		RETURNING `+owedCols, now.Add(lease).UTC().UnixNano(), now.UTC().UnixNano(), claimLimit(limit))
	if err != nil {
		return nil, err
	}
	// RETURNING order is unspecified: oldest first.
	slices.SortFunc(out, func(a, b OwedOOPS) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// ReleaseOwedOOPS gives back a claimed owed OOPS that was not attempted
// (its worker is stopping): due again at next, without waiting out the
// lease. An OOPS settled meanwhile is left alone.
func (s rulesRoom) ReleaseOwedOOPS(ctx context.Context, id int64, next time.Time) error {
	return s.write(ctx, func(tx Tx) error {
		if _, err := tx.Exec(`UPDATE oops_sent SET next_at = ? WHERE id = ? AND queue_id = 0`, next.UTC().UnixNano(), id); err != nil {
			return fmt.Errorf("store: release owed OOPS: %w", err)
		}
		return nil
	})
}

// OwedOOPSList returns the courtesy OOPS owed since before olderThan and
// not queued (OwedOOPS), oldest first, at most limit.
func (s rulesRoom) OwedOOPSList(ctx context.Context, olderThan time.Time, limit int) ([]OwedOOPS, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.r.QueryContext(ctx, `SELECT o.id, o.message_id, o.code, o.recipient, o.sender, o.sent_at, o.attempts FROM oops_sent o
		JOIN messages m ON m.id = o.message_id
		WHERE o.queue_id = 0 AND o.sent_at < ? ORDER BY o.id LIMIT ?`, olderThan.UTC().UnixNano(), limit)
	if err != nil {
		return nil, fmt.Errorf("store: owed OOPS: %w", err)
	}
	defer rows.Close()
	var out []OwedOOPS
	for rows.Next() {
		o, err := scanOwed(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, rows.Err()
}

// ResolveOOPS settles an owed courtesy OOPS: with msg, it is queued (with
// its stored copy) and the message's record names the queue entry, the
// OOPS's Message-ID and body; without, none is sent and the record says
// compose_failed (reason, a sentence, goes in the warning) and the rate
// slot is given back. It returns the new record, or nil when the OOPS was
// settled already (by another node's worker): the oops_sent row is locked
// first, so it is settled once.
func (s rulesRoom) ResolveOOPS(ctx context.Context, owed OwedOOPS, msg *Outgoing, body json.RawMessage, reason string) (*OOPSRecord, error) {
	var rec *OOPSRecord
	err := s.writeLogged(ctx, func(tx Tx) error {
		rec = nil
		var qid int64
		err := tx.QueryRow(`SELECT queue_id FROM oops_sent WHERE id = ?`+tx.dialect().forUpdate, owed.ID).Scan(&qid)
		if errors.Is(err, sql.ErrNoRows) || err == nil && qid != 0 {
			return nil // settled already
		}
		if err != nil {
			return fmt.Errorf("store: courtesy OOPS: %w", err)
		}
		errs, warns, err := readProblems(tx, owed.MessageID, "")
		if err != nil {
			return fmt.Errorf("store: courtesy OOPS: %w", err)
		}
		r := &OOPSRecord{Code: owed.Code, To: owed.To}
		if msg != nil {
			if err := checkOutgoing(msg); err != nil {
				return err
			}
			if qid, _, err = enqueueTx(tx, msg, owed.At, nil); err != nil {
				return fmt.Errorf("store: courtesy OOPS: %w", err)
			}
			if _, err := tx.Exec(`UPDATE oops_sent SET queue_id = ? WHERE id = ?`, qid, owed.ID); err != nil {
				return fmt.Errorf("store: courtesy OOPS: %w", err)
			}
			r.Sent, r.QueueID, r.MessageID, r.Body = true, qid, msg.MessageID, body
		} else {
			if _, err := tx.Exec(`DELETE FROM oops_sent WHERE id = ?`, owed.ID); err != nil {
				return fmt.Errorf("store: courtesy OOPS: %w", err)
			}
			r.Reason = OOPSComposeFailed
			warns = append(warns, suppressedWarning(owed.Code, OOPSComposeFailed, "the OOPS could not be composed: "+reason))
		}
		if err := setWarnings(tx, owed.MessageID, r, errs, warns); err != nil {
			return fmt.Errorf("store: record courtesy OOPS: %w", err)
		}
		rec = r
		return nil
	})
	return rec, err
}

// oopsLimited returns why the limits forbid plan's OOPS ("" when they
// allow it).
func oopsLimited(tx Tx, lim OOPSLimits, plan *OOPSPlan, thread string, now time.Time) (string, string, error) {
	perRcpt, perThread := lim.PerRecipientHour, lim.PerThreadCode
	if perRcpt == 0 {
		perRcpt = DefaultOOPSPerRecipientHour
	}
	if perThread == 0 {
		perThread = DefaultOOPSPerThreadCode
	}
	if err := tx.Lock("oops-rcpt\x00" + plan.To); err != nil {
		return "", "", fmt.Errorf("store: lock OOPS count: %w", err)
	}
	if err := tx.Lock("oops-thread\x00" + thread + "\x00" + string(plan.Code)); err != nil {
		return "", "", fmt.Errorf("store: lock OOPS count: %w", err)
	}
	if perThread > 0 {
		var n int
		if err := tx.QueryRow(`SELECT count(*) FROM oops_sent WHERE thread_id = ? AND code = ?`,
			thread, string(plan.Code)).Scan(&n); err != nil {
			return "", "", fmt.Errorf("store: count OOPS: %w", err)
		}
		if n >= perThread {
			return OOPSRateThread, fmt.Sprintf("this thread already got %d OOPS for %s (limit %d)", n, plan.Code, perThread), nil
		}
	}
	if perRcpt > 0 {
		var n int
		if err := tx.QueryRow(`SELECT count(*) FROM oops_sent WHERE recipient = ? AND sent_at > ?`,
			plan.To, now.Add(-time.Hour).UnixNano()).Scan(&n); err != nil {
			return "", "", fmt.Errorf("store: count OOPS: %w", err)
		}
		if n >= perRcpt {
			return OOPSRateRecipient, fmt.Sprintf("%s already got %d OOPS in the last hour (limit %d)", plan.To, n, perRcpt), nil
		}
	}
	return "", "", nil
}

// redelivery answers an exact redelivery from the stored row.
func redelivery(tx Tx, dir, mailbox, mid string, sum []byte) (Outcome, error) {
	out := Outcome{Redelivery: true}
	var errsJSON, warnsJSON string
	var result []byte
	byMID, args := tx.dialect().midIs("message_id", mid)
	err := tx.QueryRow(`SELECT id, status, thread_id, errors, warnings, result FROM messages
		WHERE `+byMID+` AND mailbox = ? AND direction = ? AND content_hash = ?`,
		append(args, mailbox, dir, sum)...).Scan(&out.ID, &out.Status, &out.ThreadID, &errsJSON, &warnsJSON, &result)
	if err != nil {
		return Outcome{}, fmt.Errorf("store: read earlier copy: %w", err)
	}
	if out.Errors, out.Warnings, err = problemsOfRow(out.ID, errsJSON, warnsJSON, result); err != nil {
		return Outcome{}, err
	}
	return out, nil
}

// checkAccept compares an ACCEPT's payment with the want of the OFFER it
// names (offer_ref), preferring an OFFER sent by one of the ACCEPT's
// recipients (the counterparty), then an accepted one, then the earliest.
// An unknown OFFER is not an error here: it may predate this store.
func checkAccept(tx Tx, in *Incoming) (protocols.Problems, error) {
	ref := in.Refs["offer_ref"]
	if ref == "" {
		return nil, nil
	}
	rows, err := tx.Query(`SELECT id, sender, status, want_amount, want_token, want_chain
		FROM messages`+tx.dialect().eidIndex+`
		WHERE envelopay_id = ? AND envelopay_id <> '' AND mailbox = ? AND type = 'offer' AND want_amount IS NOT NULL`, ref, in.Mailbox)
	var best refCandidate
	var want Asset
	if err := eachRow(rows, err, "store: look up OFFER", func(sc scanner) error {
		var c refCandidate
		var sender, status string
		var w Asset
		if err := sc.Scan(&c.id, &sender, &status, &w.Amount, &w.Token, &w.Chain); err != nil {
			return err
		}
		c.counterparty = slices.Contains(in.Recipients, sender)
		c.ok = status == StatusAccepted
		if best.id == 0 || c.better(best) {
			best, want = c, w
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if best.id == 0 {
		return nil, nil
	}
	got := in.AcceptPaid
	var ps protocols.Problems
	if got.Amount != want.Amount {
		ps = append(ps, protocols.New(protocols.CodeAmountMismatch, "amount",
			"ACCEPT amount %q does not equal OFFER %s want.amount %q", got.Amount, ref, want.Amount))
	}
	if !strings.EqualFold(got.Token, want.Token) {
		ps = append(ps, protocols.New(protocols.CodeAmountMismatch, "token",
			"ACCEPT token %q does not equal OFFER %s want.token %q", got.Token, ref, want.Token))
	}
	if !strings.EqualFold(got.Chain, want.Chain) {
		ps = append(ps, protocols.New(protocols.CodeAmountMismatch, "chain",
			"ACCEPT chain %q does not equal OFFER %s want.chain %q", got.Chain, ref, want.Chain))
	}
	return ps, nil
}

// logHandoff adds a pending delivery per distinct target.
func logHandoff(tx Tx, id int64, targets []string, now time.Time) error {
	seen := map[string]bool{}
	for _, t := range targets {
		if t == "" || seen[t] {
			continue
		}
		seen[t] = true
		if _, err := tx.Exec(`INSERT INTO deliveries (message_id, target, state, next_attempt_at)
			VALUES (?, ?, 'pending', ?) ON CONFLICT (message_id, target) DO NOTHING`,
			id, t, now.UnixNano()); err != nil {
			return fmt.Errorf("store: log hand-off: %w", err)
		}
	}
	return nil
}

func jsonOrEmpty(v any, empty string) string {
	b, err := json.Marshal(v)
	if err != nil || string(b) == "null" {
		return empty
	}
	return string(b)
}

func nullJSON(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return []byte(b)
}

func rawBytes(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
