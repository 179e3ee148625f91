package store

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"time"
)

// Tx is the transaction the rules layer runs in (ingest.go, unique.go,
// thread.go, check.go, queue.go's enqueueTx, mailbox.go's filing). Every
// decision — final status, duplicate_id, duplicate_proof, retry, ACCEPT
// against its OFFER, claims, chain links, protocol state, tallies,
// threading, hand-off rows, the courtesy OOPS limits — is written once,
// over this interface, and each backend (SQLite: sqlite.go, Postgres:
// postgres.go) implements it.
//
// The statements are portable SQL with ? placeholders (a backend rebinds
// them); what only one engine speaks — SQLite's INDEXED BY, a bare
// column beside min(), LastInsertId, x” literals — sits behind the
// dialect and InsertMessage. Concurrency safety comes from the database:
// every uniqueness fact is an INSERT … ON CONFLICT on a UNIQUE key, so a
// concurrent transaction holding the same key makes this one wait and
// then see the conflict (Postgres READ COMMITTED re-reads the committed
// row; SQLite has one writer). The few check-then-insert rules that no
// UNIQUE key can express (OOPS rate limits, SyncFolders' high-water mark)
// take Lock or FOR UPDATE first.
type Tx interface {
	Exec(q string, args ...any) (sql.Result, error)
	Query(q string, args ...any) (*sql.Rows, error)
	QueryRow(q string, args ...any) *sql.Row
	// InsertMessage runs insertMessageSQL (ON CONFLICT on the exact-copy
	// key DO NOTHING) with args, stores raw as its bytes, and returns the
	// new row's id, or inserted false when an identical copy is already
	// stored (raw is then not written).
	InsertMessage(raw []byte, args ...any) (id int64, inserted bool, err error)
	// Lock serialises, until the transaction ends, every transaction that
	// locks the same key: for a rule that must count before it inserts.
	Lock(key string) error
	// queued notes that the transaction queued outbound mail (Postgres
	// announces it at commit; SQLite's writer wakes on every commit).
	queued()
	dialect() *dialect
}

// insertMessageSQL is the one messages INSERT; a backend appends what it
// needs (Postgres: RETURNING id, and its own id).
const insertMessageSQL = `INSERT INTO messages (mailbox, direction, message_id, content_hash, sender,
		recipients, subject, type, envelopay_id, status, thread_id, received_at, errors, warnings,
		result, dkim, auth_results, size, want_amount, want_token, want_chain, note, received_as, codes`

