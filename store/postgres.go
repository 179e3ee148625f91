package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/envelopd/envelopd/internal/defaults"
)

// Postgres is the Store over a PostgreSQL database (github.com/jackc/pgx/v5),
// for several envelopd nodes sharing one state. Every node runs
// the same rules (Tx) in its own transactions; what makes them safe
// together is the database: UNIQUE keys taken with INSERT … ON CONFLICT
// (one proof, one Envelopay id, one claim, one chain seq, one queued
// Message-ID), FOR UPDATE SKIP LOCKED for the outbound queue and the
// hand-off log (each entry claimed by one node, for a lease that expires
// when that node dies), advisory locks for the OOPS counts, and retry
// of a transaction Postgres aborts as a deadlock or serialisation
// failure. Ingest returns only after its transaction committed.
//
// Message ids are not taken from a sequence: a sequence hands out ids in
// the order transactions start, not the order they commit, and a cursor
// (watch, SyncFolders, WaitNew) that has passed id 7 would never see a
// slow id 6 committing after it. Instead a transaction numbers its
// messages from its own transaction id (pg_current_xact_id() << 10 | n),
// and readers following a cursor only see ids below the oldest
// transaction still running (pg_snapshot_xmin of their snapshot << 10):
// every transaction with a lower id has ended, so nothing can commit
// below that line later. The cost: a long-running transaction anywhere
// on the server holds cursors back (not a loss: they catch up when it
// ends). New messages are announced with NOTIFY envelopd_messages.SCHEMA, sent
// at commit; each node LISTENs on one connection and wakes its waiters.
type Postgres struct {
	*core
	rooms
	db   *sql.DB
	opts PostgresOptions

	commits, writes atomic.Int64

	msgChan, queueChan string // NOTIFY channels of this schema

	stopListen context.CancelFunc
	listenDone chan struct{}
}

var _ Store = (*Postgres)(nil)

// PostgresOptions tune a Postgres store; zero fields take the defaults.
type PostgresOptions struct {
	// MaxConns is the connection pool size of this node (default 16).
	// Every node holds up to this many connections, plus one for LISTEN.
	MaxConns int
	// PollInterval is how often WaitNew looks again without a
	// notification (a cursor held back by a long transaction). Default 1 s.
	PollInterval time.Duration
	// MaxRetries bounds how often a transaction aborted as a deadlock or
	// serialisation failure is run again (default 20).
	MaxRetries int
}

func (o *PostgresOptions) defaults() {
	defaults.Positive(&o.MaxConns, 16)
	defaults.Positive(&o.PollInterval, time.Second)
	defaults.Positive(&o.MaxRetries, 20)
}

// The NOTIFY channels: new messages, newly queued mail. Each store's
// channels end in its schema (".public"), so that two deployments in
// one database (search_path) do not wake each other.
const (
	pgNotifyChannel = "envelopd_messages"
	pgQueueChannel  = "envelopd_queue"
)

// pgMigrateLock is the advisory lock key of migrations ("envelopd").
const pgMigrateLock = 0x656e76656c6f7064

// pgIDBits is how many low bits of a message id number the messages of
// one transaction (pgTx.InsertMessage).
const pgIDBits = 10

