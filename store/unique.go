package store

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/envelopd/envelopd/protocols"
)

// ZeroHash is the prev hash of the first link of a chain (Vacant P6: 32
// zero bytes, in hex).
const ZeroHash = "0000000000000000000000000000000000000000000000000000000000000000"

// takeUnique records the message's uniqueness facts, each with INSERT … ON
// CONFLICT so that the UNIQUE key, not a prior SELECT, decides: (sender,
// Envelopay id), proof fingerprint, protocol claims, chain links. It
// returns the conflicts as problems and whether a claim was a marked
// (harmless) replay. The caller undoes everything when the message is not
// accepted.
func takeUnique(tx Tx, id int64, dir string, in *Incoming, now time.Time) (protocols.Problems, bool, error) {
	var ps protocols.Problems
	replay := false
	if in.EnvelopayID != "" {
		res, err := tx.Exec(`INSERT INTO envelopay_ids (direction, mailbox, sender, envelopay_id, body_hash, message_id)
			VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`, dir, in.Mailbox, in.Sender, in.EnvelopayID, in.BodyFingerprint, id)
		if err != nil {
			return nil, false, fmt.Errorf("store: claim id: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return nil, false, fmt.Errorf("store: claim id: %w", err)
		} else if n == 0 {
			var prev int64
			var body, prevMID string
			if err := tx.QueryRow(`SELECT e.message_id, e.body_hash, m.message_id FROM envelopay_ids e
				JOIN messages m ON m.id = e.message_id
				WHERE e.direction = ? AND e.mailbox = ? AND e.sender = ? AND e.envelopay_id = ?`,
				dir, in.Mailbox, in.Sender, in.EnvelopayID).Scan(&prev, &body, &prevMID); err != nil {
				return nil, false, fmt.Errorf("store: read id claim: %w", err)
			}
			if in.BodyFingerprint != "" && body == in.BodyFingerprint {
				// A retry: the same content resent under a new
				// Message-ID (a lost 250, a naive smtplib retry). Every
				// other fact (proof, claims, links) is the earlier
				// message's, so nothing more is checked: no
				// duplicate_proof, no OOPS.
				p := protocols.New(protocols.CodeRetry, "id",
					"the same content with id %q from %s is already stored as <%s>; this resend is kept as a duplicate",
					in.EnvelopayID, in.Sender, prevMID)
				p.Ref = prevMID
				return protocols.Problems{p}, false, nil
			}
			ps = append(ps, repeated(tx, prev, protocols.CodeDuplicateID, "id",
				"id %q from %s was already used by %s", in.EnvelopayID, in.Sender))
		}
	}
	if in.ProofFingerprint != "" {
		prev, err := claimRow(tx, "proof",
			`INSERT INTO proofs (direction, mailbox, fingerprint, message_id)
			VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`,
			`SELECT message_id FROM proofs WHERE direction = ? AND mailbox = ? AND fingerprint = ?`,
			id, dir, in.Mailbox, in.ProofFingerprint)
		if err != nil {
			return nil, false, err
		}
		if prev != 0 {
			ps = append(ps, repeated(tx, prev, protocols.CodeDuplicateProof, "proof",
				"this payment proof was already presented in %s"))
		}
	}
	// Protocol state is per scope, like the two tables above: in relay
	// mode the Sent copy and each recipient's copy keep their own.
	scope := stateScope(dir, in.Mailbox)
	for _, c := range in.Claims {
		p, same, err := takeClaim(tx, scope, id, c, now)
		if err != nil {
			return nil, false, err
		}
		if p != nil {
			ps = append(ps, *p)
		} else if same {
			replay = true
		}
	}
	for _, c := range in.Checks {
		p, err := checkState(tx, scope, c)
		if err != nil {
			return nil, false, err
		}
		if p != nil {
			ps = append(ps, *p)
		}
	}
	for _, st := range in.Sets {
		if err := setState(tx, scope, id, st); err != nil {
			return nil, false, err
		}
	}
	for _, l := range in.Links {
		p, err := takeLink(tx, scope, id, l)
		if err != nil {
			return nil, false, err
		}
		if p != nil {
			ps = append(ps, *p)
		}
	}
	return ps, replay, nil
}

// hasProtocolFacts reports whether in carries tunnelled-protocol facts
// (claims, state checks and sets, chain links) besides its Envelopay id
// and proof.
func hasProtocolFacts(in *Incoming) bool {
	return len(in.Claims) > 0 || len(in.Checks) > 0 || len(in.Sets) > 0 || len(in.Links) > 0
}

// undoPlainFacts removes what takeUnique took for message id when it has
// no protocol facts — its Envelopay id and proof rows, each by its key
// and only if id holds it — for a message that ends up not accepted.
func undoPlainFacts(tx Tx, id int64, dir string, in *Incoming) error {
	if in.EnvelopayID != "" {
		if _, err := tx.Exec(`DELETE FROM envelopay_ids WHERE direction = ? AND mailbox = ? AND sender = ? AND envelopay_id = ? AND message_id = ?`,
			dir, in.Mailbox, in.Sender, in.EnvelopayID, id); err != nil {
			return fmt.Errorf("store: give back id: %w", err)
		}
	}
	if in.ProofFingerprint != "" {
		if _, err := tx.Exec(`DELETE FROM proofs WHERE direction = ? AND mailbox = ? AND fingerprint = ? AND message_id = ?`,
			dir, in.Mailbox, in.ProofFingerprint, id); err != nil {
			return fmt.Errorf("store: give back proof: %w", err)
		}
	}
	return nil
}

// claimRow inserts message id's uniqueness row (insert takes key, then
// id, and does nothing on conflict) and returns 0 when the row is new, or
// the stored message that already holds the key (holder takes key). what
// names the claim in errors.
func claimRow(tx Tx, what, insert, holder string, id int64, key ...any) (int64, error) {
	res, err := tx.Exec(insert, append(key[:len(key):len(key)], id)...)
	if err != nil {
		return 0, fmt.Errorf("store: claim %s: %w", what, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return 0, fmt.Errorf("store: claim %s: %w", what, err)
	} else if n == 1 {
		return 0, nil
	}
	var prev int64
	if err := tx.QueryRow(holder, key...).Scan(&prev); err != nil {
		return 0, fmt.Errorf("store: read %s claim: %w", what, err)
	}
	return prev, nil
}

// takeClaim records c. A live claim with the same value is a replay (an
// OnSame problem, or only a marked replay when OnSame is ""); with another
// value a conflict (OnConflict, or nothing when ""). A claim whose window
// ended before now is replaced.
func takeClaim(tx Tx, scope string, id int64, c protocols.Claim, now time.Time) (*protocols.Problem, bool, error) {
	k := tx.dialect().key
	var expires int64
	if c.Window > 0 {
		expires = now.Add(time.Duration(c.Window) * time.Second).UnixNano()
	}
	res, err := tx.Exec(`INSERT INTO claims (scope, kind, key, value, message_id, created_at, expires_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (scope, kind, key) DO UPDATE SET value = excluded.value, message_id = excluded.message_id,
			created_at = excluded.created_at, expires_at = excluded.expires_at
		WHERE claims.expires_at != 0 AND claims.expires_at <= excluded.created_at`,
		scope, c.Kind, k(c.Key), k(c.Value), id, now.UnixNano(), expires)
	if err != nil {
		return nil, false, fmt.Errorf("store: claim %s: %w", c.Kind, err)
	}
	// A new claim or a replaced expired one changes one row; a live
	// claim changes none.
	if n, err := res.RowsAffected(); err != nil {
		return nil, false, fmt.Errorf("store: claim %s: %w", c.Kind, err)
	} else if n > 0 {
		return nil, false, nil
	}
	var value string
	var prev int64
	if err := tx.QueryRow(`SELECT value, message_id FROM claims WHERE scope = ? AND kind = ? AND key = ?`, scope, c.Kind, k(c.Key)).
		Scan(&value, &prev); err != nil {
		return nil, false, fmt.Errorf("store: read claim %s: %w", c.Kind, err)
	}
	if value == c.Value {
		if c.OnSame == "" {
			return nil, true, nil
		}
		p := repeated(tx, prev, c.OnSame, "", "%s already seen in %s", c.Kind)
		return &p, true, nil
	}
	if c.OnConflict == "" {
		return nil, false, nil
	}
	p := repeated(tx, prev, c.OnConflict, "", "%s already used with different content by %s", c.Kind)
	return &p, false, nil
}

// takeLink appends l to its chain (Vacant P6 replay_protect): seq must be
// tip+1 and prev the tip's hash (seq 1: ZeroHash). A lower or equal seq is
// replay_detected; a wrong prev, or a seq that skips ahead, is chain_fork.
// The (chain, seq) primary key makes two accepted links with one seq
// impossible.
func takeLink(tx Tx, scope string, id int64, l protocols.Link) (*protocols.Problem, error) {
	tip, hash, err := chainTip(tx, scope, l.Chain)
	if err != nil {
		return nil, err
	}
	switch {
	case l.Seq <= tip:
		p := protocols.New(protocols.CodeReplayDetected, "seq", "seq %d is not after the chain tip %d", l.Seq, tip)
		return &p, nil
	case l.Seq != tip+1:
		p := protocols.New(protocols.CodeChainFork, "seq", "seq %d skips ahead of the chain tip %d", l.Seq, tip)
		return &p, nil
	case !strings.EqualFold(l.Prev, hash):
		p := protocols.New(protocols.CodeChainFork, "prev", "prev %s is not the chain tip's hash %s", l.Prev, hash)
		return &p, nil
	}
	res, err := tx.Exec(`INSERT INTO chain_links (scope, chain, seq, prev, hash, message_id) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT DO NOTHING`, scope, l.Chain, l.Seq, strings.ToLower(l.Prev), strings.ToLower(l.Hash), id)
	if err != nil {
		return nil, fmt.Errorf("store: append chain link: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		p := protocols.New(protocols.CodeReplayDetected, "seq", "seq %d is already in the chain", l.Seq)
		return &p, nil
	}
	return nil, nil
}

// checkState reads (Kind, Key) and reports c's code unless it holds Want.
func checkState(tx Tx, scope string, c protocols.StateCheck) (*protocols.Problem, error) {
	var value string
	err := tx.QueryRow(`SELECT value FROM states WHERE scope = ? AND kind = ? AND key = ?`, scope, c.Kind, tx.dialect().key(c.Key)).Scan(&value)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: read state %s: %w", c.Kind, err)
	}
	if value == c.Want {
		return nil, nil
	}
	code, ok := c.Codes[value]
	if !ok {
		code = c.Default
	}
	if value == "" {
		value = "none"
	}
	p := protocols.New(code, "", "%s %s is %s, not %s", c.Kind, c.Key, value, c.Want)
	return &p, nil
}

// setState writes (Kind, Key) = Value unless the current value is in Keep.
// Like every uniqueness fact it is undone when the message is not accepted.
func setState(tx Tx, scope string, id int64, st protocols.StateSet) error {
	k := tx.dialect().key
	if st.If != nil {
		ok, err := tallyResolved(tx, scope, st.If)
		if err != nil || !ok {
			return err
		}
	}
	var cur string
	err := tx.QueryRow(`SELECT value FROM states WHERE scope = ? AND kind = ? AND key = ?`, scope, st.Kind, k(st.Key)).Scan(&cur)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("store: read state %s: %w", st.Kind, err)
	}
	for _, k := range st.Keep {
		if cur == k {
			return nil
		}
	}
	_, err = tx.Exec(`INSERT INTO states (scope, kind, key, value, message_id) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (scope, kind, key) DO UPDATE SET value = excluded.value, message_id = excluded.message_id`,
		scope, st.Kind, k(st.Key), k(st.Value), id)
	if err != nil {
		return fmt.Errorf("store: set state %s: %w", st.Kind, err)
	}
	return nil
}

// tallyResolved reads the claims (and states) t names, by key range in
// the scope, and asks t.Rule. It runs in the ingest transaction, after
// the message's claims are taken.
func tallyResolved(tx Tx, scope string, t *protocols.Tally) (bool, error) {
	claims, err := readRange(tx, "claims", scope, t.Kind, t.Prefix)
	if err != nil {
		return false, err
	}
	var states map[string]string
	if t.StateKind != "" {
		if states, err = readRange(tx, "states", scope, t.StateKind, t.StatePrefix); err != nil {
			return false, err
		}
	}
	return t.Rule != nil && t.Rule.Resolved(claims, states), nil
}

// readRange returns key (without prefix) → value of the rows of table
// (claims or states) of kind whose key starts with prefix: a range on the
// (scope, kind, key) key, not LIKE (keys hold any bytes).
func readRange(tx Tx, table, scope, kind, prefix string) (map[string]string, error) {
	q := `SELECT key, value FROM ` + table + ` WHERE scope = ? AND kind = ? AND key >= ?`
	k := tx.dialect().key
	args := []any{scope, kind, k(prefix)}
	if end, ok := prefixEnd(prefix); ok {
		q += ` AND key < ?`
		args = append(args, k(end))
	}
	out := map[string]string{}
	rows, err := tx.Query(q, args...)
	if err := eachRow(rows, err, fmt.Sprintf("store: read %s %s", table, kind), func(sc scanner) error {
		var k, v string
		if err := sc.Scan(&k, &v); err != nil {
			return err
		}
		if strings.HasPrefix(k, prefix) {
			out[k[len(prefix):]] = v
		}
		return nil
	}); err != nil {
		return nil, err
	}
	return out, nil
}

// prefixEnd is the least string greater than every string starting with
// prefix (false: there is none, prefix being empty or all 0xff bytes).
func prefixEnd(prefix string) (string, bool) {
	b := []byte(prefix)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1]), true
		}
	}
	return "", false
}

