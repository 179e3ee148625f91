package store

import (
	"context"
	"database/sql"
	"fmt"
)

// wtx is the batch transaction as the writes see it: the writer's own
// connection between BEGIN IMMEDIATE and COMMIT. Its Exec, Query and
// QueryRow run statements prepared once on that connection and cached
// (parsing SQL dominated the ingest profile). Only the writer goroutine
// uses it, so the cache needs no lock.
//
// The transaction is plain SQL on a dedicated *sql.Conn rather than a
// *sql.Tx: database/sql gives every *sql.Tx a cancellable context, and
// every Query in one then starts a goroutine to watch it, re-wraps the
// statement (Tx.Stmt) and closes the wrapper at commit — about a third
// of the writer's time per message in the ingest profile. Nothing else
// uses the connection, so database/sql need not know about the
// transaction.
type wtx struct {
	conn   *sql.Conn
	stmts  map[string]*sql.Stmt
	queue  bool // the batch queued mail (QueueChanged)
	stored bool // the batch stored messages (WaitNew, MessagesChanged)
	// caught counts the message ids whose received events this
	// transaction wrote (core.catchUpStep, core.writeLogged), so that
	// the writes of one batch share one step's bound.
	caught int64
	// lists caches, for the transaction, whether any inbound (receive or
	// reply) list entry exists (receivedAs asks once per message): 0
	// not known, 1 none, 2 some. A write to the lists forgets it.
	lists int8
	// frame is the buffer of the raw bytes' frames, reused from message
	// to message: the driver copies what it binds (up to maxFrameBuffer).
	frame []byte
}

// maxFrameBuffer bounds the frame buffer the writer keeps between
// messages.
const maxFrameBuffer = 256 << 10

// inboundLists is the transaction's cache of whether inbound lists exist.
func (w *wtx) inboundLists() *int8 { return &w.lists }

// caughtUp adds n to the message ids this transaction's event log
// catch-ups cover and returns the total.
func (w *wtx) caughtUp(n int64) int64 {
	w.caught += n
	return w.caught
}

func (w *wtx) stmt(q string) (*sql.Stmt, error) {
	if st, ok := w.stmts[q]; ok {
		return st, nil
	}
	st, err := w.conn.PrepareContext(context.Background(), q)
	if err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	w.stmts[q] = st
	return st, nil
}

// close releases the cached statements (writer exit).
func (w *wtx) close() {
	for q, st := range w.stmts {
		st.Close()
		delete(w.stmts, q)
	}
}

// Exec runs a cached statement in the transaction.
func (w *wtx) Exec(q string, args ...any) (sql.Result, error) {
	st, err := w.stmt(q)
	if err != nil {
		return nil, err
	}
	return st.Exec(args...)
}

// Query runs a cached statement in the transaction.
func (w *wtx) Query(q string, args ...any) (*sql.Rows, error) {
	st, err := w.stmt(q)
	if err != nil {
		return nil, err
	}
	return st.Query(args...)
}

// QueryRow runs a cached statement in the transaction.
func (w *wtx) QueryRow(q string, args ...any) *sql.Row {
	st, err := w.stmt(q)
	if err != nil {
		// Let Scan report the error: unprepared, the query fails the
		// same way.
		return w.conn.QueryRowContext(context.Background(), q, args...)
	}
	return st.QueryRow(args...)
}

// InsertMessage implements Tx: Exec, not RETURNING (no result set to set
// up and tear down); a conflict (exact redelivery) changes no row.
func (w *wtx) InsertMessage(raw []byte, args ...any) (int64, bool, error) {
	res, err := w.Exec(insertMessageSQL+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (message_id, mailbox, direction, content_hash) DO NOTHING`, args...)
	if err != nil {
		return 0, false, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return 0, false, err
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, false, err
	}
	w.stored = true
	z, codec := raws.encodeTo(w.frame, raw)
	_, err = w.Exec(`INSERT INTO message_raw (message_id, raw, codec) VALUES (?, ?, ?)`, id, z, codec)
	if codec != codecNone && cap(z) <= maxFrameBuffer {
		w.frame = z[:0]
	}
	if err != nil {
		return 0, false, fmt.Errorf("insert raw: %w", err)
	}
	return id, true, nil
}

// Lock implements Tx: SQLite has one writer, so every write transaction
// is already serialised.
func (w *wtx) Lock(string) error { return nil }

func (w *wtx) queued() { w.queue = true }

func (w *wtx) dialect() *dialect { return sqliteDialect }
