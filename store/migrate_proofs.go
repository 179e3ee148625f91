package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/envelopd/envelopd/payments/proof"
)

// migrationSteps are the steps a migration's SQL cannot say, run after
// it in the same transaction, on both backends (bind rewrites the
// SQLite-style placeholders of a statement; args adapts its arguments).
var migrationSteps = map[int]func(ctx context.Context, tx *sql.Tx, bind func(string) string, args func([]any) []any) error{
	18: reidentifyProofs,
}

// runStep runs the Go step of migration version, if it has one.
func runStep(ctx context.Context, tx *sql.Tx, version int, bind func(string) string, args func([]any) []any) error {
	if f := migrationSteps[version]; f != nil {
		return f(ctx, tx, bind, args)
	}
	return nil
}

// oldProof is a proofs row with what migration 18 needs of its message.
type oldProof struct {
	dir, mailbox, fp string
	id               int64
	typ, sender      string
	result           []byte
	received         int64
}

// reidentifyProofs (migration 18) gives every stored proof its identity
// by transaction (package payments/proof) instead of by text. The rows
// are taken in message order and written again; a row whose new key an
// earlier message already holds is not rewritten: it is recorded in
// proof_collisions (kept_id names the earlier message), `envelopd
// payments collisions` lists it, and serve logs their number at start.
// Received messages with a stored proof get a payment row: unverified
// (they predate the checks), or duplicate for a collision. The messages
// themselves are not changed.
func reidentifyProofs(ctx context.Context, tx *sql.Tx, bind func(string) string, args func([]any) []any) error {
	// The old rows move aside (proofs_old, dropped at the end) and are
	// read back in batches by message id: a large database's parse
	// results are never all in memory at once.
	for _, q := range []string{
		`CREATE TABLE proofs_old AS SELECT direction, mailbox, fingerprint, message_id FROM proofs`,
		`CREATE INDEX proofs_old_id ON proofs_old (message_id)`,
		`DELETE FROM proofs`,
	} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("set old proofs aside: %w", err)
		}
	}
	m := migTx{ctx: ctx, tx: tx, bind: bind, args: args}
	now := time.Now().UTC().UnixNano()
	for after := int64(-1 << 63); ; {
		olds, err := m.oldProofBatch(after, int(proofBatch.Load()))
		if err != nil {
			return err
		}
		if len(olds) == 0 {
			break
		}
		after = olds[len(olds)-1].id
		if err := m.rewriteProofs(olds, now); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, `DROP TABLE proofs_old`); err != nil {
		return fmt.Errorf("drop old proofs: %w", err)
	}
	return nil
}

// proofBatch is how many old proofs migration 18 reads at once (tests
// make it small to cross batches).
var proofBatch = tunable(500)

// migTx is a migration's transaction with its backend's placeholders
// and arguments.
type migTx struct {
	ctx  context.Context
	tx   *sql.Tx
	bind func(string) string
	args func([]any) []any
}

func (m migTx) exec(q string, a ...any) (sql.Result, error) {
	return m.tx.ExecContext(m.ctx, m.bind(q), m.args(a)...)
}

func (m migTx) queryRow(q string, a ...any) *sql.Row {
	return m.tx.QueryRowContext(m.ctx, m.bind(q), m.args(a)...)
}

// oldProofBatch reads up to n set-aside proofs of messages after the id
// after, in message order, with what migration 18 needs of their messages.
func (m migTx) oldProofBatch(after int64, n int) ([]oldProof, error) {
	rows, err := m.tx.QueryContext(m.ctx, m.bind(`SELECT p.direction, p.mailbox, p.fingerprint, p.message_id, m.type, m.sender, m.result, m.received_at
		FROM proofs_old p JOIN messages m ON m.id = p.message_id WHERE p.message_id > ? ORDER BY p.message_id LIMIT ?`), m.args([]any{after, n})...)
	return collect(rows, err, "read proofs", func(sc scanner) (o oldProof, err error) {
		err = sc.Scan(&o.dir, &o.mailbox, &o.fp, &o.id, &o.typ, &o.sender, &o.result, &o.received)
		return o, err
	})
}

// rewriteProofs writes one batch of old proofs again under their new
// identity (reidentifyProofs).
func (m migTx) rewriteProofs(olds []oldProof, now int64) error {
	for _, o := range olds {
		result, err := raws.decodeResult(o.result)
		if err != nil {
			return fmt.Errorf("message %d: %w", o.id, err)
		}
		fp, facts := o.fp, proofOf(o.typ, result)
		if facts.id.Fingerprint != "" {
			fp = facts.id.Fingerprint
		}
		res, err := m.exec(`INSERT INTO proofs (direction, mailbox, fingerprint, message_id) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`,
			o.dir, o.mailbox, fp, o.id)
		if err != nil {
			return fmt.Errorf("rewrite proof of message %d: %w", o.id, err)
		}
		state, reason := PaymentUnverified, "stored before payments were checked"
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("rewrite proof of message %d: %w", o.id, err)
		} else if n == 0 {
			var kept int64
			if err := m.queryRow(`SELECT message_id FROM proofs WHERE direction = ? AND mailbox = ? AND fingerprint = ?`,
				o.dir, o.mailbox, fp).Scan(&kept); err != nil {
				return fmt.Errorf("read proof of message %d: %w", o.id, err)
			}
			if _, err := m.exec(`INSERT INTO proof_collisions (message_id, kept_id, fingerprint, found_at) VALUES (?, ?, ?, ?)`,
				o.id, kept, fp, now); err != nil {
				return fmt.Errorf("record proof collision: %w", err)
			}
			state, reason = PaymentDuplicate, fmt.Sprintf("the same transaction as message %d (found when proofs were identified by transaction)", kept)
		}
		if o.dir != DirIn {
			continue
		}
		if _, err := m.exec(`INSERT INTO payments (message_id, mailbox, sender, authenticated, chain, tx, token, amount,
			state, reason, next_check_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?) ON CONFLICT DO NOTHING`,
			o.id, o.mailbox, o.sender, false, facts.id.Chain, facts.id.Tx, facts.token, facts.amount, state, reason, o.received); err != nil {
			return fmt.Errorf("payment of message %d: %w", o.id, err)
		}
	}
	return nil
}

// storedProof is what a stored parse result says of its proof.
type storedProof struct {
	id            proof.Identity
	token, amount string
}

// proofOf reads the proof of a stored message from its parse result's
// body: chain and proof (PAY, ORDER, ACCEPT) or give's (OFFER). A result
// it cannot read gives the zero value.
func proofOf(typ string, result []byte) storedProof {
	var r struct {
		Body json.RawMessage `json:"body"`
	}
	if json.Unmarshal(result, &r) != nil || len(r.Body) == 0 {
		return storedProof{}
	}
	var b struct {
		Chain  string          `json:"chain"`
		Token  string          `json:"token"`
		Amount string          `json:"amount"`
		Proof  json.RawMessage `json:"proof"`
		Give   json.RawMessage `json:"give"`
	}
	if json.Unmarshal(r.Body, &b) != nil {
		return storedProof{}
	}
	if typ == "offer" {
		var g struct {
			Chain  string          `json:"chain"`
			Token  string          `json:"token"`
			Amount string          `json:"amount"`
			Proof  json.RawMessage `json:"proof"`
		}
		if json.Unmarshal(b.Give, &g) != nil {
			return storedProof{}
		}
		return storedProof{id: proof.Identify(g.Chain, g.Proof), token: g.Token, amount: g.Amount}
	}
	return storedProof{id: proof.Identify(b.Chain, b.Proof), token: b.Token, amount: b.Amount}
}
