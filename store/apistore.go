package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode"
)

// The HTTP API's part of the store: API keys, inboxes and the
// inbox index. An inbox is an address: in relay mode a mailbox, in plain
// mode every address envelopd stored mail for (the recipients of received
// mail, the sender of sent mail). The index (inbox_messages,
// inbox_threads) is filled from the messages table by SyncInboxes, behind
// a high-water mark, like the relay's folders; it references stored
// messages and never copies them. Lists page by keyset (the message row
// id, a thread's last message id), never by OFFSET.

// APIKey is a stored API key: its public id and the SHA-256 of its secret
// part (the secret itself is never stored).
type APIKey struct {
	ID      string   `json:"id"`
	Hash    []byte   `json:"-"`
	Inboxes []string `json:"inboxes"` // empty: every inbox
	// Pod is the pod an unscoped key is bound to ("": the organisation).
	Pod  string `json:"pod,omitempty"`
	Name string `json:"name"`
	// Permissions are the operations the key may do, by name; nil: all.
	// The store keeps them as given (the front end knows the names).
	Permissions []string   `json:"permissions"`
	CreatedAt   time.Time  `json:"created_at"`
	UpdatedAt   time.Time  `json:"updated_at"`
	RevokedAt   *time.Time `json:"revoked_at"`
}

// permissionsColumn is k's permissions as stored: NULL for all, else a
// JSON array.
func (k APIKey) permissionsColumn() any {
	if k.Permissions == nil {
		return nil
	}
	b, _ := json.Marshal(k.Permissions)
	return string(b)
}

