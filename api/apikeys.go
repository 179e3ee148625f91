package api

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/envelopd/envelopd/store"
)

// API keys over the API (the SDK's api_keys, inboxes.api_keys and
// pods.api_keys clients), with the rules of `envelopd apikey`: a key is
// unscoped or scoped to inboxes, shown once (in the create answer), and
// deleting it revokes it. A key never makes a key that sees more than it
// does: an unscoped key makes any key; a scoped key only keys for one of
// its inboxes (/v0/inboxes/{inbox_id}/api-keys), and lists and deletes
// only keys within its inboxes. AgentMail's per-operation permissions
// are not kept: a create that withholds any is refused (400), so no key
// is ever given more than asked.

// APIKeyStore is what API keys over the API need of the store: its API
// keys' room.
type APIKeyStore = store.APIKeyStore

// APIKeyObject is the SDK's ApiKey (and, with APIKey, CreateApiKeyResponse).
type APIKeyObject struct {
	APIKeyID  string    `json:"api_key_id"`
	APIKey    string    `json:"api_key,omitempty"` // the create answer only
	Prefix    string    `json:"prefix"`
	Name      string    `json:"name"`
	PodID     string    `json:"pod_id"`
	InboxID   string    `json:"inbox_id,omitempty"`
	InboxIDs  []string  `json:"inbox_ids,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// ListAPIKeys is the SDK's ListApiKeysResponse.
type ListAPIKeys struct {
	Count   int            `json:"count"`
	APIKeys []APIKeyObject `json:"api_keys"`
}

// CreateAPIKeyRequest is the SDK's CreateApiKeyRequest.
type CreateAPIKeyRequest struct {
	Name        string          `json:"name"`
	Permissions map[string]bool `json:"permissions"`
}

func apiKeyObject(k store.APIKey) APIKeyObject {
	o := APIKeyObject{APIKeyID: k.ID, Prefix: keyPrefix + k.ID, Name: k.Name, PodID: podID, InboxIDs: k.Inboxes, CreatedAt: k.CreatedAt}
	if o.Name == "" {
		o.Name = keyPrefix + k.ID
	}
	if len(k.Inboxes) == 1 {
		o.InboxID = k.Inboxes[0]
	}
	return o
}

func (s *Service) apiKeys() (APIKeyStore, error) {
	if ks, ok := s.cfg.Store.(APIKeyStore); ok {
		return ks, nil
	}
	return nil, &Error{Status: http.StatusNotImplemented, Name: "NotImplementedError", Message: "this store keeps no API keys"}
}

var errScopedKey = &Error{Status: http.StatusForbidden, Name: "ForbiddenError",
	Message: "a key scoped to inboxes makes, lists and deletes keys for its inboxes only (/v0/inboxes/{inbox_id}/api-keys)"}

// within reports whether every inbox of k is one p may see (an unscoped
// k is within an unscoped p only).
func (p *Principal) within(k store.APIKey) bool {
	return p.allowsAll(k.Inboxes)
}

// CreateAPIKey makes a key: unscoped (inbox "") or scoped to inbox.
func (s *Service) CreateAPIKey(ctx context.Context, p *Principal, inbox string, req CreateAPIKeyRequest) (APIKeyObject, error) {
	ks, err := s.apiKeys()
	if err != nil {
		return APIKeyObject{}, err
	}
	for perm, ok := range req.Permissions {
		if !ok {
			return APIKeyObject{}, badField("permissions", "envelopd keys carry no per-operation permissions (%s is withheld); scope a key to an inbox instead", perm)
		}
	}
	if len(req.Name) > 200 {
		return APIKeyObject{}, badField("name", "at most 200 bytes")
	}
	var scope []string
	if inbox != "" {
		b, err := s.inbox(ctx, p, inbox)
		if err != nil {
			return APIKeyObject{}, err
		}
		scope = []string{b.Address}
	} else if p.Inboxes != nil {
		return APIKeyObject{}, errScopedKey
	}
	key, k, err := NewKey(scope, req.Name, s.cfg.Now())
	if err != nil {
		return APIKeyObject{}, err
	}
	if err := ks.CreateAPIKey(ctx, k); err != nil {
		return APIKeyObject{}, err
	}
	o := apiKeyObject(k)
	o.APIKey = key
	return o, nil
}

// ListAPIKeys lists the live keys p may manage (of inbox: those scoped
// to exactly it), oldest first.
func (s *Service) ListAPIKeys(ctx context.Context, p *Principal, inbox string) (ListAPIKeys, error) {
	ks, err := s.apiKeys()
	if err != nil {
		return ListAPIKeys{}, err
	}
	if inbox != "" {
		b, err := s.inbox(ctx, p, inbox)
		if err != nil {
			return ListAPIKeys{}, err
		}
		inbox = b.Address
	} else if p.Inboxes != nil {
		return ListAPIKeys{}, errScopedKey
	}
	keys, err := ks.APIKeys(ctx)
	if err != nil {
		return ListAPIKeys{}, err
	}
	out := ListAPIKeys{APIKeys: []APIKeyObject{}}
	for _, k := range keys {
		if k.RevokedAt != nil || !p.within(k) || inbox != "" && !slices.Equal(k.Inboxes, []string{inbox}) {
			continue
		}
		out.APIKeys = append(out.APIKeys, apiKeyObject(k))
	}
	out.Count = len(out.APIKeys)
	return out, nil
}

// DeleteAPIKey revokes a key p may manage (404 for any other).
func (s *Service) DeleteAPIKey(ctx context.Context, p *Principal, inbox, id string) error {
	ks, err := s.apiKeys()
	if err != nil {
		return err
	}
	if inbox != "" {
		b, err := s.inbox(ctx, p, inbox)
		if err != nil {
			return err
		}
		inbox = b.Address
	}
	k, err := ks.APIKeyByID(ctx, id)
	if errors.Is(err, store.ErrNotFound) || err == nil && (k.RevokedAt != nil || !p.within(k) || inbox != "" && !slices.Equal(k.Inboxes, []string{inbox})) {
		return notFound("API key %s not found", id)
	}
	if err != nil {
		return err
	}
	return ks.RevokeAPIKey(ctx, k.ID)
}

func (h *Handler) apiKeyRoutes(a func(string, authed)) {
	for _, pre := range []string{"/v0", "/v0/inboxes/{inbox_id}", "/v0/pods/{pod_id}"} {
		wrap := func(f authed) authed { return f }
		if pre == "/v0/pods/{pod_id}" {
			wrap = h.inPod
		}
		a("GET "+pre+"/api-keys", wrap(func(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
			v, err := h.svc.ListAPIKeys(r.Context(), p, r.PathValue("inbox_id"))
			return v, 0, err
		}))
		a("POST "+pre+"/api-keys", wrap(func(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
			var req CreateAPIKeyRequest
			if err := decode(r, &req); err != nil {
				return nil, 0, err
			}
			v, err := h.svc.CreateAPIKey(r.Context(), p, r.PathValue("inbox_id"), req)
			return v, 0, err
		}))
		a("DELETE "+pre+"/api-keys/{api_key_id}", wrap(func(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
			return noContent(w, h.svc.DeleteAPIKey(r.Context(), p, r.PathValue("inbox_id"), r.PathValue("api_key_id")))
		}))
	}
}
