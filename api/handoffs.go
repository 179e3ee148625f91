package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/envelopd/envelopd/store"
)

// The hand-off of a message to the agent (serve --exec, --webhook) as a
// person supervising it sees and steers it: GET …/messages/{id}/handoffs
// lists the message's hand-offs; POST …/hold holds the pending ones (the
// agent is not handed the message) and POST …/release lets them go
// (store.HandoffHolder). A key scoped to other inboxes gets 404 as for
// every message of an inbox it may not see.

// handoffStore is what the hand-off endpoints need of the store: the
// operator's side of its hand-off room.
type handoffStore = store.HandoffAdmin

// MessageHandoffs is the answer of the hand-off endpoints.
type MessageHandoffs struct {
	MessageID string          `json:"message_id"`
	Handoffs  []store.Handoff `json:"handoffs"`
}

// Handoffs lists, holds ("hold") or releases ("release") the hand-offs of
// a message (action "" lists).
func (s *Service) Handoffs(ctx context.Context, p *Principal, inbox, ref, action string) (MessageHandoffs, error) {
	hs, ok := s.cfg.Store.(handoffStore)
	if !ok {
		return MessageHandoffs{}, &Error{Status: http.StatusNotImplemented, Name: "NotImplementedError", Message: "this store keeps no hand-offs"}
	}
	im, err := s.message(ctx, p, inbox, ref)
	if err != nil {
		return MessageHandoffs{}, err
	}
	var list []store.Handoff
	switch action {
	case "hold":
		list, err = hs.HandoffHold(ctx, im.ID)
	case "release":
		list, err = hs.HandoffRelease(ctx, im.ID)
	default:
		list, err = hs.Handoffs(ctx, store.HandoffFilter{State: "all", MessageID: im.ID})
	}
	if errors.Is(err, store.ErrNoPendingHandoff) {
		msg := "the message has no pending hand-off to hold"
		if action == "release" {
			msg = "the message has no held hand-off to release"
		}
		return MessageHandoffs{}, &Error{Status: http.StatusConflict, Name: "HandoffStateError", Message: msg}
	}
	if err != nil {
		return MessageHandoffs{}, err
	}
	return MessageHandoffs{MessageID: wireMessageID(&im.Message), Handoffs: list}, nil
}

func (h *Handler) handoffs(action string) authed {
	return func(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
		return respond(h.svc.Handoffs(r.Context(), p, r.PathValue("inbox_id"), r.PathValue("message_id"), action))
	}
}