// CreateAPIKey stores a new key.
func (s apiKeyRoom) CreateAPIKey(ctx context.Context, k APIKey) error {
	if k.ID == "" || len(k.Hash) == 0 {
		return fmt.Errorf("%w: API key without id or hash", ErrBadInput)
	}
	inboxes := k.Inboxes
	if inboxes == nil {
		inboxes = []string{}
	}
	b, _ := json.Marshal(inboxes)
	return s.write(ctx, func(tx Tx) error {
		at := k.CreatedAt.UTC().UnixNano()
		_, err := tx.Exec(`INSERT INTO api_keys (id, hash, inboxes, pod, name, permissions, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			k.ID, k.Hash, string(b), k.Pod, k.Name, k.permissionsColumn(), at, at)
		if err != nil {
			return fmt.Errorf("store: create API key: %w", err)
		}
		return nil
	})
}

const apiKeyCols = `id, hash, inboxes, pod, name, permissions, created_at, coalesce(updated_at, created_at), revoked_at`

func scanKey(sc scanner) (APIKey, error) {
	var k APIKey
	var inboxes string
	var perms sql.NullString
	var at, up int64
	var rev sql.NullInt64
	if err := sc.Scan(&k.ID, &k.Hash, &inboxes, &k.Pod, &k.Name, &perms, &at, &up, &rev); err != nil {
		return k, err
	}
	k.Inboxes = []string{}
	_ = json.Unmarshal([]byte(inboxes), &k.Inboxes)
	if perms.Valid {
		k.Permissions = []string{}
		_ = json.Unmarshal([]byte(perms.String), &k.Permissions)
	}
	k.CreatedAt, k.UpdatedAt = time.Unix(0, at).UTC(), time.Unix(0, up).UTC()
	if rev.Valid {
		t := time.Unix(0, rev.Int64).UTC()
		k.RevokedAt = &t
	}
	return k, nil
}

// APIKeyByID returns the key with that public id (revoked ones too), or
// ErrNotFound.
func (s apiKeyRoom) APIKeyByID(ctx context.Context, id string) (APIKey, error) {
	if s.isClosed() {
		return APIKey{}, ErrClosed
	}
	k, err := scanKey(s.r.QueryRowContext(ctx, `SELECT `+apiKeyCols+` FROM api_keys WHERE id = ?`, id))
	return one(k, err, "API key", "API key "+id)
}

// APIKeys lists every key, oldest first.
func (s apiKeyRoom) APIKeys(ctx context.Context) ([]APIKey, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	return queryAll(ctx, s.r, "API keys", scanKey, `SELECT `+apiKeyCols+` FROM api_keys ORDER BY created_at, id`)
}

// UpdateAPIKey sets the name and permissions of a live key (its secret,
// scope and creation stay) and its updated_at to at; ErrNotFound when
// the key is unknown or revoked.
func (s apiKeyRoom) UpdateAPIKey(ctx context.Context, id, name string, permissions []string, at time.Time) error {
	return s.writeOne(ctx, "update API key", "API key "+id,
		`UPDATE api_keys SET name = ?, permissions = ?, updated_at = ? WHERE id = ? AND revoked_at IS NULL`,
		name, APIKey{Permissions: permissions}.permissionsColumn(), at.UTC().UnixNano(), id)
}

// RevokeAPIKey marks the key revoked (ErrNotFound when unknown). The row
// stays, so a revoked id is never reused. The webhooks the key made are
// disabled in the same transaction (DisabledReason "key_revoked"): no
// event is fanned out to them, none of their pending deliveries is
// claimed, from its commit on.
func (s apiKeyRoom) RevokeAPIKey(ctx context.Context, id string) error {
	return s.write(ctx, func(tx Tx) error {
		if err := execOne(tx, "revoke API key", "API key "+id,
			`UPDATE api_keys SET revoked_at = coalesce(revoked_at, ?) WHERE id = ?`, time.Now().UTC().UnixNano(), id); err != nil {
			return err
		}
		if _, err := tx.Exec(`UPDATE api_webhooks SET enabled = ?, disabled_reason = 'key_revoked', updated_at = ?
			WHERE key_id = ? AND enabled`, false, time.Now().UTC().UnixNano(), id); err != nil {
			return fmt.Errorf("store: revoke API key: %w", err)
		}
		return nil
	})
}

// ClientIDTaken is the ErrConflict of CreateInbox when the client_id
// already names another inbox: a front end that must not show that inbox
// to its caller can tell it from an existing address.
type ClientIDTaken struct{ ClientID, Address string }

func (e *ClientIDTaken) Error() string {
	return fmt.Sprintf("client_id %q names inbox %s: %v", e.ClientID, e.Address, ErrConflict)
}

func (e *ClientIDTaken) Unwrap() error { return ErrConflict }

// Inbox is an inbox of the HTTP API.
type Inbox struct {
	Address     string
	DisplayName string
	ClientID    string
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

const inboxCols = `address, display_name, coalesce(client_id, ''), created_at, updated_at`

func scanInbox(sc scanner) (Inbox, error) {
	var b Inbox
	var c, u int64
	if err := sc.Scan(&b.Address, &b.DisplayName, &b.ClientID, &c, &u); err != nil {
		return b, err
	}
	b.CreatedAt, b.UpdatedAt = time.Unix(0, c).UTC(), time.Unix(0, u).UTC()
	return b, nil
}

// syncBatch bounds the messages indexed per write transaction.
const syncBatch = 2000

// inboxesOf names the inboxes a stored message shows in: its mailbox when
// it has one (relay mode); else the recipients of received mail and the
// sender of sent mail.
func inboxesOf(mailbox, direction, sender, rcpts string) []string {
	if mailbox != "" {
		return []string{mailbox}
	}
	if direction == DirOut {
		if sender == "" {
			return nil
		}
		return []string{strings.ToLower(sender)}
	}
	var rs []string
	_ = json.Unmarshal([]byte(rcpts), &rs)
	var out []string
	for _, r := range rs {
		r = strings.ToLower(r)
		if r != "" && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// SyncInboxes indexes the messages stored since the last call into their
// inboxes (creating the inbox rows), at most max of them (0: all, in
// batches), and returns how many it indexed. A reader answers the common
// case (nothing new) without the writer.
func (s indexRoom) SyncInboxes(ctx context.Context, max int) (int, error) {
	if s.isClosed() {
		return 0, ErrClosed
	}
	if err := s.awaitCommitted(ctx); err != nil {
		return 0, err
	}
	total := 0
	for {
		var pending bool
		// New messages, or relay mailboxes (envelopd mailbox add) not yet
		// inboxes. On Postgres only messages no later commit can precede
		// count (dialect visible): the high-water mark never passes a
		// message that commits late.
		err := s.r.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM messages m WHERE m.id > (SELECT synced_id FROM api_sync)`+s.and(s.d.visible)+`)
			OR EXISTS (SELECT 1 FROM mailboxes b WHERE NOT EXISTS (SELECT 1 FROM api_inboxes a WHERE a.address = b.address))`).Scan(&pending)
		if err != nil {
			return total, fmt.Errorf("store: sync inboxes: %w", err)
		}
		if !pending {
			return total, nil
		}
		n := 0
		err = s.write(ctx, func(tx Tx) error {
			n = 0
			if _, err := tx.Exec(`INSERT INTO api_inboxes (address, created_at, updated_at)
				SELECT address, created_at, created_at FROM mailboxes WHERE true ON CONFLICT (address) DO NOTHING`); err != nil {
				return fmt.Errorf("store: sync inboxes: %w", err)
			}
			var synced int64
			// FOR UPDATE: nodes syncing at once take turns, so the mark
			// only moves forward.
			if err := tx.QueryRow(`SELECT synced_id FROM api_sync` + s.d.forUpdate).Scan(&synced); err != nil {
				return fmt.Errorf("store: sync inboxes: %w", err)
			}
			rows, err := tx.Query(`SELECT m.id, m.mailbox, m.direction, m.sender, m.recipients, m.thread_id, m.received_at, m.received_as, m.size FROM messages m
				WHERE m.id > ?`+s.and(s.d.visible)+` ORDER BY m.id LIMIT ?`, synced, syncBatch)
			type item struct {
				id, at, size                         int64
				mailbox, dir, sender, rcpts, thr, as string
			}
			items, err := collect(rows, err, "store: sync inboxes", func(sc scanner) (it item, err error) {
				err = sc.Scan(&it.id, &it.mailbox, &it.dir, &it.sender, &it.rcpts, &it.thr, &it.at, &it.as, &it.size)
				return it, err
			})
			if err != nil {
				return err
			}
			usage := map[usageKey]*usageDelta{}
			for _, it := range items {
				for _, b := range inboxesOf(it.mailbox, it.dir, it.sender, it.rcpts) {
					// Inbound lists mark what they refused when the
					// message was stored (receivedAs).
					labels := " "
					if blockedFor(it.as, b) {
						labels = " " + LabelBlocked + " "
					}
					if _, err := tx.Exec(`INSERT INTO api_inboxes (address, created_at, updated_at) VALUES (?, ?, ?)
						ON CONFLICT (address) DO UPDATE SET deleted = 0`, b, it.at, it.at); err != nil {
						return fmt.Errorf("store: sync inboxes: %w", err)
					}
					res, err := tx.Exec(`INSERT INTO inbox_messages (inbox, message_id, thread_id, labels) VALUES (?, ?, ?, ?)
						ON CONFLICT DO NOTHING`, b, it.id, it.thr, labels)
					if err != nil {
						return fmt.Errorf("store: sync inboxes: %w", err)
					}
					// A new thread of the inbox is an insert, a known one
					// moves its last message (usage counts the new ones).
					res2, err := tx.Exec(`INSERT INTO inbox_threads (inbox, thread_id, last_id) VALUES (?, ?, ?)
						ON CONFLICT (inbox, thread_id) DO NOTHING`, b, it.thr, it.id)
					if err != nil {
						return fmt.Errorf("store: sync inboxes: %w", err)
					}
					newThread, _ := res2.RowsAffected()
					if newThread == 0 {
						if _, err := tx.Exec(`UPDATE inbox_threads SET last_id = ? WHERE inbox = ? AND thread_id = ? AND last_id < ?`, it.id, b, it.thr, it.id); err != nil {
							return fmt.Errorf("store: sync inboxes: %w", err)
						}
					}
					if added, _ := res.RowsAffected(); added > 0 {
						usageCount(usage, b, it.at, it.size, newThread > 0)
					}
				}
				synced = it.id
				n++
			}
			if err := putUsage(tx, usage); err != nil {
				return err
			}
			if len(items) > 0 {
				for _, q := range s.d.indexSearch {
					if _, err := tx.Exec(q, items[0].id-1, synced); err != nil {
						return fmt.Errorf("store: sync search index: %w", err)
					}
				}
			}
			_, err = tx.Exec(`UPDATE api_sync SET synced_id = ?`, synced)
			return err
		})
		if err != nil {
			return total, err
		}
		total += n
		if n < syncBatch || (max > 0 && total >= max) {
			return total, nil
		}
	}
}

// awaitCommitted gives the API read-your-writes on Postgres: when messages
// have committed that the index has not taken yet, it waits until every
// transaction that was running when it was called has ended, so that the
// cursor (dialect visible) covers every message committed before the
// call — a message sent a moment ago by this caller is listed. The wait
// is bounded (a long transaction elsewhere on the server holds the line
// back: the index then catches up on a later call). SQLite's ids commit
// in order: nothing to wait for.
func (s *core) awaitCommitted(ctx context.Context) error {
	if s.d.snapshotXmax == "" {
		return nil
	}
	var any bool
	if err := s.r.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM messages m WHERE m.id > (SELECT synced_id FROM api_sync) AND NOT (`+s.d.visible+`))`).Scan(&any); err != nil {
		return fmt.Errorf("store: sync inboxes: %w", err)
	}
	if !any {
		return nil
	}
	var line int64
	if err := s.r.QueryRowContext(ctx, `SELECT `+s.d.snapshotXmax).Scan(&line); err != nil {
		return fmt.Errorf("store: sync inboxes: %w", err)
	}
	deadline := time.Now().Add(awaitCommittedMax)
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		var xmin int64
		if err := s.r.QueryRowContext(ctx, `SELECT `+s.d.snapshotXmin).Scan(&xmin); err != nil {
			return fmt.Errorf("store: sync inboxes: %w", err)
		}
		if xmin >= line || time.Now().After(deadline) {
			return nil
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// awaitCommittedMax bounds awaitCommitted.
const awaitCommittedMax = 2 * time.Second

// CreateInbox creates the inbox address (or makes a deleted one visible
// again). With a clientID, a second create with the same clientID returns
// the first inbox (created false); the same clientID for another address
// is ErrConflict, and so is an existing address without a clientID match.
func (s indexRoom) CreateInbox(ctx context.Context, address, displayName, clientID string, mailbox bool) (Inbox, bool, error) {
	if err := checkMailbox(address); err != nil {
		return Inbox{}, false, err
	}
	var out Inbox
	created := false
	err := s.write(ctx, func(tx Tx) error {
		// Twice at most: a create racing this one (another node, on
		// Postgres) makes the INSERT wait for its commit and do nothing;
		// the second round reads what it committed.
		for round := 0; ; round++ {
			again, err := s.createInboxTx(tx, &out, &created, address, displayName, clientID, mailbox, round > 0)
			if !again {
				return err
			}
		}
	})
	return out, created, err
}

// createInboxTx is one round of CreateInbox; again reports an insert that
// lost a race (nothing inserted): the caller reads again.
func (s indexRoom) createInboxTx(tx Tx, out *Inbox, created *bool, address, displayName, clientID string, mailbox, last bool) (again bool, _ error) {
	*created = false
	now := time.Now().UTC().UnixNano()
	if clientID != "" {
		b, err := scanInbox(tx.QueryRow(`SELECT `+inboxCols+` FROM api_inboxes WHERE client_id = ?`, clientID))
		if err == nil {
			if b.Address != address {
				return false, &ClientIDTaken{ClientID: clientID, Address: b.Address}
			}
			*out = b
			return false, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return false, fmt.Errorf("store: create inbox: %w", err)
		}
	}
	var deleted int
	err := tx.QueryRow(`SELECT deleted FROM api_inboxes WHERE address = ?`, address).Scan(&deleted)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		var cid any
		if clientID != "" {
			cid = clientID
		}
		// The UNIQUE keys (address, client_id) decide a race: the loser
		// inserts nothing and reads the winner's row in the next round.
		res, err := tx.Exec(`INSERT INTO api_inboxes (address, display_name, client_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT DO NOTHING`, address, displayName, cid, now, now)
		if err != nil {
			return false, fmt.Errorf("store: create inbox: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return false, fmt.Errorf("store: create inbox: %w", err)
		} else if n == 0 {
			if last {
				return false, fmt.Errorf("inbox %s exists: %w", address, ErrConflict)
			}
			return true, nil
		}
		*created = true
	case err != nil:
		return false, fmt.Errorf("store: create inbox: %w", err)
	case deleted == 0:
		if clientID != "" && !last {
			// Committed by a racing create after the client_id read
			// above (another node): read again, it may be this one's.
			return true, nil
		}
		return false, fmt.Errorf("inbox %s exists: %w", address, ErrConflict)
	default:
		var cid any
		if clientID != "" {
			cid = clientID
		}
		if _, err := tx.Exec(`UPDATE api_inboxes SET deleted = 0, display_name = ?, client_id = ?, updated_at = ? WHERE address = ?`,
			displayName, cid, now, address); err != nil {
			return false, fmt.Errorf("store: create inbox: %w", err)
		}
		*created = true
	}
	if mailbox {
		if _, err := ensureMailboxTx(tx, address, time.Now().UTC()); err != nil {
			return false, err
		}
	}
	b, err := scanInbox(tx.QueryRow(`SELECT `+inboxCols+` FROM api_inboxes WHERE address = ?`, address))
	if err != nil {
		return false, fmt.Errorf("store: create inbox: %w", err)
	}
	*out = b
	return false, nil
}

// InboxByAddress returns a visible inbox, or ErrNotFound.
func (s indexRoom) InboxByAddress(ctx context.Context, address string) (Inbox, error) {
	if s.isClosed() {
		return Inbox{}, ErrClosed
	}
	b, err := scanInbox(s.r.QueryRowContext(ctx, `SELECT `+inboxCols+` FROM api_inboxes WHERE address = ? AND deleted = 0`, address))
	return one(b, err, "inbox", "inbox "+address)
}

// Inboxes lists visible inboxes by address, after the address after
// (keyset), at most limit, restricted to only when it is not nil.
func (s indexRoom) Inboxes(ctx context.Context, after string, limit int, desc bool, only []string) ([]Inbox, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	q := `SELECT ` + inboxCols + ` FROM api_inboxes WHERE deleted = 0`
	var args []any
	if after != "" {
		if desc {
			q += ` AND address < ?`
		} else {
			q += ` AND address > ?`
		}
		args = append(args, after)
	}
	if only != nil {
		if len(only) == 0 {
			return []Inbox{}, nil
		}
		q += ` AND address IN (` + placeholders(len(only)) + `)`
		for _, o := range only {
			args = append(args, o)
		}
	}
	q += ` ORDER BY address`
	if desc {
		q += ` DESC`
	}
	q += ` LIMIT ?`
	args = append(args, limit)
	return queryAll(ctx, s.r, "inboxes", scanInbox, q, args...)
}

// UpdateInbox sets the display name of a visible inbox.
func (s indexRoom) UpdateInbox(ctx context.Context, address, displayName string) error {
	return s.writeOne(ctx, "update inbox", "inbox "+address,
		`UPDATE api_inboxes SET display_name = ?, updated_at = ? WHERE address = ? AND deleted = 0`,
		displayName, time.Now().UTC().UnixNano(), address)
}

// DeleteInbox hides the inbox and empties its index; the stored messages
// (and a relay mailbox) stay. New mail for the address shows it again.
func (s indexRoom) DeleteInbox(ctx context.Context, address string) error {
	return s.write(ctx, func(tx Tx) error {
		if err := execOne(tx, "delete inbox", "inbox "+address,
			`UPDATE api_inboxes SET deleted = 1, client_id = NULL, updated_at = ? WHERE address = ? AND deleted = 0`,
			time.Now().UTC().UnixNano(), address); err != nil {
			return err
		}
		if _, err := tx.Exec(`DELETE FROM inbox_messages WHERE inbox = ?`, address); err != nil {
			return fmt.Errorf("store: delete inbox: %w", err)
		}
		if _, err := tx.Exec(`DELETE FROM inbox_threads WHERE inbox = ?`, address); err != nil {
			return fmt.Errorf("store: delete inbox: %w", err)
		}
		return nil
	})
}

// InboxMessage is a stored message as an inbox shows it.
type InboxMessage struct {
	Inbox  string
	Labels []string // user labels
	Message
}

// InboxQuery selects an inbox's messages (or, with Inboxes, several
// inboxes' threads). Zero fields match everything.
type InboxQuery struct {
	Inbox    string
	Inboxes  []string // org-wide lists: restrict to these (nil: all)
	ThreadID string
	// Labels must all be present: "received", "sent", a status
	// (accepted, quarantined, duplicate) or a user label.
	Labels        []string
	Before, After time.Time // received_at bounds (exclusive, inclusive)
	// Filters of the web inbox; "" matches everything. Type
	// is the Envelopay type (lower case), Sender the envelope sender (a
	// lower-case address), ErrorCode an error or warning code
	// (duplicate_proof, amount_mismatch, …).
	Type, Sender, ErrorCode string
	// Search is free text over subject and note: every word must occur
	// (as a word or a word prefix, case and diacritics folded). SQLite
	// answers it from the FTS5 index message_fts; another backend from
	// its own (tsvector, ILIKE) with the same meaning.
	Search    string
	Ascending bool
	// Cursor: the last row of the previous page (message or last-message
	// id, and its inbox for org-wide thread lists); 0 for the first page.
	CursorID    int64
	CursorInbox string
	Limit       int
}

// labelCond is the SQL condition for one label on messages m and index x.
func labelCond(d *dialect, l string) (string, []any) {
	switch l {
	case "received":
		return `m.direction = 'in'`, nil
	case "sent":
		return `m.direction = 'out'`, nil
	case StatusAccepted, StatusQuarantined, StatusDuplicate:
		return `m.status = ?`, []any{l}
	}
	return d.instr + `(x.labels, ?) > 0`, []any{" " + l + " "}
}

// where is the WHERE condition of q on messages m and index x; drive,
// when not nil, is the search's words the index is asked for
// (searchDrive).
func (q *InboxQuery) where(d *dialect, drive []string) (string, []any) {
	var w clause
	w.addIf(q.Inbox != "", `x.inbox = ?`, q.Inbox)
	w.addIf(q.ThreadID != "", `x.thread_id = ?`, q.ThreadID)
	for _, l := range q.Labels {
		c, a := labelCond(d, l)
		w.add(c, a...)
	}
	w.addIf(q.Type != "", `m.type = ?`, q.Type)
	w.addIf(q.Sender != "", `m.sender = ?`, q.Sender)
	if q.ErrorCode != "" {
		// The lists may be the stored result's (problems.go): their codes
		// are the message's filter tags. No code the store writes makes a
		// tag longer than maxTagBytes (codeTags keeps none).
		if t := "code:" + q.ErrorCode; len(t) <= maxTagBytes {
			w.add(d.tagged, t)
		} else {
			w.add(`false`)
		}
	}
	c, a := d.search(q.Search)
	if drive != nil {
		c, a = d.searchDriven(q.Search, drive)
	}
	w.addIf(c != "", c, a...)
	w.addIf(!q.Before.IsZero(), `m.received_at < ?`, q.Before.UTC().UnixNano())
	w.addIf(!q.After.IsZero(), `m.received_at >= ?`, q.After.UTC().UnixNano())
	if len(w.sql) == 0 {
		return "true", nil
	}
	return strings.Join(w.sql, " AND "), w.args
}

// clause gathers the conditions of a WHERE clause and their arguments.
type clause struct {
	sql  []string
	args []any
}

func (w *clause) add(cond string, args ...any) {
	w.sql = append(w.sql, cond)
	w.args = append(w.args, args...)
}

// addIf adds the condition when ok.
func (w *clause) addIf(ok bool, cond string, args ...any) {
	if ok {
		w.add(cond, args...)
	}
}

// searchWords are the words of free text a search requires: runs of
// letters and digits, at most 16.
func searchWords(text string) []string {
	words := strings.FieldsFunc(text, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	return words[:min(len(words), 16)]
}

// FTSQuery turns free text into an FTS5 query: each word a quoted
// prefix term, all required; "" when the text has no word. User text
// never reaches FTS5's query syntax.
func FTSQuery(text string) string {
	var terms []string
	for _, w := range searchWords(text) {
		terms = append(terms, `"`+w+`"*`)
	}
	return strings.Join(terms, " ")
}

// TSQuery is FTSQuery for Postgres's to_tsquery: each word a quoted
// prefix term, all required (&); "" when the text has no word. The words
// hold only letters and digits, so user text never reaches the query
// syntax.
func TSQuery(text string) string {
	var terms []string
	for _, w := range searchWords(text) {
		terms = append(terms, `'`+w+`':*`)
	}
	return strings.Join(terms, " & ")
}

// maxPrefixTerms bounds the index terms one search word is expanded to;
// a word with more stays a prefix term.
const maxPrefixTerms = 32

// sqliteMatch is FTSQuery(text) with the prefix term of each ASCII word
// replaced by the index terms it covers (from the vocabulary
// message_fts_terms, migration 24): ("order" OR "orders"), or the word
// itself as an exact term when the index has none (it then matches
// nothing, as the prefix would). The meaning is the prefix's, and FTS5
// walks exact terms' doclists lazily, where a prefix term first merges
// every matching doclist. An ASCII word's FTS5 token is the word in lower
// case (unicode61 folds nothing else in it); other words, and words
// covering more than maxPrefixTerms terms, stay prefix terms.
func (s indexRoom) sqliteMatch(ctx context.Context, text string) (string, error) {
	var out []string
	for _, w := range searchWords(text) {
		out = append(out, `"`+w+`"*`)
		lw := strings.ToLower(w)
		if !isASCII(lw) {
			continue
		}
		// Every term with prefix lw sorts in [lw, hi): lw's last byte
		// is a letter or digit, below 0x7f.
		hi := lw[:len(lw)-1] + string(lw[len(lw)-1]+1)
		var terms []string
		from := lw
		for len(terms) <= maxPrefixTerms {
			// A range scan of the vocabulary seeks to its lower bound;
			// the next term is the first at or after term+"\x01" (terms
			// hold no control characters), which skips the current
			// term's instances instead of stepping over them.
			var t string
			err := s.r.QueryRowContext(ctx, `SELECT term FROM message_fts_terms WHERE term >= ? AND term < ? LIMIT 1`, from, hi).Scan(&t)
			if errors.Is(err, sql.ErrNoRows) {
				break
			}
			if err != nil {
				return "", fmt.Errorf("store: search: %w", err)
			}
			terms = append(terms, `"`+strings.ReplaceAll(t, `"`, `""`)+`"`)
			from = t + "\x01"
		}
		switch {
		case len(terms) > maxPrefixTerms:
		case len(terms) == 0:
			out[len(out)-1] = `"` + lw + `"`
		default:
			out[len(out)-1] = "(" + strings.Join(terms, " OR ") + ")"
		}
	}
	// An explicit AND: FTS5 ANDs adjacent phrases, not groups.
	return strings.Join(out, " AND "), nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// sqliteSearch is the dialect's search condition on SQLite: the FTS5
