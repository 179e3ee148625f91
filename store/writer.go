package store

import (
	"context"
	"errors"
	"fmt"
	"runtime"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// op is one write submitted to the writer goroutine. fn runs inside the
// batch transaction (see commit: a failing fn is undone by running the
// batch again without it); done receives its result only after the
// transaction committed (or failed).
type op struct {
	ctx  context.Context
	fn   func(tx *wtx) error
	done chan error
}

// write runs fn in the writer goroutine and returns after the transaction
// holding it is durable. fn may run together with other writes in one
// transaction (group commit); an error from fn undoes only fn's writes.
func (s *SQLite) write(ctx context.Context, fn func(tx *wtx) error) error {
	o := &op{ctx: ctx, fn: fn, done: make(chan error, 1)}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return ErrClosed
	}
	select {
	case s.ops <- o:
	case <-s.quit:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-o.done:
		return err
	case <-s.done:
		// The writer has exited (Close): it answered o before leaving,
		// or o arrived too late to be taken.
		select {
		case err := <-o.done:
			return err
		default:
			return ErrClosed
		}
	case <-ctx.Done():
		// The write may still commit; callers that need certainty retry,
		// and exact redelivery makes the retry harmless.
		return ctx.Err()
	}
}

// writer is the single writer goroutine: it takes whatever writes are
// waiting (up to MaxBatch, with no artificial delay), runs them in one
// transaction, commits once, and only then answers each of them.
func (s *SQLite) writer() {
	defer close(s.done)
	// The writer's connection for its whole life (see wtx). s.w has
	// exactly one connection and nothing else takes it once the writer
	// runs.
	conn, err := s.w.Conn(context.Background())
	if err != nil {
		s.refuseAll(fmt.Errorf("store: writer connection: %w", err))
		return
	}
	tx := &wtx{conn: conn, stmts: s.stmts}
	defer conn.Close()
	defer tx.close()
	batch := make([]*op, 0, s.opts.MaxBatch)
	for {
		batch = batch[:0]
		select {
		case o := <-s.ops:
			batch = append(batch, o)
		case <-s.quit:
			// Finish what was submitted before Close.
			for {
				select {
				case o := <-s.ops:
					batch = append(batch, o)
					if len(batch) == cap(batch) {
						s.commit(tx, batch)
						batch = batch[:0]
					}
				default:
					if len(batch) > 0 {
						s.commit(tx, batch)
					}
					return
				}
			}
		}
		// Let callers answered by the last commit, already runnable,
		// submit their next write before the batch is cut: a yield, not
		// a timer, so an idle store commits a lone write at once.
		runtime.Gosched()
	fill:
		for len(batch) < s.opts.MaxBatch {
			select {
			case o := <-s.ops:
				batch = append(batch, o)
			default:
				break fill
			}
		}
		s.commit(tx, batch)
	}
}

// Stats are cumulative writer counters (for metrics and benchmarks).
type Stats struct {
	Commits int64 // transactions committed (each one fsync)
	Writes  int64 // writes (Ingest, Enqueue, …) committed in them
}

// Stats returns the writer counters; Writes/Commits is the mean group
// commit size.
func (s *SQLite) Stats() Stats {
	return Stats{Commits: s.commits.Load(), Writes: s.writes.Load()}
}

// commit runs one batch as one transaction. The ops run one after the
// other with no savepoint of their own (two statements and a sub-journal
// copy of every page they touch: measurable ingest CPU). When one
// fails (or panics) the whole transaction is rolled back and the batch
// runs once more, the failed op left out and each other op under its own
// savepoint: a failing write undoes only itself, never reaches the
// others' results, and however many fail a batch runs at most twice.
// Ops must therefore be re-runnable, as on Postgres, which retries a
// transaction that failed to serialise: a write function sets its
// results afresh on each run.
func (s *SQLite) commit(tx *wtx, batch []*op) {
	errs := make([]error, len(batch))
	failed, err := s.try(tx, batch, errs, false)
	if err == nil && failed {
		_, err = s.try(tx, batch, errs, true)
	}
	if err != nil {
		// BEGIN or COMMIT failed: nothing of the batch is durable.
		for i, o := range batch {
			if errs[i] == nil {
				errs[i] = err
			}
			o.done <- errs[i]
		}
		return
	}
	s.commits.Add(1)
	s.writes.Add(int64(len(batch)))
	if s.afterCommit != nil {
		s.afterCommit(tx)
	}
	// Wake WaitNew and the hand-off workers only after a batch that
	// stored messages: they write (claims), and a wake on every commit
	// would wake them on their own.
	if tx.stored {
		s.notify()
	}
	if tx.queue {
		s.notifyQueue()
	}
	tx.stored, tx.queue = false, false
	for i, o := range batch {
		o.done <- errs[i]
	}
}

