package api

import (
	"context"
	"time"

	"github.com/envelopd/envelopd/store"
)

// pathInbox is the address of the route's inbox (inbox not "") once p
// may see it, or "" for a route without one.
func (s *Service) pathInbox(ctx context.Context, p *Principal, inbox string) (string, error) {
	if inbox == "" {
		return "", nil
	}
	b, err := s.inbox(ctx, p, inbox)
	return b.Address, err
}

// allowsAll reports whether p may see every one of inboxes: an unscoped
// key sees all, a scoped one never an empty (unscoped) list.
func (p *Principal) allowsAll(inboxes []string) bool {
	if p.Inboxes == nil {
		return true
	}
	if len(inboxes) == 0 {
		return false
	}
	for _, b := range inboxes {
		if !p.Allowed(b) {
			return false
		}
	}
	return true
}

// newestFirst reads one page of a list kept newest first by the keyset
// (created_at, id), the cursor's (ID: created_at in ns, Inbox: id):
// fetch reads n rows after a key, and the rows p may not see (seen
// false) are skipped, so that fetch is called again until the page is
// full or the rows end. It returns the page's objects and, when more
// follow, the next page's token.
func newestFirst[R, O any](lp ListParams, fetch func(at int64, id string, n int) ([]R, error),
	key func(R) (time.Time, string), seen func(R) bool, object func(R) (O, error)) ([]O, string, error) {
	at, id := lp.Cursor.ID, lp.Cursor.Inbox
	out := []O{}
	var last R
	for {
		rows, err := fetch(at, id, lp.Limit+1)
		if err != nil {
			return nil, "", err
		}
		for _, r := range rows {
			t, k := key(r)
			at, id = t.UnixNano(), k
			if !seen(r) {
				continue
			}
			if len(out) == lp.Limit {
				t, k := key(last)
				return out, EncodeCursor(Cursor{ID: t.UnixNano(), Inbox: k}), nil
			}
			o, err := object(r)
			if err != nil {
				return nil, "", err
			}
			out, last = append(out, o), r
		}
		if len(rows) < lp.Limit+1 {
			return out, "", nil
		}
	}
}

// cutPage cuts rows, read with one more than lp.Limit, to lp.Limit, with the
// next page's token (cursor of the page's last row) when more follow.
func cutPage[T any](rows []T, lp ListParams, cursor func(last T) Cursor) ([]T, string) {
	if len(rows) <= lp.Limit {
		return rows, ""
	}
	rows = rows[:lp.Limit]
	return rows, EncodeCursor(cursor(rows[len(rows)-1]))
}

// messageItems are the list objects (MessageItem) of ms; never nil.
func messageItems(ms []store.InboxMessage) ([]Message, error) {
	out := make([]Message, 0, len(ms))
	for i := range ms {
		o, err := messageObject(&ms[i], false)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

// Page is the head of a list answer (the SDK's List…Response): count,
// limit and, when more follow, next_page_token; each list type embeds
// it before its items.
type Page struct {
	Count         int    `json:"count"`
	Limit         int    `json:"limit"`
	NextPageToken string `json:"next_page_token,omitempty"`
}
