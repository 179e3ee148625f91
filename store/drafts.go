package store

import (
	"context"
	"fmt"
	"time"
)

// Drafts (the HTTP API's drafts, AgentMail's Draft): a draft is one row,
// its fields an opaque JSON document the API owns (Request). A draft
// with SendAt set is scheduled: ClaimDueDrafts leases the due ones to one
// node (lease_until), the API sends each through the outbound queue with
// a Message-ID fixed by the draft id (so a send repeated after a crash
// is the queue's own entry, never a second mail), then DraftSent deletes
// it. A node killed while holding a draft leaves it to another node once
// the lease ends.

// Draft states (SendStatus).
const (
	DraftScheduled = "scheduled"
	DraftFailed    = "failed"
)

// Draft is one stored draft.
type Draft struct {
	ID      string
	Inbox   string
	Request []byte // the API's JSON document
	// SendAt is when a scheduled draft is sent (zero: not scheduled).
	SendAt time.Time
	// Status is "", DraftScheduled or DraftFailed (LastError says why).
	Status    string
	LastError string
	ClientID  string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// MaxDraftBytes bounds a draft's JSON document.
const MaxDraftBytes = 16 << 20

func checkDraft(d Draft) error {
	switch {
	case d.ID == "" || d.Inbox == "":
		return fmt.Errorf("%w: a draft needs an id and an inbox", ErrBadInput)
	case len(d.Request) > MaxDraftBytes:
		return fmt.Errorf("%w: draft of %d bytes; at most %d", ErrBadInput, len(d.Request), MaxDraftBytes)
	case d.Status != "" && d.Status != DraftScheduled && d.Status != DraftFailed:
		return fmt.Errorf("%w: draft status %q", ErrBadInput, d.Status)
	case (d.Status == DraftScheduled) != !d.SendAt.IsZero():
		return fmt.Errorf("%w: a draft is scheduled iff it has a send time", ErrBadInput)
	}
	return nil
}

const draftCols = `id, inbox, request, send_at, status, last_error, coalesce(client_id, ''), created_at, updated_at`

func scanDraft(r scanner) (Draft, error) {
	var d Draft
	var sendAt, created, updated int64
	if err := r.Scan(&d.ID, &d.Inbox, &d.Request, &sendAt, &d.Status, &d.LastError, &d.ClientID, &created, &updated); err != nil {
		return Draft{}, err
	}
	if sendAt != 0 {
		d.SendAt = time.Unix(0, sendAt).UTC()
	}
	d.CreatedAt, d.UpdatedAt = time.Unix(0, created).UTC(), time.Unix(0, updated).UTC()
	return d, nil
}

func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UTC().UnixNano()
}

// CreateDraft stores d; with a client_id already used it writes nothing
// and returns that draft (created false).
func (s draftRoom) CreateDraft(ctx context.Context, d Draft) (Draft, bool, error) {
	if err := checkDraft(d); err != nil {
		return Draft{}, false, err
	}
	var out Draft
	created := false
	err := s.write(ctx, func(tx Tx) error {
		var cid any
		if d.ClientID != "" {
			cid = d.ClientID
		}
		res, err := tx.Exec(`INSERT INTO api_drafts (id, inbox, request, send_at, lease_until, status, last_error, client_id, created_at, updated_at)
			VALUES (?, ?, ?, ?, 0, ?, ?, ?, ?, ?) ON CONFLICT (client_id) DO NOTHING`,
			d.ID, d.Inbox, string(d.Request), nanos(d.SendAt), d.Status, d.LastError, cid, nanos(d.CreatedAt), nanos(d.UpdatedAt))
		if err != nil {
			return fmt.Errorf("store: create draft: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			got, err := scanDraft(tx.QueryRow(`SELECT `+draftCols+` FROM api_drafts WHERE client_id = ?`, d.ClientID))
			if err != nil {
				return fmt.Errorf("store: create draft: %w", err)
			}
			out = got
			return nil
		}
		out, created = d, true
		return nil
	})
	return out, created, err
}

// DraftByID returns a draft (ErrNotFound).
func (s draftRoom) DraftByID(ctx context.Context, id string) (Draft, error) {
	d, err := scanDraft(s.r.QueryRowContext(ctx, `SELECT `+draftCols+` FROM api_drafts WHERE id = ?`, id))
	return one(d, err, "draft", "draft "+id)
}

// Drafts lists the drafts of inbox ("": of every inbox), newest first,
// before the keyset cursor (created_at, id) when cursorAt is non-zero; at
// most limit.
func (s draftRoom) Drafts(ctx context.Context, inbox string, cursorAt int64, cursorID string, limit int) ([]Draft, error) {
	q := `SELECT ` + draftCols + ` FROM api_drafts WHERE (? = '' OR inbox = ?)`
	args := []any{inbox, inbox}
	if cursorAt != 0 {
		q += ` AND (created_at, id) < (?, ?)`
		args = append(args, cursorAt, cursorID)
	}
	q += ` ORDER BY created_at DESC, id DESC LIMIT ?`
	args = append(args, limit)
	return queryAll(ctx, s.r, "drafts", scanDraft, q, args...)
}

// UpdateDraft replaces a draft's document, send time, status and error;
// a new schedule frees any lease.
func (s draftRoom) UpdateDraft(ctx context.Context, d Draft) error {
	if err := checkDraft(d); err != nil {
		return err
	}
	return s.writeOne(ctx, "update draft", "draft "+d.ID,
		`UPDATE api_drafts SET request = ?, send_at = ?, lease_until = 0, status = ?, last_error = ?, updated_at = ? WHERE id = ?`,
		string(d.Request), nanos(d.SendAt), d.Status, d.LastError, nanos(d.UpdatedAt), d.ID)
}

// DeleteDraft deletes a draft (ErrNotFound); a draft that was sent is
// deleted so.
func (s draftRoom) DeleteDraft(ctx context.Context, id string) error {
	return s.writeOne(ctx, "delete draft", "draft "+id, `DELETE FROM api_drafts WHERE id = ?`, id)
}

// ClaimDueDrafts leases up to limit scheduled drafts due at now (oldest
// send time first) until now+lease and returns them; a draft leased by a
// node that died is claimed again once its lease ends.
func (s draftRoom) ClaimDueDrafts(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]Draft, error) {
	n := now.UTC().UnixNano()
	return claim(ctx, s.core, "drafts", scanDraft, `UPDATE api_drafts SET lease_until = ?
		WHERE id IN (SELECT id FROM api_drafts WHERE status = 'scheduled' AND send_at <= ? AND lease_until <= ?
			ORDER BY send_at, id LIMIT ?`+s.d.skipLocked+`)
		RETURNING `+draftCols, now.Add(lease).UTC().UnixNano(), n, n, claimLimit(limit))
}

// DraftStore is the drafts' room: what the HTTP API's drafts need of a
// store, and what the conformance suite checks (both backends).
type DraftStore interface {
	CreateDraft(ctx context.Context, d Draft) (Draft, bool, error)
	DraftByID(ctx context.Context, id string) (Draft, error)
	Drafts(ctx context.Context, inbox string, cursorAt int64, cursorID string, limit int) ([]Draft, error)
	UpdateDraft(ctx context.Context, d Draft) error
	DeleteDraft(ctx context.Context, id string) error
	ClaimDueDrafts(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]Draft, error)
}