// index message_fts (migration 14).
func sqliteSearch(text string) (string, []any) {
	match := FTSQuery(text)
	if match == "" {
		return "", nil
	}
	return `m.id IN (SELECT rowid FROM message_fts WHERE message_fts MATCH ?)`, []any{match}
}

// sqliteSearchWalk is the dialect's ordered search on SQLite: FTS5 walks
// a MATCH (sqliteMatch's) in rowid order (ascending or descending) and
// takes a rowid range as part of the query (the cursor), so a page reads
// about as many matches as it shows (divided by the share of matches its
// inbox holds).
func sqliteSearchWalk(match string) (from, id, cond string, args []any) {
	return `message_fts f`, `f.rowid`, `message_fts MATCH ?`, []any{match}
}

// pgDoc is a message's search document on Postgres, spelled as the GIN
// index messages_fts is (migration 32 of postgres_schema.go) so that the
// planner uses it: the tsvector of its subject and note.
const pgDoc = `envelopd_doc(subject, note, result)`

// pgSearch is the dialect's search condition on Postgres: the tsvector
// index messages_fts, folded by envelopd_fold as the index is (case and
// Latin diacritics).
func pgSearch(text string) (string, []any) {
	q := TSQuery(text)
	if q == "" {
		return "", nil
	}
	return `m.id IN (SELECT id FROM messages WHERE ` + pgDoc + ` @@ to_tsquery('simple', envelopd_fold(?)))`, []any{q}
}