// dialect is what differs in the SQL of the backends.
type dialect struct {
	name string
	// eidIndex and copyIndex follow "FROM messages" where SQLite must be
	// told its index (see threadFor); "" elsewhere. A lookup by Envelopay
	// id also says envelopay_id <> '': Postgres's index of them leaves out
	// the mail that has none (most of it); so does its index by relay
	// mailbox, and a lookup by mailbox says mailbox <> ''.
	eidIndex, copyIndex string
	// midIs is the condition that column col (messages.message_id) holds
	// the Message-ID mid, with its args: Postgres finds it by the hash
	// leading its exact-copy key (pgMIDIs).
	midIs func(col, mid string) (string, []any)
	// threadIs is the condition that column col (messages.thread_id)
	// holds the thread id thread, with its args: Postgres finds it by
	// the key its thread index holds (8 bytes of the id's md5, where a
	// btree entry of the id itself costs a tuple header and padding);
	// SQLite's index keeps the thread id (a compact record, and SQLite
	// has no md5 to key on).
	threadIs func(col, thread string) (string, []any)
	// threadSQL finds the thread of the earliest message among n
	// Message-IDs of one mailbox (args: the ids, then the mailbox); it
	// yields id and thread_id, possibly NULL.
	threadSQL func(n int) string
	// emptyBlob is an empty binary literal.
	emptyBlob string
	// skipLocked ends a claim's row-selecting subquery: Postgres locks
	// the rows it takes and skips those another node is claiming.
	skipLocked string
	// forUpdate ends a SELECT whose row the transaction then updates
	// from what it read.
	forUpdate string
	// greatest is the two-argument maximum function.
	greatest string
	// visible is a condition on m.id that holds only for messages no
	// later commit can precede (a cursor never skips a late-committing
	// row); "" when ids commit in order (SQLite's one writer).
	visible string
	// search is the condition on messages m for the web inbox's free
	// text search ("" when the text has no word).
	search func(text string) (string, []any)
	// searchShares, when not nil, is a query giving for each of n
	// search words (bound in order) its number (from 1) and the share
	// of the indexed messages holding a term its prefix covers, by the
	// planner's statistics (indexRoom.searchDrive); searchDriven is
	// search asking the index for the words of drive only and testing
	// the whole text on the rows found. nil where the index walks
	// prefixes lazily once expanded (SQLite's sqliteMatch).
	searchShares func(n int) string
	searchDriven func(text string, drive []string) (string, []any)
	// searchWalk, when not nil, is an index that yields the matches of
	// an FTS query (core.sqliteMatch's) in message id order, ascending or
	// descending, with an id bound pushed into it: from is a FROM item
	// aliased f, id its message id column, cond (with args) its match
	// condition. A page is then walked from the index side, its cost
	// bounded by the page, not by the number of matches; nil where the
	// index only answers a set (Postgres's GIN).
	searchWalk func(match string) (from, id, cond string, args []any)
	// instr is the function giving the position of a substring (text,
	// sub).
	instr string
	// inboxThreadIndex follows "FROM inbox_messages x" for one thread of
	// one inbox where SQLite must be told its index; "" elsewhere.
	inboxThreadIndex string
	// eventHours, when not "", is a condition (args: the start and end
	// of a span, Unix nanoseconds) that the event log's rows created in
	// [start, end) meet and that its index by time answers: Postgres
	// indexes the hour of created_at, not created_at (EventCounts).
	eventHours string
	// rawDict compresses small raw mail over the mail dictionary
	// (rawdict.go). Postgres sets it: there a 600-byte mail's other rows
	// leave no room in its goal of twice the raw bytes, and the frame's
	// bytes are a tuple of their own. SQLite meets that goal without it
	// and spends its CPU per message on the one writer, so its frames
	// start from no dictionary. Both read both kinds of frame.
	rawDict bool
	// eventVisible is visible for the API's event log (api_events e):
	// only events no later commit can precede; "" when ids commit in
	// order.
	eventVisible string
	// snapshotXmax and snapshotXmin are expressions giving the first
	// transaction id not yet assigned and the oldest one still running
	// (Postgres); "" when ids commit in order.
	snapshotXmax, snapshotXmin string
	// indexSearch is the SQL that fills the web inbox's search and filter
	// index (message_fts, message_tags) for the messages with ids in
	// (?, ?], run by SyncInboxes with the API's index; nil when triggers
	// keep it at insert (Postgres). SQLite moved it out of the ingest
	// transaction (migration 15): an FTS5 insert in every message's
	// savepoint was a large share of ingest's CPU (docs/performance.md).
	indexSearch []string
	// eventsLag (a query yielding a boolean), eventsBehind (the message
	// ids not caught up yet) and syncEvents (a write taking the log ?
	// message ids further) are how the event log catches up with the
	// committed messages where their message.received events are not
	// written at insert (SQLite, migration 16); "" where a trigger
	// writes them (Postgres). Event reads catch up first
	// (core.syncEvents), and so do the writes whose triggers log an
	// event (core.writeLogged).
	eventsLag, eventsBehind, syncEvents string
	// logEvent writes one event without a stored message (type, inbox,
	// detail, created_at bound to each statement, in that order): where
	// the log is caught up to the newest message, at once, else staged
	// behind the received events owed (SQLite, migration 27); Postgres
	// numbers it by its transaction and wakes the followers of every
	// node, as its event triggers do.
	logEvent []string
	// tagCount counts the messages carrying one filter tag ("status:…",
	// "type:…", "sender:…", "code:…"), stopping at a limit (args: the
	// tag, the limit); tagged is the condition on messages m that m
	// carries a tag (arg: the tag). SQLite keeps the tags as rows
	// (message_tags); Postgres as a GIN index over the tags computed from
	// the row (envelopd_tags, migration 29 of postgres_schema.go).
	tagCount, tagged string
	// codes binds messages.codes, the filter tags of a message's error
	// and warning codes (codeTags; nil: none): Postgres keeps them as
	// text, one per line, which its tags index splits (pgCodes; a text[]
	// costs its row 26 bytes more); SQLite as a JSON array, which its
	// triggers and indexSearch walk with json_each (SQLite has no split).
	codes func(tags []string) any
	// key converts a claims/states key or value for binding: Postgres
	// keeps them in bytea (they hold NUL bytes), SQLite in TEXT.
	key func(string) any
}

// reader is the read side of a backend (a pool).
type reader interface {
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

// core is what the backends share: the reads and the writes expressed
// over Tx. A backend sets r, d and write, and calls notify after a
// commit that may have stored messages.
type core struct {
	r     reader
	d     *dialect
	write func(ctx context.Context, fn func(tx Tx) error) error

	pollInterval time.Duration
	quit         chan struct{}

	mu       sync.Mutex
	closed   bool
	newMsg   chan struct{} // closed and replaced after a commit that stored messages
	newQueue chan struct{} // closed and replaced after a commit that queued mail

	closeOnce sync.Once
	closeErr  error
}

func newCore(d *dialect, poll time.Duration) *core {
	return &core{d: d, pollInterval: poll, quit: make(chan struct{}), newMsg: make(chan struct{}), newQueue: make(chan struct{})}
}

// shut marks the store closed (isClosed), stops its loops (quit) and
// then runs release, once: the backend's Close, which every later call
// answers with release's error.
func (s *core) shut(release func() error) error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		close(s.quit)
		s.closeErr = release()
	})
	return s.closeErr
}