// stateScope names where a message's protocol state lives: its direction
// and mailbox (migration 6).
func stateScope(dir, mailbox string) string { return dir + "\n" + mailbox }

type queryRower interface {
	QueryRow(query string, args ...any) *sql.Row
}

func chainTip(q queryRower, scope, chain string) (int64, string, error) {
	return scanTip(q.QueryRow(`SELECT seq, hash FROM chain_links WHERE scope = ? AND chain = ? ORDER BY seq DESC LIMIT 1`, scope, chain),
		"read chain tip")
}

// scanTip reads a chain's highest link (seq, hash); a chain with none is
// at seq 0, ZeroHash. Errors say op ("store: chain tip: …").
func scanTip(row *sql.Row, op string) (int64, string, error) {
	var seq int64
	var hash string
	err := row.Scan(&seq, &hash)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, ZeroHash, nil
	}
	if err != nil {
		return 0, "", fmt.Errorf("store: %s: %w", op, err)
	}
	return seq, hash, nil
}

// repeated is the problem code on field that a fact of the earlier
// message prev is repeated: format's last verb is given the earlier
// message's name (earlier), and Ref its Message-ID.
func repeated(tx Tx, prev int64, code protocols.Code, field, format string, args ...any) protocols.Problem {
	what, ref := earlier(tx, prev)
	p := protocols.New(code, field, format, append(args, what)...)
	p.Ref = ref
	return p
}