// pgSearchDriven is pgSearch asking the GIN index for the words of drive
// only (some of text's words) and testing the whole query on the rows it
// finds: the same rows, every word still required. OFFSET 0 keeps the
// planner from moving the outer test into the index scan, which would
// collect the common words' postings again.
func pgSearchDriven(text string, drive []string) (string, []any) {
	return `m.id IN (SELECT f.id FROM (SELECT id, ` + pgDoc + ` AS doc FROM messages
			WHERE ` + pgDoc + ` @@ to_tsquery('simple', envelopd_fold(?)) OFFSET 0) AS f
		WHERE f.doc @@ to_tsquery('simple', envelopd_fold(?)))`, []any{TSQuery(strings.Join(drive, " ")), TSQuery(text)}
}

// pgSearchShares is the query of n words' shares on Postgres: the sum of
// the frequencies of the most common lexemes of the search index's
// expression that the folded word is a prefix of (ANALYZE's statistics
// of an expression index's column, kept under the index's name: the
// planner's own for @@). A lexeme not among them is rarer than
// every one that is; without statistics every share is 0.
func pgSearchShares(n int) string {
	return `SELECT w.i, coalesce(sum(s.f), 0) FROM unnest(ARRAY[` + strings.TrimSuffix(strings.Repeat("envelopd_fold(?::text), ", n), ", ") + `])
			WITH ORDINALITY AS w(word, i)
		LEFT JOIN (SELECT x.e, x.f FROM pg_stats p, unnest(p.most_common_elems::text::text[], p.most_common_elem_freqs) AS x(e, f)
			WHERE p.schemaname = current_schema() AND p.tablename = 'messages_fts' AND p.attname = 'envelopd_doc') AS s
		ON starts_with(s.e, w.word)
		GROUP BY w.i`
}