func (s *core) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// notify wakes every WaitNew and every MessagesChanged waiter.
func (s *core) notify() {
	s.mu.Lock()
	close(s.newMsg)
	s.newMsg = make(chan struct{})
	s.mu.Unlock()
}

// notifyQueue wakes every QueueChanged waiter.
func (s *core) notifyQueue() {
	s.mu.Lock()
	close(s.newQueue)
	s.newQueue = make(chan struct{})
	s.mu.Unlock()
}

// MessagesChanged returns a channel closed at the next commit that may
// have stored messages — on any node, for Postgres (LISTEN/NOTIFY) — so
// that hand-off workers wake instead of polling. Take it before looking,
// then wait on it.
func (s *core) MessagesChanged() <-chan struct{} { return s.newMsgChan() }

// QueueChanged returns a channel closed at the next commit that may have
// queued outbound mail (on any node, for Postgres), for queue workers.
func (s *core) QueueChanged() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.newQueue
}

func (s *core) newMsgChan() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.newMsg
}

// ErrConflict is wrapped by errors from a write that broke a UNIQUE key
// the rules did not expect to race on (the rules themselves use
// INSERT … ON CONFLICT and never see it).
var ErrConflict = errors.New("store: conflict")

// rebind turns ? placeholders into $1, $2, … (Postgres). The statements
// here hold no ? inside string literals; quoted text is skipped anyway.
func rebind(q string) string {
	if !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + 16)
	n := 0
	inStr := false
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case c == '\'':
			inStr = !inStr
			b.WriteByte(c)
		case c == '?' && !inStr:
			n++
			b.WriteByte('$')
			b.WriteString(itoa(n))
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

// HandoffHolder lets a person hold the pending hand-offs of a message
// (row id) and release them (handoffs.go).
type HandoffHolder interface {
	HandoffHold(ctx context.Context, id int64) ([]Handoff, error)
	HandoffRelease(ctx context.Context, id int64) ([]Handoff, error)
}

// CheckedEnqueuer queues a message we send with Check's rules applied to
// its stored copy, in one transaction (queue.go).
type CheckedEnqueuer interface {
	EnqueueChecked(ctx context.Context, out *Outgoing, force bool) (Queued, error)
}

// HandoffAdmin is the hand-off room's operator side: list the log, retry
// or drop an entry, hold and release a message's hand-offs
// (handoffs.go).
type HandoffAdmin interface {
	Handoffs(ctx context.Context, f HandoffFilter) ([]Handoff, error)
	HandoffRetry(ctx context.Context, id int64) error
	HandoffDrop(ctx context.Context, id int64) error
	HandoffHolder
}

// Settings is the settings room: the operator's key-value settings
// (settings.go).
type Settings interface {
	SetSetting(ctx context.Context, key, value string) error
	Setting(ctx context.Context, key string) (string, time.Time, error)
}

// Engine is what a backend itself answers for, beside its rooms: whether
// it can write, its writer's counters, and closing it.
type Engine interface {
	CheckWritable(ctx context.Context) error
	Stats() Stats
	Close() error
}

// DB is every room of a store over one engine: what the commands open
// and hand out, each consumer taking the small interfaces it uses. Both
// backends implement it.
type DB interface {
	Store
	HandoffAdmin
	Settings
	Engine
	OOPSLog
	APIStore
	DomainStore
	Payments
	DraftStore
	ListStore
}

// APIStore is the HTTP API's rooms (apistore.go, events.go, metrics.go),
// on both backends: what the api and mcp packages' store interfaces ask.
type APIStore interface {
	APIKeyStore
	InboxIndex
	EventLog
	EventMetrics
	APILogPruner
	WebhookStore
	IdempotencyStore
	UsageStore
}

var (
	_ DB = (*SQLite)(nil)
	_ DB = (*Postgres)(nil)
)

// Open opens the store a --db value names: a postgres:// or
// postgresql:// URL selects Postgres (OpenPostgres), anything else is a
// SQLite file path (OpenSQLite).
func Open(ctx context.Context, dsn string) (DB, error) {
	if IsPostgresDSN(dsn) {
		return OpenPostgres(ctx, dsn)
	}
	return OpenSQLite(ctx, dsn)
}
