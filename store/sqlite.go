package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"modernc.org/sqlite" // registers the "sqlite" driver
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/envelopd/envelopd/internal/defaults"
)

// ErrClosed is returned by every method of a closed SQLite store.
var ErrClosed = errors.New("store: closed")

// Options tune OpenSQLiteOptions. The zero value is what OpenSQLite uses.
type Options struct {
	// BusyTimeout is SQLite's busy_timeout (another process holding the
	// write lock, e.g. `envelopd send` next to `envelopd serve`).
	// Default 5 s.
	BusyTimeout time.Duration
	// MaxBatch caps how many waiting writes share one transaction (group
	// commit). Default 256.
	MaxBatch int
	// Readers is the size of the read connection pool. Default 4.
	Readers int
	// PollInterval is how often WaitNew looks for rows written by other
	// processes. Default 200 ms.
	PollInterval time.Duration
}

func (o *Options) defaults() {
	defaults.Positive(&o.BusyTimeout, 5*time.Second)
	defaults.Positive(&o.MaxBatch, 256)
	defaults.Positive(&o.Readers, 4)
	defaults.Positive(&o.PollInterval, 200*time.Millisecond)
}

// SQLite is the Store backed by one SQLite database file (modernc.org/sqlite,
// pure Go). It has exactly one writer connection, owned by a single writer
// goroutine that commits waiting writes in groups (one transaction, one
// fsync; a failing write is undone by running the others again), and a separate pool of
// read-only connections; WAL lets the readers run during commits.
type SQLite struct {
	*core
	rooms
	path string
	opts Options
	w    *sql.DB // one connection, used only by the writer goroutine
	rdb  *sql.DB // read-only pool

	stmts  map[string]*sql.Stmt // writer statement cache (writer goroutine only)
	missed map[string]bool

	ops  chan *op
	done chan struct{}

	commits, writes atomic.Int64
	// afterCommit, when set (tests), runs in the writer after each
	// committed transaction.
	afterCommit func(tx *wtx)
}

// sqliteIs is the condition that column col holds v (dialect midIs and
// threadIs: SQLite's indexes keep the value itself).
func sqliteIs(col, v string) (string, []any) { return col + ` = ?`, []any{v} }

