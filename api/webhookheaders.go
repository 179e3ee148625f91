package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/envelopd/envelopd/store"
)

// Webhook custom headers (the SDK's webhooks.getHeaders and
// updateHeaders, and the inbox and pod ones, …/webhooks/{id}/headers;
// create's headers): header name and value pairs sent with every
// delivery of the webhook. Values are write-only, as with AgentMail:
// reads answer the names. The rule (RFC 9110 names and values, no
// header the delivery sets or that frames the request, bounded count
// and size) is the store's (store.WebhookLimits.CheckWebhookHeaders);
// a refused header is a 400 ValidationError naming it.

// WebhookHeaderNames is the SDK's WebhookHeaderNamesResponse.
type WebhookHeaderNames struct {
	HeaderNames []string `json:"header_names"`
}

// UpdateWebhookHeadersRequest is the SDK's UpdateWebhookHeadersRequest.
type UpdateWebhookHeadersRequest struct {
	Headers       map[string]string `json:"headers"`
	RemoveHeaders []string          `json:"remove_headers"`
}

// headerStore is what the headers need of the store.
type headerStore interface {
	SetWebhookHeaders(ctx context.Context, id string, set map[string]string, remove []string, l store.WebhookLimits, at time.Time) (store.Webhook, error)
}

// headerError makes a header the store refused a 400 naming it, with
// its stable code.
func headerError(err error) error {
	var he *store.HeaderError
	if !errors.As(err, &he) {
		return err
	}
	field := "headers"
	if he.Name != "" {
		field = "headers." + he.Name
	}
	return validation(he.Error(), []Problem{{Code: he.Code, Field: field, Message: he.Reason}})
}

// checkHeadersGiven refuses a headers map given empty (the SDK: at
// least one entry when provided).
func checkHeadersGiven(h map[string]string) error {
	if h != nil && len(h) == 0 {
		return badField("headers", "give at least one header, or leave headers out")
	}
	return nil
}

// WebhookHeaders returns the names of a webhook's custom headers.
func (s *Service) WebhookHeaders(ctx context.Context, p *Principal, inbox, id string) (WebhookHeaderNames, error) {
	_, w, err := s.webhook(ctx, p, inbox, id)
	if err != nil {
		return WebhookHeaderNames{}, err
	}
	return WebhookHeaderNames{HeaderNames: store.WebhookHeaderNames(w)}, nil
}

// UpdateWebhookHeaders sets and removes a webhook's custom headers (p
// may manage the webhook: s.webhook answers 404 otherwise).
func (s *Service) UpdateWebhookHeaders(ctx context.Context, p *Principal, inbox, id string, req UpdateWebhookHeadersRequest) (WebhookHeaderNames, error) {
	if err := checkHeadersGiven(req.Headers); err != nil {
		return WebhookHeaderNames{}, err
	}
	if len(req.Headers) == 0 && len(req.RemoveHeaders) == 0 {
		return WebhookHeaderNames{}, badField("headers", "give headers to set or remove_headers")
	}
	ws, w, err := s.webhook(ctx, p, inbox, id)
	if err != nil {
		return WebhookHeaderNames{}, err
	}
	hs, ok := ws.(headerStore)
	if !ok {
		return WebhookHeaderNames{}, &Error{Status: http.StatusNotImplemented, Name: "NotImplementedError", Message: "this store keeps no webhook headers"}
	}
	got, err := hs.SetWebhookHeaders(ctx, w.ID, req.Headers, req.RemoveHeaders, s.cfg.WebhookLimits, s.cfg.Now())
	if errors.Is(err, store.ErrNotFound) {
		return WebhookHeaderNames{}, notFound("webhook %s not found", id)
	}
	if err != nil {
		return WebhookHeaderNames{}, headerError(err)
	}
	return WebhookHeaderNames{HeaderNames: store.WebhookHeaderNames(got)}, nil
}

func (h *Handler) webhookHeaderRoutes(a func(string, authed)) {
	get := func(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
		v, err := h.svc.WebhookHeaders(r.Context(), p, r.PathValue("inbox_id"), r.PathValue("webhook_id"))
		return v, 0, err
	}
	update := func(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
		var req UpdateWebhookHeadersRequest
		if err := decode(r, &req); err != nil {
			return nil, 0, err
		}
		_, err := h.svc.UpdateWebhookHeaders(r.Context(), p, r.PathValue("inbox_id"), r.PathValue("webhook_id"), req)
		return noContent(w, err)
	}
	for _, pre := range []string{"/v0", "/v0/inboxes/{inbox_id}"} {
		a("GET "+pre+"/webhooks/{webhook_id}/headers", get)
		a("PATCH "+pre+"/webhooks/{webhook_id}/headers", update)
	}
	a("GET /v0/pods/{pod_id}/webhooks/{webhook_id}/headers", h.inPod(get))
	a("PATCH /v0/pods/{pod_id}/webhooks/{webhook_id}/headers", h.inPod(update))
}