var pgDialect = &dialect{
	name:    "postgres",
	midIs:   pgMIDIs,
	rawDict: true,
	// The thread index holds 8 bytes of the thread id's md5 (migration
	// 33 of postgres_schema.go).
	threadIs: pgKeyIs(`envelopd_thread_key`),
	threadSQL: func(n int) string {
		// MATERIALIZED: find the few matches by the exact-copy key,
		// then take the earliest; never walk the primary key in id order
		// looking for a match (the common case has none).
		vals := strings.Repeat(`(?::text), `, n)
		return `WITH m AS MATERIALIZED (SELECT m.id, m.thread_id FROM (VALUES ` + vals[:len(vals)-2] + `) AS k (mid)
			JOIN messages m ON ` + pgMIDKey + `(m.message_id) = ` + pgMIDKey + `(k.mid) AND m.message_id = k.mid
			WHERE m.mailbox = ?)
			SELECT id, thread_id FROM m ORDER BY id LIMIT 1`
	},
	emptyBlob:    "''::bytea",
	skipLocked:   " FOR UPDATE SKIP LOCKED",
	forUpdate:    " FOR UPDATE",
	greatest:     "greatest",
	visible:      fmt.Sprintf("m.id < (pg_snapshot_xmin(pg_current_snapshot())::text::bigint << %d)", pgIDBits),
	key:          func(s string) any { return []byte(s) },
	instr:        "strpos",
	search:       pgSearch,
	searchShares: pgSearchShares,
	searchDriven: pgSearchDriven,
	snapshotXmax: "pg_snapshot_xmax(pg_current_snapshot())::text::bigint",
	snapshotXmin: "pg_snapshot_xmin(pg_current_snapshot())::text::bigint",
	logEvent: []string{
		`WITH e AS (INSERT INTO api_events (id, type, inbox, message_id, detail, created_at)
			VALUES (envelopd_api_event_id(), ?, ?, 0, ?, ?) RETURNING id)
			SELECT pg_notify('envelopd_messages.' || current_schema(), '') FROM e`,
	},
	eventHours:   `created_at / 3600000000000 >= ?::bigint / 3600000000000 AND created_at / 3600000000000 <= (?::bigint - 1) / 3600000000000`,
	eventVisible: fmt.Sprintf("e.id < (pg_snapshot_xmin(pg_current_snapshot())::text::bigint << %d)", pgEventIDBits),
	// The expression of the messages_tags index, written as it is there
	// so that the planner uses it.
	tagCount: `SELECT count(*) FROM (SELECT 1 FROM messages
		WHERE envelopd_tags(status, type, sender, codes) @> ARRAY[?::text] LIMIT ?) AS t`,
	tagged: `envelopd_tags(m.status, m.type, m.sender, m.codes) @> ARRAY[?::text]`,
	codes:  pgCodes,
}

// pgCodes is messages.codes on Postgres: the tags separated by newlines
// (envelopd_tags splits them), NULL for none. text cannot hold NUL: it
// reads as U+FFFD, as the lists' JSON was read before the store wrote
// the codes. A tag with a newline in it is left out (no code the store
// writes has one).
func pgCodes(tags []string) any {
	var b strings.Builder
	for _, t := range tags {
		if strings.IndexByte(t, '\n') >= 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		if strings.IndexByte(t, 0) >= 0 {
			t = strings.ReplaceAll(t, "\x00", "\uFFFD")
		}
		b.WriteString(t)
	}
	if b.Len() == 0 {
		return nil
	}
	return b.String()
}

// pgMIDKey is the function of a Message-ID that leads the exact-copy key
// messages_copy (migrations 29 and 33 of postgres_schema.go): a Message-ID may be
// any length, and a btree entry may not; the lookups by Message-ID go
// through it too, then compare the whole Message-ID.
const pgMIDKey = `envelopd_mid_key`

// pgMIDIs is the Postgres dialect's midIs.
var pgMIDIs = pgKeyIs(pgMIDKey)

// pgKeyIs is the condition that column col holds a value, looked up by
// the function key of it that an index holds, then compared whole.
func pgKeyIs(key string) func(col, v string) (string, []any) {
	return func(col, v string) (string, []any) {
		return key + `(` + col + `) = ` + key + `(?) AND ` + col + ` = ?`, []any{v, v}
	}
}

// pgEventIDBits is how many low bits of an API event id number the events
// of one transaction (envelopd_api_event in migration 13): ids are the
// transaction id << pgEventIDBits | n, as message ids are, so that a
// cursor over the event log never skips an event committing late.
const pgEventIDBits = 20