// sqliteDialect is SQLite's SQL (see dialect).
var sqliteDialect = &dialect{
	name:      "sqlite",
	eidIndex:  " INDEXED BY messages_eid",
	copyIndex: " INDEXED BY messages_copy",
	// min(id) makes SQLite take thread_id from the earliest matching
	// row (a bare column of a min() aggregate), and always yields one
	// row.
	threadSQL: func(n int) string {
		return `SELECT min(id), thread_id FROM messages INDEXED BY messages_copy
			WHERE message_id IN (` + placeholders(n) + `) AND mailbox = ?`
	},
	midIs:      sqliteIs,
	threadIs:   sqliteIs,
	emptyBlob:  "x''",
	greatest:   "max",
	key:        func(s string) any { return s },
	instr:      "instr",
	search:     sqliteSearch,
	searchWalk: sqliteSearchWalk,
	indexSearch: []string{
		`INSERT INTO message_fts (rowid, subject, note)
			SELECT id, subject, coalesce(note, CASE WHEN result IS NOT NULL AND json_valid(CAST(result AS TEXT))
				THEN json_extract(CAST(result AS TEXT), '$.note') END)
			FROM messages WHERE id > max(?, (SELECT id FROM search_floor)) AND id <= ?`,
		`INSERT OR IGNORE INTO message_tags (tag, message_id)
			SELECT t, id FROM (
				SELECT 'status:' || status AS t, id FROM messages WHERE id > max(?1, (SELECT id FROM search_floor)) AND id <= ?2
				UNION ALL SELECT 'type:' || type, id FROM messages WHERE type != '' AND id > max(?1, (SELECT id FROM search_floor)) AND id <= ?2
				UNION ALL SELECT 'sender:' || sender, id FROM messages WHERE sender != '' AND id > max(?1, (SELECT id FROM search_floor)) AND id <= ?2
				UNION ALL SELECT j.value, m.id FROM messages m,
					json_each(CASE WHEN json_valid(m.codes) THEN m.codes ELSE '[]' END) j
					WHERE m.id > max(?1, (SELECT id FROM search_floor)) AND m.id <= ?2
				UNION ALL SELECT 'code:' || json_extract(j.value, '$.code'), m.id FROM messages m,
					json_each(CASE WHEN json_valid(m.errors) THEN m.errors ELSE '[]' END) j
					WHERE m.id > max(?1, (SELECT id FROM search_floor)) AND m.id <= ?2
				UNION ALL SELECT 'code:' || json_extract(j.value, '$.code'), m.id FROM messages m,
					json_each(CASE WHEN json_valid(m.warnings) THEN m.warnings ELSE '[]' END) j
					WHERE m.id > max(?1, (SELECT id FROM search_floor)) AND m.id <= ?2
			) WHERE t IS NOT NULL`,
	},
	tagCount: `SELECT count(*) FROM (SELECT 1 FROM message_tags WHERE tag = ? LIMIT ?) AS t`,
	tagged:   `m.id IN (SELECT message_id FROM message_tags WHERE tag = ?)`,
	codes: func(tags []string) any {
		if len(tags) == 0 {
			return nil
		}
		return jsonOrEmpty(tags, "[]")
	},
	eventsLag:    `SELECT coalesce((SELECT max(id) FROM messages), 0) > (SELECT id FROM event_sync)`,
	eventsBehind: `SELECT coalesce((SELECT max(id) FROM messages), 0) - (SELECT id FROM event_sync)`,
	syncEvents:   `UPDATE event_sync SET id = id + ?`,
	logEvent: []string{
		`INSERT INTO api_events (type, inbox, message_id, detail, created_at) SELECT ?, ?, 0, ?, ?
			WHERE (SELECT id FROM event_sync) >= coalesce((SELECT max(id) FROM messages), 0)`,
		`INSERT INTO api_events_staged (pos, type, inbox, message_id, detail, created_at)
			SELECT coalesce((SELECT max(id) FROM messages), 0), ?, ?, 0, ?, ?
			WHERE (SELECT id FROM event_sync) < coalesce((SELECT max(id) FROM messages), 0)`,
	},
	// Without statistics SQLite would walk the whole inbox by its
	// primary key instead of the thread's index.
	inboxThreadIndex: " INDEXED BY inbox_messages_thread",
}

var _ Store = (*SQLite)(nil)

// dsn builds a modernc.org/sqlite DSN. Only `_pragma=NAME(VALUE)` and
// `_txlock` are honoured by that driver; mattn-style keys such as
// `_journal_mode` are silently ignored (see shared/interop/README.md).
func dsn(path string, busy time.Duration, writer bool) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	q.Add("_pragma", "foreign_keys(1)")
	if writer {
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous(FULL)")
		q.Add("_pragma", "temp_store(MEMORY)")
		// A checkpoint writes each page once however many commits
		// changed it since the last one: every 4,000 WAL pages (≈ 16 MB)
		// rather than SQLite's 1,000, ingest spends less CPU per
		// message (BenchmarkIngestParallel; the index pages that every
		// commit rewrites are copied back a quarter as often).
		q.Add("_pragma", "wal_autocheckpoint(4000)")
		q.Set("_txlock", "immediate")
	} else {
		q.Add("_pragma", "synchronous(FULL)")
		q.Add("_pragma", "query_only(1)")
	}
	return "file:" + escapePath(path) + "?" + q.Encode()
}

// escapePath keeps a file name from being read as URI syntax.
func escapePath(p string) string {
	return strings.NewReplacer("%", "%25", "?", "%3F", "#", "%23").Replace(p)
}

// OpenSQLite opens (creating if needed) the database at path, applies the
// pending migrations and starts the writer.
func OpenSQLite(ctx context.Context, path string) (*SQLite, error) {
	return OpenSQLiteOptions(ctx, path, Options{})
}

