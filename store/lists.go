package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Allow and block lists (AgentMail's Lists): entries are addresses or
// domains, per direction ("send": recipients of mail sent; "receive":
// senders of new mail; "reply": senders of replies to mail sent) and
// type ("allow", "block"), at an inbox's scope or at the one
// organisation's (Scope ""; the one pod is the organisation). The rule
// is ListVerdict's, here once for every front end.

// List directions and types.
const (
	ListSend    = "send"
	ListReceive = "receive"
	ListReply   = "reply"
	ListAllow   = "allow"
	ListBlock   = "block"
)

// ListEntry is one entry of a list.
type ListEntry struct {
	Scope     string // an inbox address, or "" for the organisation
	Direction string
	Type      string
	Entry     string // a lower-cased address or domain
	Reason    string
	CreatedAt time.Time
}

// EntryIsDomain reports whether an entry is a domain (no "@").
func (e ListEntry) EntryIsDomain() bool { return !strings.Contains(e.Entry, "@") }

// MaxListEntries bounds one list (scope, direction, type).
const MaxListEntries = 10000

func checkListEntry(e ListEntry) error {
	switch {
	case e.Direction != ListSend && e.Direction != ListReceive && e.Direction != ListReply:
		return fmt.Errorf("%w: list direction %q: want send, receive or reply", ErrBadInput, e.Direction)
	case e.Type != ListAllow && e.Type != ListBlock:
		return fmt.Errorf("%w: list type %q: want allow or block", ErrBadInput, e.Type)
	case e.Entry == "" || len(e.Entry) > 320 || e.Entry != strings.ToLower(e.Entry):
		return fmt.Errorf("%w: list entry %q", ErrBadInput, e.Entry)
	case len(e.Reason) > 1000:
		return fmt.Errorf("%w: a list entry's reason is at most 1000 bytes", ErrBadInput)
	}
	return nil
}

const listCols = `scope, direction, list_type, entry, reason, created_at`

func scanListEntry(r scanner) (ListEntry, error) {
	var e ListEntry
	var at int64
	if err := r.Scan(&e.Scope, &e.Direction, &e.Type, &e.Entry, &e.Reason, &at); err != nil {
		return ListEntry{}, err
	}
	e.CreatedAt = time.Unix(0, at).UTC()
	return e, nil
}

// PutListEntry adds an entry (an entry already there keeps its reason
// and time, and is returned).
func (s listRoom) PutListEntry(ctx context.Context, e ListEntry) (ListEntry, error) {
	if err := checkListEntry(e); err != nil {
		return ListEntry{}, err
	}
	var out ListEntry
	err := s.write(ctx, func(tx Tx) error {
		var n int
		if err := tx.QueryRow(`SELECT count(*) FROM api_lists WHERE scope = ? AND direction = ? AND list_type = ?`, e.Scope, e.Direction, e.Type).Scan(&n); err != nil {
			return fmt.Errorf("store: list entry: %w", err)
		}
		if n >= MaxListEntries {
			return fmt.Errorf("%w: a list holds at most %d entries", ErrBadInput, MaxListEntries)
		}
		if _, err := tx.Exec(`INSERT INTO api_lists (scope, direction, list_type, entry, reason, created_at) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (scope, direction, list_type, entry) DO NOTHING`, e.Scope, e.Direction, e.Type, e.Entry, e.Reason, e.CreatedAt.UTC().UnixNano()); err != nil {
			return fmt.Errorf("store: list entry: %w", err)
		}
		got, err := scanListEntry(tx.QueryRow(`SELECT `+listCols+` FROM api_lists WHERE scope = ? AND direction = ? AND list_type = ? AND entry = ?`,
			e.Scope, e.Direction, e.Type, e.Entry))
		if err != nil {
			return fmt.Errorf("store: list entry: %w", err)
		}
		out = got
		return nil
	})
	return out, err
}

// GetListEntry returns one entry (ErrNotFound).
func (s listRoom) GetListEntry(ctx context.Context, scope, direction, typ, entry string) (ListEntry, error) {
	e, err := scanListEntry(s.r.QueryRowContext(ctx, `SELECT `+listCols+` FROM api_lists WHERE scope = ? AND direction = ? AND list_type = ? AND entry = ?`,
		scope, direction, typ, strings.ToLower(entry)))
	if errors.Is(err, sql.ErrNoRows) {
		return ListEntry{}, fmt.Errorf("list entry %s: %w", entry, ErrNotFound)
	}
	if err != nil {
		return ListEntry{}, fmt.Errorf("store: list entry: %w", err)
	}
	return e, nil
}

// ListEntries lists one list, by entry, after the keyset cursor after
// ("": from the start); at most limit.
func (s listRoom) ListEntries(ctx context.Context, scope, direction, typ, after string, limit int) ([]ListEntry, error) {
	return queryAll(ctx, s.r, "list entries", scanListEntry, `SELECT `+listCols+` FROM api_lists WHERE scope = ? AND direction = ? AND list_type = ? AND entry > ?
		ORDER BY entry LIMIT ?`, scope, direction, typ, after, limit)
}

// DeleteListEntry removes an entry (ErrNotFound).
func (s listRoom) DeleteListEntry(ctx context.Context, scope, direction, typ, entry string) error {
	return s.writeOne(ctx, "delete list entry", "list entry "+entry,
		`DELETE FROM api_lists WHERE scope = ? AND direction = ? AND list_type = ? AND entry = ?`,
		scope, direction, typ, strings.ToLower(entry))
}

// ListVerdict decides whether address may pass inbox's lists in
// direction, AgentMail's way: the most specific scope that has any entry
// for the direction decides (the inbox's, else the organisation's); there
// a block entry matching the address or its domain (case-insensitive)
// blocks, and a non-empty allow list blocks every address it does not
// match. blocked is false when no list applies; entry names the
// matching block entry, or is "" for an allow list's refusal.
func (s listRoom) ListVerdict(ctx context.Context, inbox, direction, address string) (blocked bool, entry string, err error) {
	return listVerdict(func(q string, args ...any) *sql.Row { return s.r.QueryRowContext(ctx, q, args...) }, inbox, direction, address)
}

// listVerdict is ListVerdict's rule through any row reader (the reader
// pool, or a transaction).
func listVerdict(row func(q string, args ...any) *sql.Row, inbox, direction, address string) (blocked bool, entry string, err error) {
	address = strings.ToLower(strings.TrimSpace(address))
	_, domain, _ := strings.Cut(address, "@")
	count := func(q string, args ...any) (int, error) {
		var n int
		err := row(`SELECT count(*) FROM api_lists WHERE scope = ? AND direction = ?`+q, args...).Scan(&n)
		return n, err
	}
	for _, scope := range []string{strings.ToLower(inbox), ""} {
		n, err := count(``, scope, direction)
		if err != nil {
			return false, "", fmt.Errorf("store: list verdict: %w", err)
		}
		if n == 0 {
			continue // no list at this scope: the broader one decides
		}
		err = row(`SELECT entry FROM api_lists WHERE scope = ? AND direction = ? AND list_type = 'block' AND entry IN (?, ?)
			ORDER BY entry LIMIT 1`, scope, direction, address, domain).Scan(&entry)
		if err == nil {
			return true, entry, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return false, "", fmt.Errorf("store: list verdict: %w", err)
		}
		allow, err := count(` AND list_type = 'allow'`, scope, direction)
		if err != nil {
			return false, "", fmt.Errorf("store: list verdict: %w", err)
		}
		if allow == 0 {
			return false, "", nil
		}
		match, err := count(` AND list_type = 'allow' AND entry IN (?, ?)`, scope, direction, address, domain)
		if err != nil {
			return false, "", fmt.Errorf("store: list verdict: %w", err)
		}
		return match == 0, "", nil
	}
	return false, "", nil
}

// LabelBlocked is the label the inbox index gives a received message its
// receive (or, for a reply in a thread the inbox wrote in, reply) lists
// refuse: the message is stored and listed, marked, as AgentMail marks it.
const LabelBlocked = "blocked"

// inboundBlocked decides, in the index transaction, whether a received
// message from sender in thread is blocked for inbox: a message in a
// thread the inbox has sent in is a reply (the reply lists decide),
// any other the receive lists decide.
func inboundBlocked(tx Tx, inbox, thread, sender string) (bool, error) {
	var replied bool
	if err := tx.QueryRow(`SELECT EXISTS (SELECT 1 FROM inbox_messages im JOIN messages m ON m.id = im.message_id
		WHERE im.inbox = ? AND im.thread_id = ? AND m.direction = 'out')`, inbox, thread).Scan(&replied); err != nil {
		return false, fmt.Errorf("store: list verdict: %w", err)
	}
	dir := ListReceive
	if replied {
		dir = ListReply
	}
	blocked, _, err := listVerdict(tx.QueryRow, inbox, dir, sender)
	return blocked, err
}

// ListStore is the allow/block lists' room: what the HTTP API and the
// conformance suite use of a store (both backends).
type ListStore interface {
	PutListEntry(ctx context.Context, e ListEntry) (ListEntry, error)
	GetListEntry(ctx context.Context, scope, direction, typ, entry string) (ListEntry, error)
	ListEntries(ctx context.Context, scope, direction, typ, after string, limit int) ([]ListEntry, error)
	DeleteListEntry(ctx context.Context, scope, direction, typ, entry string) error
	ListVerdict(ctx context.Context, inbox, direction, address string) (bool, string, error)
}