// IsPostgresDSN reports whether a --db value names a Postgres database
// (a postgres:// or postgresql:// URL) rather than a SQLite file.
func IsPostgresDSN(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// OpenPostgres connects to the database at dsn (a postgres:// URL),
// applies the pending migrations under an advisory lock (several nodes
// may start at once) and starts listening for new messages.
func OpenPostgres(ctx context.Context, dsn string) (*Postgres, error) {
	return OpenPostgresOptions(ctx, dsn, PostgresOptions{})
}

// OpenPostgresOptions is OpenPostgres with options.
func OpenPostgresOptions(ctx context.Context, dsn string, opts PostgresOptions) (*Postgres, error) {
	dsn, n, err := poolSize(dsn)
	if err != nil {
		return nil, fmt.Errorf("store: postgres: %w", err)
	}
	if n > 0 {
		opts.MaxConns = n
	}
	opts.defaults()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("store: postgres: %w", err)
	}
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(opts.MaxConns)
	db.SetMaxIdleConns(opts.MaxConns)
	db.SetConnMaxIdleTime(5 * time.Minute)
	if err := pgMigrate(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: postgres %s: %w", redactDSN(cfg), err)
	}
	var schema string
	if err := db.QueryRowContext(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: postgres %s: %w", redactDSN(cfg), err)
	}
	p := &Postgres{core: newCore(pgDialect, opts.PollInterval), db: db, opts: opts, listenDone: make(chan struct{}),
		msgChan: pgNotifyChannel + "." + schema, queueChan: pgQueueChannel + "." + schema}
	// LISTEN before returning: no commit after Open goes unannounced.
	conn, err := p.listenConn(ctx, cfg)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("store: postgres %s: listen: %w", redactDSN(cfg), err)
	}
	p.core.r = pgReader{db}
	p.core.write = p.write
	p.rooms = newRooms(p.core)
	lctx, cancel := context.WithCancel(context.Background())
	p.stopListen = cancel
	go p.listen(lctx, cfg, conn)
	return p, nil
}

// poolSize takes the pool_max_conns parameter (as pgxpool names it) out
// of a URL DSN: it sizes this node's pool and is not a server setting.
func poolSize(dsn string) (string, int, error) {
	u, err := url.Parse(dsn)
	if err != nil || !u.Query().Has("pool_max_conns") {
		return dsn, 0, nil // pgx reports a bad URL
	}
	q := u.Query()
	n, err := strconv.Atoi(q.Get("pool_max_conns"))
	if err != nil || n < 1 {
		return "", 0, fmt.Errorf("pool_max_conns %q: want a positive number", q.Get("pool_max_conns"))
	}
	q.Del("pool_max_conns")
	u.RawQuery = q.Encode()
	return u.String(), n, nil
}

func redactDSN(cfg *pgx.ConnConfig) string {
	return fmt.Sprintf("%s@%s:%d/%s", cfg.User, cfg.Host, cfg.Port, cfg.Database)
}

// pgMigrate applies pgMigrations past the recorded version, each in its
// own transaction, holding a session advisory lock so that nodes starting
// together migrate one after the other (the later ones find nothing to
// do).
func pgMigrate(ctx context.Context, db *sql.DB) error {
	return pgMigrateTo(ctx, db, pgMigrations[len(pgMigrations)-1].version)
}

// pgMigrateTo is pgMigrate up to version target only (tests build older
// databases with it).
func pgMigrateTo(ctx context.Context, db *sql.DB, target int) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, int64(pgMigrateLock)); err != nil {
		return fmt.Errorf("migration lock: %w", err)
	}
	defer conn.ExecContext(context.Background(), `SELECT pg_advisory_unlock($1)`, int64(pgMigrateLock))
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS envelopd_schema (version integer NOT NULL)`); err != nil {
		return fmt.Errorf("schema version: %w", err)
	}
	var v int
	if err := conn.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM envelopd_schema`).Scan(&v); err != nil {
		return fmt.Errorf("schema version: %w", err)
	}
	last := pgMigrations[len(pgMigrations)-1].version
	if v > last {
		return fmt.Errorf("%w: version %d, known up to %d", ErrSchemaTooNew, v, last)
	}
	for _, m := range pgMigrations {
		if m.version <= v || m.version > target {
			continue
		}
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("migration %d: %w", m.version, err)
		}
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %d: %w", m.version, err)
		}
		if err := runStep(ctx, tx, m.version, pgSQL, pgArgs); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %d: %w", m.version, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO envelopd_schema (version) VALUES ($1)`, m.version); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %d: %w", m.version, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("migration %d: %w", m.version, err)
		}
	}
	return nil
}