// OpenSQLiteOptions is OpenSQLite with options.
func OpenSQLiteOptions(ctx context.Context, path string, opts Options) (*SQLite, error) {
	if path == "" {
		return nil, errors.New("store: empty database path")
	}
	opts.defaults()
	if err := createPrivate(path); err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	w, err := sql.Open("sqlite", dsn(path, opts.BusyTimeout, true))
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	if err := migrateRetry(ctx, w, len(migrations), opts.BusyTimeout); err != nil {
		w.Close()
		return nil, fmt.Errorf("store: %s: %w", path, err)
	}
	r, err := sql.Open("sqlite", dsn(path, opts.BusyTimeout, false))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	r.SetMaxOpenConns(opts.Readers)
	r.SetMaxIdleConns(opts.Readers)
	if err := r.PingContext(ctx); err != nil {
		w.Close()
		r.Close()
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	s := &SQLite{
		core:   newCore(sqliteDialect, opts.PollInterval),
		path:   path,
		opts:   opts,
		w:      w,
		rdb:    r,
		stmts:  map[string]*sql.Stmt{},
		missed: map[string]bool{},
		ops:    make(chan *op, opts.MaxBatch),
		done:   make(chan struct{}),
	}
	s.core.r = r
	// The rules and the shared reads write through Tx; SQLite's own
	// methods (and any written for it alone) take *wtx directly.
	s.core.write = func(ctx context.Context, fn func(tx Tx) error) error {
		return s.write(ctx, func(w *wtx) error { return fn(w) })
	}
	s.rooms = newRooms(s.core)
	go s.writer()
	return s, nil
}

// migrateRetry is migrate, tried again while SQLite answers SQLITE_BUSY
// for up to busy. A fresh database opened by several processes at once
// can be busy where SQLite does not call the busy handler: switching it to
// WAL, or reading a WAL index another connection is creating.
func migrateRetry(ctx context.Context, db *sql.DB, target int, busy time.Duration) error {
	deadline := time.Now().Add(busy)
	for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		err := migrate(ctx, db, target)
		if err == nil || !isBusy(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(wait):
		}
	}
}

// isBusy reports whether err is SQLITE_BUSY (any extended code).
func isBusy(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_BUSY
}

// CheckWritable writes the database header (PRAGMA user_version, set to
// its own value) and commits, changing nothing. It fails when the file
// cannot be written (SQLITE_READONLY: a read-only file, a read-only
// mount) or another process holds the write lock beyond the busy timeout.
// Taking the lock alone (BEGIN IMMEDIATE) is not enough: in WAL mode that
// lock lives in the -shm file, which may be writable when the database is
// not. A server uses it to warn at start rather than only refusing mail
// (451) later.
func (s *SQLite) CheckWritable(ctx context.Context) error {
	return s.write(ctx, func(tx *wtx) error {
		var v int
		if err := tx.QueryRow("PRAGMA user_version").Scan(&v); err != nil {
			return err
		}
		_, err := tx.Exec(fmt.Sprintf("PRAGMA user_version = %d", v))
		return err
	})
}

// DatabaseMode is the permission of a database file envelopd creates: it
// holds relay DKIM private keys and mailbox password hashes.
// SQLite gives the -wal and -shm files the mode of the database file
// (SQLite's unix VFS, findCreateFileMode), so they are 0600 too.
const DatabaseMode os.FileMode = 0o600

// createPrivate creates path with DatabaseMode, whatever the umask, when
// it does not exist yet, so that SQLite never creates it with its default
// 0644. An existing file is left as it is.
func createPrivate(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, DatabaseMode)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	// The umask may have taken bits away; set exactly DatabaseMode.
	err = f.Chmod(DatabaseMode)
	return errors.Join(err, f.Close())
}

// Close stops the writer after the writes already submitted and closes
// the database. It is safe to call more than once.
func (s *SQLite) Close() error {
	return s.shut(func() error {
		<-s.done
		return errors.Join(s.rdb.Close(), s.w.Close())
	})
}

// Pragma returns the value of a PRAGMA as seen by the writer connection
// (journal_mode, synchronous, foreign_keys, busy_timeout, user_version,
// integrity_check, …). It is for tests and `envelopd` diagnostics; name must
// be a bare pragma name.
func (s *SQLite) Pragma(ctx context.Context, name string) (string, error) {
	for _, c := range name {
		if !(c == '_' || c >= 'a' && c <= 'z') {
			return "", fmt.Errorf("store: bad pragma name %q", name)
		}
	}
	var v string
	err := s.write(ctx, func(tx *wtx) error {
		return tx.QueryRow("PRAGMA " + name).Scan(&v)
	})
	return v, err
}