// commonShare is the share of the indexed messages, in ten-thousandths,
// from which a search word counts as common (searchDrive). Tests set it.
var commonShare = tunable(100)

// searchDrive returns the words of text a Postgres search asks its index
// for, nil for all of them. A GIN index answers a prefix term (how every
// search word is matched) by first collecting every posting of every
// lexeme it covers into a bitmap, whatever the other terms: "order" then
// costs one entry per message holding it even when the search's other
// word is in four. So the words whose prefix covers commonShare of the
// messages or more, by the planner's statistics, are left out of the
// index scan and tested on the rows the rarer words find
// (searchDriven). When every word is common, or none, the whole query
// goes to the index condition as before (the planner may then walk the
// inbox and test each message). One word is never split.
func (s indexRoom) searchDrive(ctx context.Context, text string) ([]string, error) {
	words := searchWords(text)
	if s.d.searchShares == nil || len(words) < 2 {
		return nil, nil
	}
	args := make([]any, len(words))
	for i, w := range words {
		args[i] = w
	}
	var drive []string
	rows, err := s.r.QueryContext(ctx, s.d.searchShares(len(words)), args...)
	err = eachRow(rows, err, "store: search", func(sc scanner) error {
		var i int
		var share float64
		if err := sc.Scan(&i, &share); err != nil {
			return err
		}
		if i >= 1 && i <= len(words) && share*10000 < float64(commonShare.Load()) {
			drive = append(drive, words[i-1])
		}
		return nil
	})
	if err != nil || len(drive) == len(words) {
		return nil, err
	}
	return drive, nil
}

// searchWhere is q.where with the search split as searchDrive finds.
func (s indexRoom) searchWhere(ctx context.Context, q InboxQuery) (string, []any, error) {
	drive, err := s.searchDrive(ctx, q.Search)
	if err != nil {
		return "", nil, err
	}
	w, a := q.where(s.d, drive)
	return w, a, nil
}

// rareTagLimit is how many messages a filter value may have for a list to
// start from them (their tags) rather than walk the inbox newest first
// until a page is full: a walk is fast when matches are common, a start
// from the tag when they are rare.
const rareTagLimit = 2000

// maxTagBytes bounds the filter tags a list looks up (Postgres keeps none
// longer: migrations 14 and 29 of postgres_schema.go).
const maxTagBytes = 1000

// rareTag returns the filter tag (dialect tagCount) of q's rarest filter (status,
// type, sender, error code) when fewer than rareTagLimit messages carry
// it, else "".
func (s indexRoom) rareTag(ctx context.Context, q InboxQuery) (string, error) {
	var tags []string
	for _, l := range q.Labels {
		if l == StatusAccepted || l == StatusQuarantined || l == StatusDuplicate {
			tags = append(tags, "status:"+l)
		}
	}
	if q.Type != "" {
		tags = append(tags, "type:"+q.Type)
	}
	if q.Sender != "" {
		tags = append(tags, "sender:"+q.Sender)
	}
	if q.ErrorCode != "" {
		tags = append(tags, "code:"+q.ErrorCode)
	}
	best, bestN := "", rareTagLimit
	for _, t := range tags {
		if len(t) > maxTagBytes {
			// Postgres does not keep such a tag (a btree entry is
			// bounded): walk the inbox instead.
			continue
		}
		var n int
		if err := s.r.QueryRowContext(ctx, s.d.tagCount, t, rareTagLimit).Scan(&n); err != nil {
			return "", fmt.Errorf("store: inbox messages: %w", err)
		}
		if n < bestN {
			best, bestN = t, n
		}
	}
	return best, nil
}