// SchemaVersionPostgres returns the schema version recorded in the
// database (for tests and diagnostics).
func (p *Postgres) SchemaVersionPostgres(ctx context.Context) (int, error) {
	var v int
	err := p.db.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM envelopd_schema`).Scan(&v)
	return v, err
}

// listenConn connects and LISTENs on the channels of new messages and
// newly queued mail.
func (p *Postgres) listenConn(ctx context.Context, cfg *pgx.ConnConfig) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{p.msgChan}.Sanitize()+"; LISTEN "+pgx.Identifier{p.queueChan}.Sanitize()); err != nil {
		conn.Close(context.Background())
		return nil, err
	}
	return conn, nil
}

// listen waits for notifications on conn and wakes the waiters of each
// channel. When the connection fails it connects again, and wakes every
// waiter then: rows may have committed while nobody listened.
func (p *Postgres) listen(ctx context.Context, cfg *pgx.ConnConfig, conn *pgx.Conn) {
	defer close(p.listenDone)
	for {
		for conn != nil {
			n, err := conn.WaitForNotification(ctx)
			if err != nil {
				conn.Close(context.Background())
				conn = nil
				break
			}
			if n.Channel == p.queueChan {
				p.notifyQueue()
			} else {
				p.notify()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		if c, err := p.listenConn(ctx, cfg); err == nil {
			conn = c
			p.notify()
			p.notifyQueue()
		}
	}
}

// write runs fn in its own transaction and commits; a transaction that
// Postgres aborted as a deadlock or a serialisation failure runs again
// from the start (fn must only set what it returns).
func (p *Postgres) write(ctx context.Context, fn func(tx Tx) error) error {
	if p.isClosed() {
		return ErrClosed
	}
	for attempt := 0; ; attempt++ {
		err := p.tryWrite(ctx, fn)
		if err == nil || !retryable(err) || attempt >= p.opts.MaxRetries || ctx.Err() != nil {
			return err
		}
		// Jitter, so the transactions that collided do not collide again.
		select {
		case <-time.After(time.Duration(rand.IntN(1+min(attempt, 8)*2000)) * time.Microsecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (p *Postgres) tryWrite(ctx context.Context, fn func(tx Tx) error) (err error) {
	sqlTx, err := p.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: begin: %w", err)
	}
	t := &pgTx{ctx: ctx, tx: sqlTx, msgChan: p.msgChan}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("store: write panicked: %v", r)
		}
		if err != nil {
			sqlTx.Rollback()
		}
	}()
	if err := fn(t); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "23505" && !errors.Is(err, ErrConflict) { // unique_violation
			return fmt.Errorf("%w: %w", ErrConflict, err)
		}
		return err
	}
	if t.queue {
		if _, err := sqlTx.ExecContext(ctx, `SELECT pg_notify($1, '')`, p.queueChan); err != nil {
			return fmt.Errorf("store: notify: %w", err)
		}
	}
	if err := sqlTx.Commit(); err != nil {
		return fmt.Errorf("store: commit: %w", err)
	}
	p.commits.Add(1)
	p.writes.Add(1)
	if t.stored {
		p.notify()
	}
	if t.queue {
		p.notifyQueue()
	}
	return nil
}

// retryable reports a transaction Postgres aborted that may succeed when
// run again: serialization_failure, deadlock_detected.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// Stats returns the write counters (one write per transaction: Postgres
// commits each write on its own).
func (p *Postgres) Stats() Stats {
	return Stats{Commits: p.commits.Load(), Writes: p.writes.Load()}
}

// MaxConns is the size of this node's connection pool (pool_max_conns,
// PostgresOptions.MaxConns).
func (p *Postgres) MaxConns() int { return p.db.Stats().MaxOpenConnections }

// CheckWritable takes a transaction id and commits, changing nothing: it
// fails on a read-only server (a standby) or a read-only role.
func (p *Postgres) CheckWritable(ctx context.Context) error {
	return p.write(ctx, func(tx Tx) error {
		var x string
		return tx.QueryRow(`SELECT pg_current_xact_id()::text`).Scan(&x)
	})
}

// Close stops listening and closes the pool. It is safe to call more
// than once.
func (p *Postgres) Close() error {
	return p.shut(func() error {
		p.stopListen()
		<-p.listenDone
		return p.db.Close()
	})
}

// pgTx is Tx over one Postgres transaction.
type pgTx struct {
	ctx     context.Context
	tx      *sql.Tx
	msgChan string
	n       int64 // messages numbered so far
	stored  bool  // a message was inserted: NOTIFY at commit
	queue   bool  // mail was queued: NOTIFY at commit
}

func (t *pgTx) Exec(q string, args ...any) (sql.Result, error) {
	return t.tx.ExecContext(t.ctx, pgSQL(q), pgArgs(args)...)
}

func (t *pgTx) Query(q string, args ...any) (*sql.Rows, error) {
	return t.tx.QueryContext(t.ctx, pgSQL(q), pgArgs(args)...)
}

func (t *pgTx) QueryRow(q string, args ...any) *sql.Row {
	return t.tx.QueryRowContext(t.ctx, pgSQL(q), pgArgs(args)...)
}

// InsertMessage implements Tx. The id is this transaction's id shifted
// left by pgIDBits, plus how many messages it numbered before: ids of
// one transaction are consecutive, and an id below (oldest running
// transaction id << pgIDBits) can never appear later (dialect visible).
func (t *pgTx) InsertMessage(raw []byte, args ...any) (int64, bool, error) {
	if t.n >= 1<<pgIDBits {
		return 0, false, fmt.Errorf("%w: more than %d messages in one transaction", ErrBadInput, 1<<pgIDBits)
	}
	n := t.n
	t.n++
	z, codec := raws.encodeRaw(raw, t.dialect().rawDict)
	// One round trip: the row with its id from the transaction id, its
	// raw bytes, and the NOTIFY (delivered at commit, like any NOTIFY in
	// a transaction).
	var got int64
	err := t.QueryRow(`WITH ins AS (`+insertMessageSQL+`, id)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,
			(pg_current_xact_id()::text::bigint << `+fmt.Sprint(pgIDBits)+`) | ?)
		ON CONFLICT (envelopd_mid_key(message_id), envelopd_copy_key(mailbox, direction, content_hash)) DO NOTHING RETURNING id),
		raw AS (INSERT INTO message_raw (message_id, raw, codec) SELECT id, ?, ? FROM ins)
		SELECT ins.id FROM ins CROSS JOIN LATERAL (SELECT pg_notify(?, '')) AS notified`,
		append(args[:len(args):len(args)], n, z, codec, t.msgChan)...).Scan(&got)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	t.stored = true
	return got, true, nil
}

// Lock implements Tx with a transaction-level advisory lock on a 64-bit
// hash of key.
func (t *pgTx) Lock(key string) error {
	h := fnv.New64a()
	h.Write([]byte(key))
	_, err := t.Exec(`SELECT pg_advisory_xact_lock(?)`, int64(h.Sum64()))
	return err
}

func (t *pgTx) queued() { t.queue = true }

func (t *pgTx) dialect() *dialect { return pgDialect }

// pgReader is the read pool, rebinding placeholders.
type pgReader struct{ db *sql.DB }

func (r pgReader) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return r.db.QueryRowContext(ctx, pgSQL(q), pgArgs(args)...)
}

func (r pgReader) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return r.db.QueryContext(ctx, pgSQL(q), pgArgs(args)...)
}

var pgSQLCache sync.Map // SQLite-style statement → rebound statement

// pgSQL is q with $n placeholders, cached.
func pgSQL(q string) string {
	if v, ok := pgSQLCache.Load(q); ok {
		return v.(string)
	}
	r := rebind(q)
	pgSQLCache.Store(q, r)
	return r
}

// pgArgs makes string arguments storable in text: Postgres text holds
// neither NUL bytes nor invalid UTF-8, which a hostile header may carry;
// they become U+FFFD (binary values — raw mail, claim keys — are []byte
// and untouched).
func pgArgs(args []any) []any {
	copied := false
	for i, a := range args {
		s, ok := a.(string)
		if !ok || (utf8.ValidString(s) && !strings.Contains(s, "\x00")) {
			continue
		}
		if !copied {
			args, copied = append([]any(nil), args...), true
		}
		args[i] = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
	}
	return args
}
