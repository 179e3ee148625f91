package store

import (
	"database/sql"
	"fmt"
)

// wtx is the batch transaction as the writes see it. Its Exec, Query and
// QueryRow run statements prepared once on the writer connection and
// cached (parsing SQL dominated the ingest profile). Only the writer
// goroutine uses it, so the cache needs no lock.
type wtx struct {
	tx    *sql.Tx
	stmts map[string]*sql.Stmt
	// missed are queries not in the cache yet: the single writer
	// connection is busy with tx, so they run unprepared now and are
	// prepared after the commit (prepareMissed).
	missed map[string]bool
}

func (w *wtx) stmt(q string) (*sql.Stmt, error) {
	st, ok := w.stmts[q]
	if !ok {
		w.missed[q] = true
		st, err := w.tx.Prepare(q)
		if err != nil {
			return nil, fmt.Errorf("prepare: %w", err)
		}
		return st, nil
	}
	return w.tx.Stmt(st), nil
}

// prepareMissed fills the cache with the queries a batch missed; it runs
// when the writer connection is free.
func (s *SQLite) prepareMissed(missed map[string]bool) {
	for q := range missed {
		if st, err := s.w.Prepare(q); err == nil {
			s.stmts[q] = st
		}
		delete(missed, q)
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
		return w.tx.QueryRow(q, args...)
	}
	return st.QueryRow(args...)
}