// InboxMessages lists the inbox's messages in id order (newest first
// unless Ascending), after the cursor, at most Limit.
func (s indexRoom) InboxMessages(ctx context.Context, q InboxQuery) ([]InboxMessage, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	op, order := "<", "DESC"
	if q.Ascending {
		op, order = ">", "ASC"
	}
	tag, err := s.rareTag(ctx, q)
	if err != nil {
		return nil, err
	}
	if tag == "" && q.Inbox != "" && q.ThreadID == "" && s.d.searchWalk != nil {
		match, err := s.sqliteMatch(ctx, q.Search)
		if err != nil {
			return nil, err
		}
		if match != "" {
			from, id, cond, cargs := s.d.searchWalk(match)
			// Walk the page from the index: its matches newest first
			// (after the cursor, pushed into the index as an id range),
			// each looked up in the inbox by primary key. CROSS JOIN
			// fixes that order of the loops.
			sub := q
			sub.Search = ""
			conds, args := cond, cargs
			if q.CursorID > 0 {
				conds += ` AND ` + id + ` ` + op + ` ?`
				args = append(args, q.CursorID)
			}
			where, wargs := sub.where(s.d, nil)
			args = append(args, wargs...)
			sqlq := `SELECT x.inbox, x.labels, ` + messageCols + ` FROM ` + from + ` CROSS JOIN inbox_messages x CROSS JOIN messages m
				WHERE ` + conds + ` AND x.message_id = ` + id + ` AND m.id = ` + id + ` AND ` + where + ` ORDER BY ` + id + ` ` + order
			if q.Limit > 0 {
				sqlq += ` LIMIT ?`
				args = append(args, q.Limit)
			}
			return s.inboxQuery(ctx, sqlq, args...)
		}
	}
	where, args, err := s.searchWhere(ctx, q)
	if err != nil {
		return nil, err
	}
	if q.CursorID > 0 {
		where += ` AND x.message_id ` + op + ` ?`
		args = append(args, q.CursorID)
	}
	if tag != "" {
		// A rare filter value: start from its few messages (the other
		// conditions above still apply) instead of walking the inbox.
		where += ` AND ` + s.d.tagged
		args = append(args, tag)
	}
	from := `inbox_messages x`
	if q.ThreadID != "" && q.Inbox != "" {
		// Without statistics SQLite would walk the whole inbox by its
		// primary key (which gives the order) instead of the thread's
		// index (which gives it too).
		from = `inbox_messages x` + s.d.inboxThreadIndex
	}
	sqlq := `SELECT x.inbox, x.labels, ` + messageCols + ` FROM ` + from + ` JOIN messages m ON m.id = x.message_id
		WHERE ` + where + ` ORDER BY x.message_id ` + order
	if q.Limit > 0 {
		sqlq += ` LIMIT ?`
		args = append(args, q.Limit)
	}
	return s.inboxQuery(ctx, sqlq, args...)
}

func (s indexRoom) inboxQuery(ctx context.Context, q string, args ...any) ([]InboxMessage, error) {
	out, err := queryAll(ctx, s.r, "inbox messages", func(sc scanner) (im InboxMessage, err error) {
		var labels string
		im.Message, err = scanMessage(prefixScanner{sc, []any{&im.Inbox, &labels}}, false)
		im.Labels = strings.Fields(labels)
		return im, err
	}, q, args...)
	if err != nil {
		return nil, err
	}
	if err := s.attachPayments(ctx, len(out), func(i int) *Message { return &out[i].Message }); err != nil {
		return nil, err
	}
	return out, nil
}

// prefixScanner scans leading columns into pre before the message's.
type prefixScanner struct {
	sc  scanner
	pre []any
}

func (p prefixScanner) Scan(dest ...any) error {
	return p.sc.Scan(append(append([]any{}, p.pre...), dest...)...)
}

// InboxMessageByRef finds a message of the inbox by its Message-ID (angle
// brackets allowed) or, for a number, its row id; the newest copy wins.
func (s indexRoom) InboxMessageByRef(ctx context.Context, inbox, ref string) (*InboxMessage, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	mid := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(ref), "<"), ">")
	byMID, midArgs := s.d.midIs("m.message_id", mid)
	ms, err := s.inboxQuery(ctx, `SELECT x.inbox, x.labels, `+messageCols+` FROM messages m`+s.d.copyIndex+`
		JOIN inbox_messages x ON x.message_id = m.id AND x.inbox = ?
		WHERE `+byMID+` ORDER BY m.id DESC LIMIT 1`, append([]any{inbox}, midArgs...)...)
	if err != nil {
		return nil, err
	}
	if len(ms) == 0 {
		var id int64
		if _, err := fmt.Sscan(ref, &id); err == nil && fmt.Sprint(id) == ref {
			ms, err = s.inboxQuery(ctx, `SELECT x.inbox, x.labels, `+messageCols+` FROM inbox_messages x
				JOIN messages m ON m.id = x.message_id WHERE x.inbox = ? AND x.message_id = ?`, inbox, id)
			if err != nil {
				return nil, err
			}
		}
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("message %q of %s: %w", ref, inbox, ErrNotFound)
	}
	return &ms[0], nil
}

// SetInboxLabels adds and removes user labels of one indexed message and
// returns its user labels.
func (s indexRoom) SetInboxLabels(ctx context.Context, inbox string, id int64, add, remove []string) ([]string, error) {
	out, err := s.SetInboxLabelsBatch(ctx, inbox, []int64{id}, add, remove)
	if err != nil {
		return nil, err
	}
	if out[0] == nil {
		return nil, fmt.Errorf("message %d of %s: %w", id, inbox, ErrNotFound)
	}
	return out[0], nil
}

// SetInboxLabelsBatch adds and removes the same user labels on indexed
// messages of inbox in one transaction (all or none) and returns each
// one's user labels, in the order of ids: nil for an id the inbox does
// not hold.
func (s indexRoom) SetInboxLabelsBatch(ctx context.Context, inbox string, ids []int64, add, remove []string) ([][]string, error) {
	for _, l := range append(slices.Clone(add), remove...) {
		if l == "" || strings.ContainsAny(l, " \t\r\n\x00") || len(l) > 200 {
			return nil, fmt.Errorf("%w: label %q", ErrBadInput, l)
		}
	}
	var out [][]string
	err := s.write(ctx, func(tx Tx) error {
		out = make([][]string, len(ids))
		for i, id := range ids {
			var cur string
			err := tx.QueryRow(`SELECT labels FROM inbox_messages WHERE inbox = ? AND message_id = ?`, inbox, id).Scan(&cur)
			if errors.Is(err, sql.ErrNoRows) {
				continue
			}
			if err != nil {
				return fmt.Errorf("store: labels: %w", err)
			}
			ls := strings.Fields(cur)
			ls = append(ls, add...)
			ls = slices.DeleteFunc(ls, func(l string) bool { return slices.Contains(remove, l) })
			slices.Sort(ls)
			ls = slices.Compact(ls)
			if len(ls) > 100 {
				return fmt.Errorf("%w: more than 100 labels", ErrBadInput)
			}
			if _, err := tx.Exec(`UPDATE inbox_messages SET labels = ? WHERE inbox = ? AND message_id = ?`,
				" "+strings.Join(ls, " ")+" ", inbox, id); err != nil {
				return fmt.Errorf("store: labels: %w", err)
			}
			if err := logLabelEvents(tx, inbox, id, strings.Fields(cur), ls, time.Now()); err != nil {
				return err
			}
			out[i] = ls
			if out[i] == nil {
				out[i] = []string{}
			}
		}
		return nil
	})
	return out, err
}