// try runs the ops of batch not failed yet (errs[i] == nil) in one
// transaction and commits it. Without savepoints, the first op that
// fails has its error recorded, everything is rolled back and try
// returns failed true; with them (safe), an op that fails is rolled back
// to its savepoint and the others go on. err is a failed BEGIN, COMMIT
// or rollback.
func (s *SQLite) try(tx *wtx, batch []*op, errs []error, safe bool) (failed bool, err error) {
	tx.stored, tx.queue, tx.caught, tx.lists = false, false, 0, 0
	if _, err := tx.Exec("BEGIN IMMEDIATE"); err != nil {
		return false, fmt.Errorf("store: begin: %w", err)
	}
	for i, o := range batch {
		if errs[i] != nil {
			continue
		}
		if err := o.ctx.Err(); err != nil {
			errs[i] = err
			continue
		}
		if safe {
			if errs[i], err = s.runOpSavepoint(tx, o); err != nil {
				tx.Exec("ROLLBACK")
				return false, err
			}
			continue
		}
		if errs[i] = s.runOp(tx, o); errs[i] != nil {
			if _, rerr := tx.Exec("ROLLBACK"); rerr != nil {
				return false, fmt.Errorf("store: rollback after a failed write: %w", rerr)
			}
			return true, nil
		}
	}
	if _, err := tx.Exec("COMMIT"); err != nil {
		// A failed COMMIT may leave the transaction open (SQLITE_BUSY) or
		// have rolled it back already (I/O error); either way nothing of
		// the batch is durable, and the next BEGIN must find no
		// transaction.
		tx.Exec("ROLLBACK")
		return false, fmt.Errorf("store: commit: %w", err)
	}
	return false, nil
}

// runOpSavepoint runs o under its own savepoint: opErr is o's failure,
// whose writes are undone; err is a savepoint statement that failed (the
// transaction is then lost).
func (s *SQLite) runOpSavepoint(tx *wtx, o *op) (opErr, err error) {
	if _, err := tx.Exec("SAVEPOINT op"); err != nil {
		return nil, fmt.Errorf("store: savepoint: %w", err)
	}
	if opErr = s.runOp(tx, o); opErr != nil {
		if _, err := tx.Exec("ROLLBACK TO op"); err != nil {
			return opErr, fmt.Errorf("store: rollback to savepoint: %w", err)
		}
	}
	if _, err := tx.Exec("RELEASE op"); err != nil {
		return opErr, fmt.Errorf("store: release savepoint: %w", err)
	}
	return opErr, nil
}

// refuseAll answers every write with err until Close (the writer could
// not start).
func (s *SQLite) refuseAll(err error) {
	for {
		select {
		case o := <-s.ops:
			o.done <- err
		case <-s.quit:
			for {
				select {
				case o := <-s.ops:
					o.done <- err
				default:
					return
				}
			}
		}
	}
}

// runOp runs one op, turning a panic into its error and a broken UNIQUE
// key into ErrConflict.
func (s *SQLite) runOp(tx *wtx, o *op) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("store: write panicked: %v", r)
		}
	}()
	if err := o.fn(tx); err != nil {
		var se *sqlite.Error
		if errors.As(err, &se) && (se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY) &&
			!errors.Is(err, ErrConflict) {
			return fmt.Errorf("%w: %w", ErrConflict, err)
		}
		return err
	}
	return nil
}
