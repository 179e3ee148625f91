package store

import (
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// maxThreadRefs bounds how many header Message-IDs are looked up per
// message (a hostile References header can list thousands).
const maxThreadRefs = 64

// threadFor picks the thread of a new message: the thread of
// the earliest stored message among its own Message-ID, In-Reply-To and
// References (RFC 5322 §3.6.4); failing that, of the earliest message named
// by one of its typed refs (Envelopay v0.2.0 "Identifiers": order_ref,
// invoice_ref, offer_ref, which_ref, OOPS ref), preferring the
// counterparty's message (sent by one of this message's recipients), then
// an accepted one; failing that, a new thread id. So WHICH → METHODS →
// ORDER → INVOICE → PAY → FULFILL is one thread even when a client drops
// In-Reply-To.
//
// On SQLite the lookups name their index (INDEXED BY): without ANALYZE statistics
// SQLite prefers messages_mailbox (mailbox, id), which satisfies ORDER BY
// id but walks the whole mailbox when nothing matches — the common case,
// a new message's own Message-ID — and made ingest quadratic.
func threadFor(tx Tx, in *Incoming, sum []byte) (string, error) {
	seen := map[string]bool{}
	var mids []any
	add := func(m string) {
		if m != "" && !seen[m] && len(mids) < maxThreadRefs {
			seen[m] = true
			mids = append(mids, m)
		}
	}
	add(in.MessageID)
	for _, m := range in.InReplyTo {
		add(m)
	}
	// The first References entry is the thread's root; the last ones are
	// the nearest parents. Keep both ends when the list is long.
	refs := in.References
	if len(refs) > maxThreadRefs/2 {
		refs = append(append([]string{}, refs[:maxThreadRefs/4]...), refs[len(refs)-maxThreadRefs/4:]...)
	}
	for _, m := range refs {
		add(m)
	}
	if len(mids) > 0 {
		var id sql.NullInt64
		var t sql.NullString
		err := tx.QueryRow(tx.dialect().threadSQL(len(mids)), append(mids, in.Mailbox)...).Scan(&id, &t)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return "", fmt.Errorf("store: thread lookup: %w", err)
		}
		if id.Valid && t.String != "" {
			return t.String, nil
		}
	}
	best, err := refMatch(tx, in)
	if err != nil {
		return "", err
	}
	if best.thread != "" {
		return best.thread, nil
	}
	return newThreadID(in.MessageID, sum), nil
}

// refCandidate is a stored message named by a typed ref.
type refCandidate struct {
	id               int64
	thread           string
	counterparty, ok bool // sent by one of our recipients; accepted
}

// better orders the candidates for one ref: the counterparty's message,
// then an accepted one, then the earliest.
func (c refCandidate) better(d refCandidate) bool {
	if c.counterparty != d.counterparty {
		return c.counterparty
	}
	if c.ok != d.ok {
		return c.ok
	}
	return c.id < d.id
}

// refMatch picks, for each typed ref, its best message (better), and
// returns the earliest of those; zero when no ref names a stored message.
// The candidates come from one statement and are ordered here, which
// spares SQLite a temporary table per ref for the recipients and the sort.
func refMatch(tx Tx, in *Incoming) (refCandidate, error) {
	var ids []any
	seen := map[string]bool{}
	for _, k := range slices.Sorted(maps.Keys(in.Refs)) {
		if ref := in.Refs[k]; ref != "" && !seen[ref] && len(ids) < maxThreadRefs {
			seen[ref] = true
			ids = append(ids, ref)
		}
	}
	if len(ids) == 0 {
		return refCandidate{}, nil
	}
	rows, err := tx.Query(`SELECT envelopay_id, id, thread_id, sender, status FROM messages`+tx.dialect().eidIndex+`
		WHERE envelopay_id IN (`+placeholders(len(ids))+`) AND envelopay_id <> '' AND mailbox = ?`, append(ids, in.Mailbox)...)
	perRef := map[string]refCandidate{}
	if err := eachRow(rows, err, "store: thread lookup", func(sc scanner) error {
		var ref, sender, status string
		var c refCandidate
		if err := sc.Scan(&ref, &c.id, &c.thread, &sender, &status); err != nil {
			return err
		}
		c.counterparty = slices.Contains(in.Recipients, sender)
		c.ok = status == StatusAccepted
		if b, ok := perRef[ref]; !ok || c.better(b) {
			perRef[ref] = c
		}
		return nil
	}); err != nil {
		return refCandidate{}, err
	}
	var best refCandidate
	for _, c := range perRef {
		if c.thread != "" && (best.id == 0 || c.id < best.id) {
			best = c
		}
	}
	return best, nil
}

// placeholders is "?, ?, …" with n marks (n ≥ 1).
func placeholders(n int) string {
	return strings.Repeat("?, ", n-1) + "?"
}

// newThreadID names a new thread: "t_" and 16 hex digits of a hash of the
// root's Message-ID (or its content hash when it has none). The mailbox is
// not part of it: in relay mode one message sent is one thread, whatever
// the number of local copies (the sender's Sent copy, one per recipient
// mailbox). The hash input keeps the leading NUL that once followed the
// mailbox, so thread ids of the default mailbox ("") are unchanged.
func newThreadID(mid string, sum []byte) string {
	key := "mid\x00" + mid
	if mid == "" {
		key = "sha256\x00" + string(sum)
	}
	h := sha256.Sum256([]byte("\x00" + key))
	return "t_" + hex.EncodeToString(h[:8])
}