// HideMessages removes messages from the inbox's index (the API's
// delete): the stored messages stay. thread, when not "", hides every
// message of that thread; ids the given ones. It reports ErrNotFound when
// nothing was hidden.
func (s indexRoom) HideMessages(ctx context.Context, inbox, thread string, ids []int64) error {
	return s.write(ctx, func(tx Tx) error {
		var n int64
		var threads []string
		if thread != "" {
			res, err := tx.Exec(`DELETE FROM inbox_messages WHERE inbox = ? AND thread_id = ?`, inbox, thread)
			if err != nil {
				return fmt.Errorf("store: delete: %w", err)
			}
			n, _ = res.RowsAffected()
			threads = append(threads, thread)
		}
		for _, id := range ids {
			var t string
			err := tx.QueryRow(`DELETE FROM inbox_messages WHERE inbox = ? AND message_id = ? RETURNING thread_id`, inbox, id).Scan(&t)
			if errors.Is(err, sql.ErrNoRows) {
				continue
			}
			if err != nil {
				return fmt.Errorf("store: delete: %w", err)
			}
			n++
			threads = append(threads, t)
		}
		if n == 0 {
			return fmt.Errorf("inbox %s: nothing to delete: %w", inbox, ErrNotFound)
		}
		for _, t := range threads {
			var last sql.NullInt64
			if err := tx.QueryRow(`SELECT max(message_id) FROM inbox_messages WHERE inbox = ? AND thread_id = ?`, inbox, t).Scan(&last); err != nil {
				return fmt.Errorf("store: delete: %w", err)
			}
			if !last.Valid {
				if _, err := tx.Exec(`DELETE FROM inbox_threads WHERE inbox = ? AND thread_id = ?`, inbox, t); err != nil {
					return fmt.Errorf("store: delete: %w", err)
				}
			} else if _, err := tx.Exec(`UPDATE inbox_threads SET last_id = ? WHERE inbox = ? AND thread_id = ?`, last.Int64, inbox, t); err != nil {
				return fmt.Errorf("store: delete: %w", err)
			}
		}
		return nil
	})
}

// commonMatches is how many matches make a search common: a thread list
// then walks the threads newest first and probes the index for each of
// their messages (a page is found after a few threads), where a rarer
// search starts from its matches' threads. Tests make it small to take
// both ways.
var commonMatches = tunable(5000)

// threadSearch returns a thread list's search conditions on SQLite: on
// the thread's messages x (inner) and on the thread t (outer), with
// sqliteMatch's terms. A common search (window true) probes the index
// for each message of the threads walked (exact terms only: a probe of a
// prefix term would merge its doclists each time); a page newest first
// is walked in windows instead (InboxThreads, windowMatch). A rarer one
// restricts the threads to its matches' (each match looked up in every
// inbox, found by a skip scan of inbox_threads) and tests the messages
// against the set of matches. inner is "" when neither applies (the
// dialect's condition then).
func (s indexRoom) threadSearch(ctx context.Context, text string) (inner string, innerArgs []any, outer string, outerArgs []any, window bool, err error) {
	match, err := s.sqliteMatch(ctx, text)
	if err != nil || match == "" {
		return "", nil, "", nil, false, err
	}
	var n int
	if err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT 1 FROM message_fts WHERE message_fts MATCH ? LIMIT ?) AS c`,
		match, commonMatches.Load()).Scan(&n); err != nil {
		return "", nil, "", nil, false, fmt.Errorf("store: threads: %w", err)
	}
	if int64(n) >= commonMatches.Load() {
		if strings.Contains(match, `"*`) {
			return "", nil, "", nil, false, nil // a prefix term was left: no cheap probe
		}
		return probeMatch, []any{match}, "", nil, true, nil
	}
	return `x.message_id IN (SELECT rowid FROM message_fts WHERE message_fts MATCH ?)`, []any{match},
		`(t.inbox, t.thread_id) IN (SELECT y.inbox, y.thread_id FROM message_fts f CROSS JOIN inbox_messages y
			WHERE message_fts MATCH ? AND y.message_id = f.rowid AND y.inbox IN (
				WITH RECURSIVE b(inbox) AS (SELECT min(inbox) FROM inbox_threads
					UNION ALL SELECT (SELECT min(inbox) FROM inbox_threads WHERE inbox > b.inbox) FROM b WHERE b.inbox IS NOT NULL)
				SELECT inbox FROM b WHERE inbox IS NOT NULL))`, []any{match}, false, nil
}

// probeMatch tests a message x against a MATCH by a probe of the index.
const probeMatch = `EXISTS (SELECT 1 FROM message_fts f WHERE message_fts MATCH ? AND f.rowid = x.message_id)`

// windowMatch tests a message x against a MATCH in a window [lo, hi) of
// rowids: a message in it against the window's matches, read once by one
// walk of the index; an older one (a thread's first messages can precede
// the window) by a probe. Its arguments are lo, match, lo, hi, lo, match.
const windowMatch = `((x.message_id >= ? AND x.message_id IN (SELECT rowid FROM message_fts WHERE message_fts MATCH ? AND rowid >= ? AND rowid < ?))
	OR (x.message_id < ? AND ` + probeMatch + `))`

// firstWindow is how many threads per page size the first window of a
// common search's walk holds; each next window is twice the last.
const firstWindow = 4

// ThreadRef is one thread of an inbox: its id and last message row id.
type ThreadRef struct {
	Inbox    string
	ThreadID string
	LastID   int64
}

