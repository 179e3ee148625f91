package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
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
		forgetLists(tx)
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
	return s.write(ctx, func(tx Tx) error {
		forgetLists(tx)
		res, err := tx.Exec(`DELETE FROM api_lists WHERE scope = ? AND direction = ? AND list_type = ? AND entry = ?`,
			scope, direction, typ, strings.ToLower(entry))
		if err != nil {
			return fmt.Errorf("store: delete list entry: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("list entry %s: %w", entry, ErrNotFound)
		}
		return nil
	})
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

// receivedAs is an inbound message's received_as column, decided once
// as it is stored: how its received events are typed (AgentMail's
// MessageReceivedEventType, which replaces message.received for such
// mail) and which of its inboxes label it blocked. It holds " u " when
// its sender verdict (the "sender" key of the stored result) authenticates
// no domain (message.received.unauthenticated), and " b:<inbox> " for
// every inbox whose lists refuse the sender (message.received.blocked and
// the label LabelBlocked): for a message in a thread the inbox has sent
// in (a reply) its reply lists decide, for any other its receive lists.
// "" (the usual case): message.received. Installations without inbound
// lists pay one query per message.
func receivedAs(tx Tx, mailbox, sender, rcpts, thread string, unauth bool) (string, error) {
	var as strings.Builder
	if unauth {
		as.WriteString(" u")
	}
	lists, err := inboundListsExist(tx)
	if err != nil {
		return "", err
	}
	if lists {
		for _, b := range inboxesOf(mailbox, DirIn, sender, rcpts) {
			var replied bool
			inThread, args := tx.dialect().threadIs("thread_id", thread)
			if err := tx.QueryRow(`SELECT EXISTS (SELECT 1 FROM messages WHERE `+inThread+` AND direction = 'out'
				AND (mailbox = ? OR mailbox = '' AND lower(sender) = ?))`, append(args, b, b)...).Scan(&replied); err != nil {
				return "", fmt.Errorf("store: list verdict: %w", err)
			}
			dir := ListReceive
			if replied {
				dir = ListReply
			}
			blocked, _, err := listVerdict(tx.QueryRow, b, dir, sender)
			if err != nil {
				return "", err
			}
			if blocked {
				as.WriteString(" b:" + b)
			}
		}
	}
	if as.Len() == 0 {
		return "", nil
	}
	return as.String() + " ", nil
}

// listsCache is a transaction that remembers whether inbound lists
// exist (SQLite's writer transaction, shared by a batch of messages).
type listsCache interface{ inboundLists() *int8 }

// inboundListsExist reports whether any receive or reply list entry
// exists, once per transaction where tx remembers it.
func inboundListsExist(tx Tx) (bool, error) {
	var c *int8
	if lc, ok := tx.(listsCache); ok {
		if c = lc.inboundLists(); *c != 0 {
			return *c == 2, nil
		}
	}
	var lists bool
	if err := tx.QueryRow(`SELECT EXISTS (SELECT 1 FROM api_lists WHERE direction IN ('receive', 'reply'))`).Scan(&lists); err != nil {
		return false, fmt.Errorf("store: list verdict: %w", err)
	}
	if c != nil {
		*c = 1
		if lists {
			*c = 2
		}
	}
	return lists, nil
}

// forgetLists drops tx's memory of whether inbound lists exist (a write
// to the lists).
func forgetLists(tx Tx) {
	if lc, ok := tx.(listsCache); ok {
		*lc.inboundLists() = 0
	}
}

// blockedFor reports whether received_as as marks the message blocked
// for inbox.
func blockedFor(as, inbox string) bool { return strings.Contains(as, " b:"+inbox+" ") }

// unauthenticated reports whether in's sender verdict authenticates no
// domain: as its caller gave it (SenderVerdict), else read from its result.
func (in *Incoming) unauthenticated() bool {
	switch in.SenderVerdict {
	case SenderVerdictAuthenticated:
		return false
	case SenderVerdictUnauthenticated:
		return true
	}
	return unauthenticated(in.Result)
}

// unauthenticated reports whether a stored result holds a sender verdict
// that authenticates no domain (its authenticated_as is null). Mail
// without a verdict (sent copies, serve without sender checks) is not.
func unauthenticated(result []byte) bool {
	if !bytes.Contains(result, []byte(`"authenticated_as":null`)) {
		return false // the verdict's JSON is compact: the usual mail stops here
	}
	var r struct {
		Sender *struct {
			AuthenticatedAs *string `json:"authenticated_as"`
		} `json:"sender"`
	}
	if json.Unmarshal(result, &r) != nil || r.Sender == nil {
		return false
	}
	return r.Sender.AuthenticatedAs == nil || *r.Sender.AuthenticatedAs == ""
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
