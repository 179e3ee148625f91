package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/envelopd/envelopd/store"
)

// ReplyThread answers the last message of a thread (the Envelopay
// reference's thread reply); req.ReplyAll widens it.
func (s *Service) ReplyThread(ctx context.Context, p *Principal, inbox, thread string, req SendRequest) (SendResult, error) {
	t, err := s.GetThread(ctx, p, inbox, thread, ListParams{Limit: 1})
	if err != nil {
		return SendResult{}, err
	}
	return s.Reply(ctx, p, t.InboxID, t.LastMessageID, req, req.ReplyAll)
}

// WaitFilter selects the message WaitMessage waits for. Zero fields match
// everything.
type WaitFilter struct {
	Inbox string // required
	// Type is an Envelopay type (which, methods, order, …; any case).
	Type string
	// From is the sender's address (any case).
	From     string
	ThreadID string
	// Labels must all be present (received, sent, accepted, quarantined,
	// duplicate or user labels).
	Labels []string
	// After is a message of the inbox (Message-ID or store row id): only
	// messages stored after it match. "" waits for messages stored after
	// the call.
	After string
	// AfterID, when set, is a store row id cursor instead (0: from the
	// inbox's first message): a previous WaitResult's Cursor.
	AfterID *int64
}

// WaitResult is what WaitMessage found: the message, or TimedOut. Cursor
// is the store row id the search reached (pass it as After to go on).
type WaitResult struct {
	Message  *Message `json:"message,omitempty"`
	TimedOut bool     `json:"timed_out"`
	Cursor   int64    `json:"cursor"`
}

// waitPage bounds one scan of the inbox index.
const waitPage = 200

// WaitMessage returns the first message of f.Inbox stored after f.After
// that matches f, waiting up to timeout for new mail. It follows the
// store as `envelopd watch` does: it wakes on this process's commits at
// once (store.WaitNew) and polls for other processes' no faster than the
// store's poll interval. A timeout is not an error: TimedOut is set.
func (s *Service) WaitMessage(ctx context.Context, p *Principal, f WaitFilter, timeout time.Duration) (WaitResult, error) {
	b, err := s.inbox(ctx, p, f.Inbox)
	if err != nil {
		return WaitResult{}, err
	}
	if len(f.Labels) > 0 {
		// The lists' label rule (ParseList), not a second copy of it.
		j, _ := json.Marshal(f.Labels)
		lp, err := ParseList(url.Values{"labels": {string(j)}})
		if err != nil {
			return WaitResult{}, err
		}
		f.Labels = lp.Labels
	}
	var after int64
	if f.AfterID != nil {
		after = *f.AfterID
	} else if f.After != "" {
		im, err := s.message(ctx, p, b.Address, f.After)
		if err != nil {
			return WaitResult{}, err
		}
		after = im.ID
	} else if after, err = s.newestID(ctx); err != nil {
		return WaitResult{}, err
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	typ := strings.ToLower(f.Type)
	for {
		// The newest id before the index is brought up to date and read:
		// every message up to it is then indexed, so the cursor may skip
		// past the ones the filter left out (as watch does).
		top, err := s.newestID(wctx)
		if err != nil {
			return s.waitEnd(ctx, wctx, after, err)
		}
		s.sync(wctx)
		ms, err := s.cfg.Store.InboxMessages(wctx, store.InboxQuery{Inbox: b.Address, ThreadID: f.ThreadID,
			Labels: f.Labels, Ascending: true, CursorID: after, Limit: waitPage})
		if err != nil {
			return s.waitEnd(ctx, wctx, after, err)
		}
		for i := range ms {
			m := &ms[i]
			after = m.ID
			if (typ != "" && m.Type != typ) || (f.From != "" && !strings.EqualFold(m.Sender, f.From)) {
				continue
			}
			o, err := s.GetMessage(ctx, p, b.Address, strconv.FormatInt(m.ID, 10))
			if err != nil {
				return WaitResult{}, err
			}
			return WaitResult{Message: &o, Cursor: m.ID}, nil
		}
		if len(ms) == waitPage {
			continue
		}
		after = max(after, top)
		if err := s.cfg.Store.WaitNew(wctx, after); err != nil {
			return s.waitEnd(ctx, wctx, after, err)
		}
	}
}

// waitEnd is WaitMessage's answer to err: a timeout when the wait's own
// deadline passed, else the error.
func (s *Service) waitEnd(ctx, wctx context.Context, after int64, err error) (WaitResult, error) {
	if ctx.Err() != nil {
		return WaitResult{}, ctx.Err()
	}
	if errors.Is(wctx.Err(), context.DeadlineExceeded) {
		return WaitResult{TimedOut: true, Cursor: after}, nil
	}
	return WaitResult{}, err
}

// newestID is the row id of the newest stored message, or 0.
func (s *Service) newestID(ctx context.Context) (int64, error) {
	last, err := s.cfg.Store.Messages(ctx, store.Filter{Limit: 1, Newest: true})
	if err != nil || len(last) == 0 {
		return 0, err
	}
	return last[0].ID, nil
}