// InboxThreads lists threads by last message (newest first unless
// Ascending), after the cursor (CursorID, and CursorInbox for org-wide
// lists), at most Limit. Inbox "" lists every inbox's (restricted to
// Inboxes when not nil). Labels filter on the thread's messages.
func (s indexRoom) InboxThreads(ctx context.Context, q InboxQuery) ([]ThreadRef, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	var scope []string
	var scopeArgs []any
	if q.Inbox != "" {
		scope = append(scope, `t.inbox = ?`)
		scopeArgs = append(scopeArgs, q.Inbox)
	} else if q.Inboxes != nil {
		if len(q.Inboxes) == 0 {
			return []ThreadRef{}, nil
		}
		scope = append(scope, `t.inbox IN (`+placeholders(len(q.Inboxes))+`)`)
		for _, b := range q.Inboxes {
			scopeArgs = append(scopeArgs, b)
		}
	}
	op, order := "<", "DESC"
	if q.Ascending {
		op, order = ">", "ASC"
	}
	// after is the keyset condition: threads after (id, inbox) in the
	// walk's order.
	after := func(id int64, inbox string) (string, []any) {
		if q.Inbox != "" {
			return `t.last_id ` + op + ` ?`, []any{id} // a range of inbox_threads_last
		}
		return `(t.last_id, t.inbox) ` + op + ` (?, ?)`, []any{id, inbox}
	}
	conds, args := slices.Clone(scope), slices.Clone(scopeArgs)
	if q.CursorID > 0 {
		c, a := after(q.CursorID, q.CursorInbox)
		conds, args = append(conds, c), append(args, a...)
	}
	var exists, window string
	var existsArgs []any
	if len(q.Labels) > 0 || !q.Before.IsZero() || !q.After.IsZero() || q.Type != "" || q.Sender != "" || q.ErrorCode != "" || FTSQuery(q.Search) != "" {
		sub := InboxQuery{Labels: q.Labels, Before: q.Before, After: q.After, Type: q.Type, Sender: q.Sender, ErrorCode: q.ErrorCode, Search: q.Search}
		var inner, outer string
		var innerArgs, outerArgs []any
		var windowed bool
		if s.d.searchWalk != nil && FTSQuery(q.Search) != "" {
			var err error
			if inner, innerArgs, outer, outerArgs, windowed, err = s.threadSearch(ctx, q.Search); err != nil {
				return nil, err
			}
			if inner != "" {
				sub.Search = ""
			}
		}
		// In one inbox a message the index finds is looked up by the
		// inbox's primary key; org-wide, Postgres has no index from a
		// message to the inboxes holding it, and a plan made for the few
		// rows a split search expects would scan one for each (SQLite's
		// rare search finds them by a skip scan, threadSearch): there the
		// whole query stays one index condition.
		w, a := sub.where(s.d, nil)
		if q.Inbox != "" {
			var err error
			if w, a, err = s.searchWhere(ctx, sub); err != nil {
				return nil, err
			}
		}
		exists = `EXISTS (SELECT 1 FROM inbox_messages x JOIN messages m ON m.id = x.message_id
			WHERE x.inbox = t.inbox AND x.thread_id = t.thread_id AND ` + w
		existsArgs = a
		switch {
		case windowed && !q.Ascending && q.Limit > 0:
			window = windowMatch
			existsArgs = append(existsArgs, innerArgs...)
		case inner != "":
			exists += ` AND ` + inner
			existsArgs = append(existsArgs, innerArgs...)
		}
		if window == "" {
			conds = append(conds, exists+`)`)
			args = append(args, existsArgs...)
		}
		if outer != "" {
			conds = append(conds, outer)
			args = append(args, outerArgs...)
		}
	}
	tail := ` ORDER BY t.last_id ` + order + `, t.inbox ` + order
	if window == "" {
		sqlq := `SELECT t.inbox, t.thread_id, t.last_id FROM inbox_threads t WHERE ` + and(conds) + tail
		if q.Limit > 0 {
			sqlq += ` LIMIT ?`
			args = append(args, q.Limit)
		}
		return s.threadRefs(ctx, nil, sqlq, args)
	}
	// A common search walks the threads newest first in windows: a
	// window is the next n threads (n = firstWindow × Limit, doubling),
	// its messages tested against the matches in the window's rowid
	// range, read by one walk of the index (the messages of a thread are
	// at most its last_id, and a thread of the window has last_id ≥ lo).
	// A page is found in the first window unless matches are sparse;
	// each window costs about its own threads and matches.
	match := existsArgs[len(existsArgs)-1]
	existsArgs = existsArgs[:len(existsArgs)-1]
	out := []ThreadRef{}
	hi := int64(math.MaxInt64)
	if q.CursorID > 0 {
		hi = q.CursorID + 1 // the cursor thread's own last message is not in a next thread
	}
	for n := firstWindow * q.Limit; ; n *= 2 {
		var lo int64
		err := s.r.QueryRowContext(ctx, `SELECT t.last_id FROM inbox_threads t WHERE `+and(conds)+tail+` LIMIT 1 OFFSET ?`,
			append(slices.Clone(args), n)...).Scan(&lo)
		if errors.Is(err, sql.ErrNoRows) {
			lo = 0 // fewer than n threads left: the window is the rest
		} else if err != nil {
			return nil, fmt.Errorf("store: threads: %w", err)
		}
		wc := append(slices.Clone(conds), `t.last_id >= ?`, exists+` AND `+window+`)`)
		wa := append(append(slices.Clone(args), lo), existsArgs...)
		wa = append(wa, lo, match, lo, hi, lo, match, q.Limit-len(out))
		page, err := s.threadRefs(ctx, out, `SELECT t.inbox, t.thread_id, t.last_id FROM inbox_threads t WHERE `+and(wc)+tail+` LIMIT ?`, wa)
		if err != nil {
			return nil, err
		}
		out = page
		if len(out) >= q.Limit || lo == 0 {
			return out, nil
		}
		// The next window: the threads before lo.
		c, a := after(lo, "")
		conds, args = append(slices.Clone(scope), c), append(slices.Clone(scopeArgs), a...)
		hi = lo
	}
}

func and(conds []string) string {
	if len(conds) == 0 {
		return "true"
	}
	return strings.Join(conds, " AND ")
}

// threadRefs appends the rows of a thread list query to out.
func (s indexRoom) threadRefs(ctx context.Context, out []ThreadRef, sqlq string, args []any) ([]ThreadRef, error) {
	rows, err := s.r.QueryContext(ctx, sqlq, args...)
	if err != nil {
		return nil, fmt.Errorf("store: threads: %w", err)
	}
	defer rows.Close()
	if out == nil {
		out = []ThreadRef{}
	}
	for rows.Next() {
		var t ThreadRef
		if err := rows.Scan(&t.Inbox, &t.ThreadID, &t.LastID); err != nil {
			return nil, fmt.Errorf("store: threads: %w", err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// ThreadInboxes returns the inboxes that show thread (by address).
func (s indexRoom) ThreadInboxes(ctx context.Context, thread string) ([]string, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	var out []string
	rows, err := s.r.QueryContext(ctx, `SELECT inbox FROM inbox_threads WHERE thread_id = ? ORDER BY inbox`, thread)
	err = eachRow(rows, err, "store: thread inboxes", func(sc scanner) error {
		var b string
		err := sc.Scan(&b)
		out = append(out, b)
		return err
	})
	return out, err
}