// earlier names the stored message id for a problem's text by what its
// sender knows — its Envelopay id and Message-ID — never by the internal
// row id (problem texts reach peers in courtesy OOPS), and
// returns its Message-ID for the problem's ref ("" when it has none).
func earlier(tx Tx, id int64) (string, string) {
	var eid, mid string
	if err := tx.QueryRow(`SELECT envelopay_id, message_id FROM messages WHERE id = ?`, id).Scan(&eid, &mid); err != nil {
		return "an earlier message", ""
	}
	switch {
	case eid != "" && mid != "":
		return fmt.Sprintf("the earlier message %s (Message-ID <%s>)", eid, mid), mid
	case eid != "":
		return "the earlier message " + eid, ""
	case mid != "":
		return fmt.Sprintf("the earlier message <%s>", mid), mid
	}
	return "an earlier message", ""
}

// MaxKeyBytes bounds each value a message's uniqueness facts are keyed
// on: its Envelopay id and sender, claim keys, state keys, chain names.
// Longer ones cannot be meant (ids are short tokens), and an index keeps
// them only up to a size (Postgres btree: about 2.7 KB), so such a
// message takes no fact and is quarantined with invalid_field instead of
// failing its ingest.
const MaxKeyBytes = 1024

// oversizeKeys reports in's key values longer than MaxKeyBytes.
func oversizeKeys(in *Incoming) protocols.Problems {
	var ps protocols.Problems
	check := func(field, what, v string) {
		if len(v) > MaxKeyBytes {
			ps = append(ps, protocols.New(protocols.CodeInvalidField, field,
				"%s is %d bytes long, more than the %d a key may have", what, len(v), MaxKeyBytes))
		}
	}
	if in.EnvelopayID != "" {
		check("id", "the id", in.EnvelopayID)
		check("from", "the sender", in.Sender)
	}
	check("proof", "the proof fingerprint", in.ProofFingerprint)
	for _, c := range in.Claims {
		check("", c.Kind+" key", c.Key)
	}
	for _, c := range in.Checks {
		check("", c.Kind+" key", c.Key)
	}
	for _, st := range in.Sets {
		check("", st.Kind+" key", st.Key)
	}
	for _, l := range in.Links {
		check("", "the chain name", l.Chain)
	}
	return ps
}
