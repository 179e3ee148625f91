package store

import (
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
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
// The lookups name their index (INDEXED BY): without ANALYZE statistics
// SQLite prefers messages_mailbox (mailbox, id), which satisfies ORDER BY
// id but walks the whole mailbox when nothing matches — the common case,
// a new message's own Message-ID — and made ingest quadratic.
func threadFor(tx *wtx, in *Incoming, sum []byte, rcpts string) (string, error) {
	best := int64(0)
	thread := ""
	consider := func(id int64, t string) {
		if t != "" && (best == 0 || id < best) {
			best, thread = id, t
		}
	}
	seen := map[string]bool{}
	var mids []string
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
	for _, m := range mids {
		var id int64
		var t string
		err := tx.QueryRow(`SELECT id, thread_id FROM messages INDEXED BY messages_copy
			WHERE message_id = ? AND mailbox = ? ORDER BY id LIMIT 1`, m, in.Mailbox).Scan(&id, &t)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("store: thread lookup: %w", err)
		}
		consider(id, t)
	}
	if thread != "" {
		return thread, nil
	}
	for _, k := range sortedKeys(in.Refs) {
		ref := in.Refs[k]
		if ref == "" {
			continue
		}
		var id int64
		var t string
		err := tx.QueryRow(`SELECT id, thread_id FROM messages INDEXED BY messages_eid
			WHERE envelopay_id = ? AND mailbox = ?
			ORDER BY sender IN (SELECT value FROM json_each(?)) DESC, status = 'accepted' DESC, id
			LIMIT 1`, ref, in.Mailbox, rcpts).Scan(&id, &t)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("store: thread lookup: %w", err)
		}
		consider(id, t)
	}
	if thread != "" {
		return thread, nil
	}
	return newThreadID(in.Mailbox, in.MessageID, sum), nil
}

// newThreadID names a new thread: "t_" and 16 hex digits of a hash of the
// mailbox and the root's Message-ID (or its content hash when it has none).
func newThreadID(mailbox, mid string, sum []byte) string {
	key := "mid\x00" + mid
	if mid == "" {
		key = "sha256\x00" + string(sum)
	}
	h := sha256.Sum256([]byte(mailbox + "\x00" + key))
	return "t_" + hex.EncodeToString(h[:8])
}
