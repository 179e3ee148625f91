package api

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/envelopd/envelopd/parse"
	"github.com/envelopd/envelopd/store"
)

// Batch message calls (the SDK's inboxes.messages.batchGet and
// batchUpdate): many messages of one inbox by id in one request. Ids the
// inbox does not hold are left out of the answer, which says how many
// were asked (limit) and found (count); a repeated id is a 400.

const (
	maxBatchGet    = 500
	maxBatchUpdate = 50
)

// BatchGetRequest is the SDK's BatchGetMessagesRequest.
type BatchGetRequest struct {
	MessageIDs []string `json:"message_ids"`
}

// BatchGetResult is the SDK's BatchGetMessagesResponse: the messages
// found, in the order asked, without their bodies.
type BatchGetResult struct {
	Limit    int       `json:"limit"`
	Count    int       `json:"count"`
	Messages []Message `json:"messages"`
}

// BatchUpdateRequest is the SDK's BatchUpdateMessagesRequest.
type BatchUpdateRequest struct {
	MessageIDs   []string   `json:"message_ids"`
	AddLabels    stringList `json:"add_labels"`
	RemoveLabels stringList `json:"remove_labels"`
}

// BatchUpdateResult is the SDK's BatchUpdateMessagesResponse.
type BatchUpdateResult struct {
	Limit   int                   `json:"limit"`
	Count   int                   `json:"count"`
	Updates []UpdateMessageResult `json:"updates"`
}

// batchLabelStore updates the labels of many messages in one
// transaction.
type batchLabelStore interface {
	SetInboxLabelsBatch(ctx context.Context, inbox string, ids []int64, add, remove []string) ([][]string, error)
}

// batchMessages resolves ids (at most max, none repeated) to the
// messages inbox holds, in order; missing ones are left out.
func (s *Service) batchMessages(ctx context.Context, p *Principal, inbox string, ids []string, max int) (string, []store.InboxMessage, error) {
	switch {
	case len(ids) == 0:
		return "", nil, badField("message_ids", "at least one message id")
	case len(ids) > max:
		return "", nil, badField("message_ids", "at most %d message ids; %d given", max, len(ids))
	}
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if id == "" || len(id) > 998 {
			return "", nil, badField("message_ids", "an empty or over-long message id")
		}
		if seen[id] {
			return "", nil, badField("message_ids", "%s is given twice", id)
		}
		seen[id] = true
	}
	s.sync(ctx)
	b, err := s.inbox(ctx, p, inbox)
	if err != nil {
		return "", nil, err
	}
	var out []store.InboxMessage
	found := map[int64]bool{}
	for _, ref := range ids {
		if strings.Contains(ref, "@") {
			ref = parse.NormalizeMessageID(ref)
		}
		im, err := s.cfg.Store.InboxMessageByRef(ctx, b.Address, ref)
		if errors.Is(err, store.ErrNotFound) || err == nil && found[im.ID] {
			continue // two spellings of one message count once
		}
		if err != nil {
			return "", nil, err
		}
		found[im.ID] = true
		out = append(out, *im)
	}
	return b.Address, out, nil
}

// BatchGetMessages returns up to 500 messages of inbox by id.
func (s *Service) BatchGetMessages(ctx context.Context, p *Principal, inbox string, req BatchGetRequest) (BatchGetResult, error) {
	_, ms, err := s.batchMessages(ctx, p, inbox, req.MessageIDs, maxBatchGet)
	if err != nil {
		return BatchGetResult{}, err
	}
	out := BatchGetResult{Limit: len(req.MessageIDs)}
	if out.Messages, err = messageItems(ms); err != nil {
		return BatchGetResult{}, err
	}
	out.Count = len(out.Messages)
	return out, nil
}

// BatchUpdateMessages adds and removes the same labels on up to 50
// messages of inbox, all or none.
func (s *Service) BatchUpdateMessages(ctx context.Context, p *Principal, inbox string, req BatchUpdateRequest) (BatchUpdateResult, error) {
	u := UpdateLabels{AddLabels: req.AddLabels, RemoveLabels: req.RemoveLabels}
	if len(u.AddLabels)+len(u.RemoveLabels) == 0 {
		return BatchUpdateResult{}, badField("add_labels", "add_labels or remove_labels is required")
	}
	if err := checkLabels(u); err != nil {
		return BatchUpdateResult{}, err
	}
	bs, ok := s.cfg.Store.(batchLabelStore)
	if !ok {
		return BatchUpdateResult{}, &Error{Status: http.StatusNotImplemented, Name: "NotImplementedError", Message: "this store cannot update labels in a batch"}
	}
	b, ms, err := s.batchMessages(ctx, p, inbox, req.MessageIDs, maxBatchUpdate)
	if err != nil {
		return BatchUpdateResult{}, err
	}
	ids := make([]int64, len(ms))
	for i := range ms {
		ids[i] = ms[i].ID
	}
	labels, err := bs.SetInboxLabelsBatch(ctx, b, ids, u.AddLabels, u.RemoveLabels)
	if err != nil {
		return BatchUpdateResult{}, err
	}
	out := BatchUpdateResult{Limit: len(req.MessageIDs), Updates: []UpdateMessageResult{}}
	for i := range ms {
		if labels[i] == nil {
			continue // gone since it was read
		}
		ms[i].Labels = labels[i]
		out.Updates = append(out.Updates, UpdateMessageResult{MessageID: wireMessageID(&ms[i].Message), Labels: labelsOf(&ms[i])})
	}
	out.Count = len(out.Updates)
	return out, nil
}

func (h *Handler) batchRoutes(a func(string, authed)) {
	a("POST /v0/inboxes/{inbox_id}/messages/batch-get", func(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
		return answer(r, decodeAs[BatchGetRequest], func(req BatchGetRequest) (any, error) {
			return h.svc.BatchGetMessages(r.Context(), p, r.PathValue("inbox_id"), req)
		})
	})
	a("POST /v0/inboxes/{inbox_id}/messages/batch-update", func(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
		return answer(r, decodeAs[BatchUpdateRequest], func(req BatchUpdateRequest) (any, error) {
			return h.svc.BatchUpdateMessages(r.Context(), p, r.PathValue("inbox_id"), req)
		})
	})
}
