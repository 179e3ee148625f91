package store

import (
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
func (s *core) Ingest(ctx context.Context, in *Incoming) (Outcome, error) {
	if err := checkIncoming(in); err != nil {
		return Outcome{}, err
	}
	var out Outcome
	var owed *owedOOPS
	write := s.write
	if in.Direction == DirOut {
		write = s.writeLogged // logs message.sent
	}
	err := write(ctx, func(tx Tx) error {
		o, ow, err := ingestTx(tx, in, true)
		out, owed = o, ow
		return err
	})
	if err != nil {
		return Outcome{}, err
	}
	if owed != nil {
		// The mail is committed; the OOPS it is owed is composed and
		// signed now, outside the ingest transaction (and SQLite's
		// writer), and queued in a transaction of its own.
		s.composeOwed(ctx, owed, &out)
	}
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
//     calls no OOPS.
//  3. The raw bytes.
//  4. Uniqueness: (sender, Envelopay id) → duplicate_id, proof fingerprint
//     → duplicate_proof, protocol claims and chain links. They are taken
//     under a nested savepoint and kept only when the final status is
//     accepted: a quarantined or duplicate message reports the conflicts it
//     would cause but never holds an id, a proof, a claim or a chain tip,
//     so a rejected (e.g. forged) message cannot poison later ones.
//  5. Status, hand-off rows (accepted only) and the courtesy OOPS (callOOPS
//     false for stored copies of outgoing mail).
func ingestTx(tx Tx, in *Incoming, callOOPS bool) (Outcome, *owedOOPS, error) {
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
	id, inserted, err := tx.InsertMessage(rawBytes(in.Raw),
		in.Mailbox, dir, in.MessageID, sum[:], in.Sender, rcpts, in.Subject, in.Type, in.EnvelopayID,
		status, thread, now.UnixNano(), jsonOrEmpty(errs, "[]"), jsonOrEmpty(warns, "[]"),
		raws.encodeResult(in.Result), nullJSON(in.DKIM), in.AuthResults, len(in.Raw),
		wantAmount, wantToken, wantChain, resultNote(in.Result))
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
		if _, err := tx.Exec(`UPDATE messages SET status = ?, errors = ? WHERE id = ?`,
			status, jsonOrEmpty(errs, "[]"), id); err != nil {
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
	var owed *owedOOPS
	if callOOPS && in.OOPS != nil {
		if owed, err = courtesyOOPS(tx, in, &out, now); err != nil {
			return Outcome{}, nil, err
		}
	}
	return out, owed, nil
}

// courtesyOOPS asks in.OOPS whether the stored message out is owed a
// courtesy OOPS and applies the rules: the caller may suppress
// it (unverified sender, no signing domain, …); otherwise at most
// PerRecipientHour OOPS to one address in the hour before the message's
// receipt and PerThreadCode per thread and error code, counted in
// oops_sent. The counts and the insert run in the ingest's transaction
// after Lock on the recipient and on the thread and code (SQLite
// serialises writers anyway; Postgres takes advisory locks), so
// concurrent ingests, on any node, cannot both take the last slot.
//
// An allowed OOPS is only recorded as owed here — its oops_sent row
// (queue_id 0) holds the slot, and the message's record says pending —
// and returned: composing and DKIM-signing it is slow, and happens after
// the commit (composeOwed, or the owed-OOPS worker after a crash). A
// suppressed OOPS adds the warning oops_suppressed.
func courtesyOOPS(tx Tx, in *Incoming, out *Outcome, now time.Time) (*owedOOPS, error) {
	plan := in.OOPS(*out)
	if plan == nil {
		return nil, nil
	}
	rec := &OOPSRecord{Code: plan.Code, To: plan.To}
	reason, detail := plan.Suppressed, plan.Detail
	if reason == "" {
		var err error
		if reason, detail, err = oopsLimited(tx, in.OOPSLimits, plan, out.ThreadID, now); err != nil {
			return nil, err
		}
	}
	if reason == "" && plan.Compose == nil {
		reason, detail = OOPSComposeFailed, "the OOPS could not be composed: no composer"
	}
	var owed *owedOOPS
	if reason == "" {
		var oid int64
		if err := tx.QueryRow(`INSERT INTO oops_sent (recipient, thread_id, code, sent_at, message_id, queue_id)
			VALUES (?, ?, ?, ?, ?, 0) RETURNING id`, plan.To, out.ThreadID, string(plan.Code), now.UnixNano(), out.ID).Scan(&oid); err != nil {
			return nil, fmt.Errorf("store: courtesy OOPS: %w", err)
		}
		rec.Pending = true
		owed = &owedOOPS{OwedOOPS: OwedOOPS{ID: oid, MessageID: out.ID, Code: plan.Code, To: plan.To, At: now}, plan: plan}
	} else {
		rec.Reason = reason
		if detail == "" {
			detail = reason
		}
		out.Warnings = append(out.Warnings, protocols.New(protocols.CodeOOPSSuppressed, "oops",
			"no courtesy OOPS for %s: %s", plan.Code, detail))
	}
	out.OOPS = rec
	if _, err := tx.Exec(`UPDATE messages SET oops = ?, warnings = ? WHERE id = ?`,
		[]byte(jsonOrEmpty(rec, "null")), jsonOrEmpty(out.Warnings, "[]"), out.ID); err != nil {
		return nil, fmt.Errorf("store: record courtesy OOPS: %w", err)
	}
	return owed, nil
}

// OwedOOPS is a courtesy OOPS a stored message is owed whose limits
// allowed it but which is not queued yet: its composer (the ingest that
// decided it) died between the commit and the queueing.
type OwedOOPS struct {
	ID        int64          // oops_sent row
	MessageID int64          // the stored message it answers
	Code      protocols.Code // the error it answers
	To        string
	At        time.Time // when it was decided (the message's receipt)
}

// owedOOPS is an OwedOOPS with the caller's plan, composed right after
// the ingest commits.
type owedOOPS struct {
	OwedOOPS
	plan *OOPSPlan
}

// composeOwed composes the OOPS the ingest just recorded as owed and
// queues it (ResolveOOPS), filling out's OOPS fields. A failure to queue
// leaves it owed, for the owed-OOPS worker; the message itself is stored
// whatever happens here.
func (s *core) composeOwed(ctx context.Context, owed *owedOOPS, out *Outcome) {
	ctx = context.WithoutCancel(ctx) // the mail is stored: finish its OOPS even if the caller has gone
	o, body, err := owed.plan.Compose()
	if err != nil || o == nil {
		if err == nil {
			err = errors.New("no message")
		}
		if rec, rerr := s.ResolveOOPS(ctx, owed.OwedOOPS, nil, nil, err.Error()); rerr == nil && rec != nil {
			out.OOPS = rec
			out.Warnings = append(out.Warnings, suppressedWarning(rec.Code, rec.Reason, "the OOPS could not be composed: "+err.Error()))
		}
		return
	}
	if rec, err := s.ResolveOOPS(ctx, owed.OwedOOPS, o, body, ""); err == nil && rec != nil {
		out.OOPS, out.QueuedOOPS = rec, rec.QueueID
	}
}

func suppressedWarning(code protocols.Code, reason, detail string) protocols.Problem {
	if detail == "" {
		detail = reason
	}
	return protocols.New(protocols.CodeOOPSSuppressed, "oops", "no courtesy OOPS for %s: %s", code, detail)
}

// OwedOOPSList returns the courtesy OOPS owed since before olderThan and
// not queued (OwedOOPS), oldest first, at most limit.
func (s *core) OwedOOPSList(ctx context.Context, olderThan time.Time, limit int) ([]OwedOOPS, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.r.QueryContext(ctx, `SELECT o.id, o.message_id, o.code, o.recipient, o.sent_at FROM oops_sent o
		JOIN messages m ON m.id = o.message_id
		WHERE o.queue_id = 0 AND o.sent_at < ? ORDER BY o.id LIMIT ?`, olderThan.UTC().UnixNano(), limit)
	if err != nil {
		return nil, fmt.Errorf("store: owed OOPS: %w", err)
	}
	defer rows.Close()
	var out []OwedOOPS
	for rows.Next() {
		var o OwedOOPS
		var code string
		var at int64
		if err := rows.Scan(&o.ID, &o.MessageID, &code, &o.To, &at); err != nil {
			return nil, fmt.Errorf("store: owed OOPS: %w", err)
		}
		o.Code, o.At = protocols.Code(code), time.Unix(0, at).UTC()
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
func (s *core) ResolveOOPS(ctx context.Context, owed OwedOOPS, msg *Outgoing, body json.RawMessage, reason string) (*OOPSRecord, error) {
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
		var warnsJSON string
		if err := tx.QueryRow(`SELECT warnings FROM messages WHERE id = ?`, owed.MessageID).Scan(&warnsJSON); err != nil {
			return fmt.Errorf("store: courtesy OOPS: %w", err)
		}
		warns := decodeProblems(warnsJSON)
		r := &OOPSRecord{Code: owed.Code, To: owed.To}
		if msg != nil {
			if err := checkOutgoing(msg); err != nil {
				return err
			}
			if qid, err = enqueueTx(tx, msg, owed.At); err != nil {
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
		if _, err := tx.Exec(`UPDATE messages SET oops = ?, warnings = ? WHERE id = ?`,
			[]byte(jsonOrEmpty(r, "null")), jsonOrEmpty(warns, "[]"), owed.MessageID); err != nil {
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
	err := tx.QueryRow(`SELECT id, status, thread_id, errors, warnings FROM messages
		WHERE message_id = ? AND mailbox = ? AND direction = ? AND content_hash = ?`,
		mid, mailbox, dir, sum).Scan(&out.ID, &out.Status, &out.ThreadID, &errsJSON, &warnsJSON)
	if err != nil {
		return Outcome{}, fmt.Errorf("store: read earlier copy: %w", err)
	}
	out.Errors = decodeProblems(errsJSON)
	out.Warnings = decodeProblems(warnsJSON)
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
		WHERE envelopay_id = ? AND mailbox = ? AND type = 'offer' AND want_amount IS NOT NULL`, ref, in.Mailbox)
	if err != nil {
		return nil, fmt.Errorf("store: look up OFFER: %w", err)
	}
	defer rows.Close()
	var best refCandidate
	var want Asset
	for rows.Next() {
		var c refCandidate
		var sender, status string
		var w Asset
		if err := rows.Scan(&c.id, &sender, &status, &w.Amount, &w.Token, &w.Chain); err != nil {
			return nil, fmt.Errorf("store: look up OFFER: %w", err)
		}
		c.counterparty = slices.Contains(in.Recipients, sender)
		c.ok = status == StatusAccepted
		if best.id == 0 || c.better(best) {
			best, want = c, w
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: look up OFFER: %w", err)
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

func decodeProblems(s string) protocols.Problems {
	ps := protocols.Problems{}
	if s != "" {
		_ = json.Unmarshal([]byte(s), &ps) // written by jsonOrEmpty: always valid
	}
	return ps
}

// sortedKeys returns m's keys in order (deterministic ref lookups).
func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
