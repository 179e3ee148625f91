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
// bound to the organisation, to the one pod or to inboxes, shown once
// (in the create answer), and deleting it revokes it. A key never makes
// or changes a key that sees or does more than it does: an organisation
// key makes any key; a pod key pod and inbox keys; an inbox key only keys
// for one of its inboxes (/v0/inboxes/{inbox_id}/api-keys); each lists,
// gets, updates and deletes only keys within its scope, and gives only
// permissions it holds (permissions.go). Name and permissions can be
// changed; the secret and the scope never.

// APIKeyStore is what API keys over the API need of the store: its API
// keys' room.
type APIKeyStore = store.APIKeyStore

// APIKeyObject is the SDK's ApiKey (the TypeScript SDK's BearerApiKey)
// and, with APIKey, its CreateApiKeyResponse. InboxIDs is envelopd's:
// every inbox of a key scoped to several (`envelopd apikey create
// --inbox A --inbox B`).
type APIKeyObject struct {
	Type        string          `json:"type"`
	APIKeyID    string          `json:"api_key_id"`
	APIKey      string          `json:"api_key,omitempty"` // the create answer only
	Prefix      string          `json:"prefix"`
	Name        string          `json:"name"`
	PodID       string          `json:"pod_id,omitempty"`
	InboxID     string          `json:"inbox_id,omitempty"`
	InboxIDs    []string        `json:"inbox_ids,omitempty"`
	Permissions map[string]bool `json:"permissions,omitempty"`
	CreatedAt   time.Time       `json:"created_at"`
	UpdatedAt   time.Time       `json:"updated_at"`
}

// ListAPIKeys is the SDK's ListApiKeysResponse.
type ListAPIKeys struct {
	Count   int            `json:"count"`
	APIKeys []APIKeyObject `json:"api_keys"`
}

// CreateAPIKeyRequest is the SDK's CreateApiKeyRequest (and, both
// fields optional, its UpdateApiKeyRequest): permissions omitted on
// create is every permission (for a key with permissions: its own).
type CreateAPIKeyRequest struct {
	Name        *string         `json:"name"`
	Permissions map[string]bool `json:"permissions"`
}

func apiKeyObject(k store.APIKey) APIKeyObject {
	o := APIKeyObject{Type: "bearer", APIKeyID: k.ID, Prefix: keyPrefix + k.ID, Name: k.Name, PodID: k.Pod,
		InboxIDs: k.Inboxes, Permissions: permissionsObject(k.Permissions), CreatedAt: k.CreatedAt, UpdatedAt: k.UpdatedAt}
	if o.Name == "" {
		o.Name = keyPrefix + k.ID
	}
	if len(k.Inboxes) > 0 {
		o.PodID = podID // every inbox is in the one pod
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

var errScopedKey = forbidden("a key scoped to inboxes makes keys for its inboxes only (/v0/inboxes/{inbox_id}/api-keys)")

// keyScope is where a key route acts: inbox (an address), or the pod
// (/v0/pods/{pod_id}/api-keys), or else the organisation.
type keyScope struct {
	inbox string
	pod   bool
}

// scope resolves ks's inbox (404 for one p may not see).
func (s *Service) scope(ctx context.Context, p *Principal, ks keyScope) (keyScope, error) {
	if ks.inbox == "" {
		return ks, nil
	}
	b, err := s.inbox(ctx, p, ks.inbox)
	ks.inbox = b.Address
	return ks, err
}

// holds reports whether a key k belongs to scope ks: one scoped to
// exactly its inbox; a pod or inbox key for the pod; any for the
// organisation.
func (ks keyScope) holds(k store.APIKey) bool {
	switch {
	case ks.inbox != "":
		return slices.Equal(k.Inboxes, []string{ks.inbox})
	case ks.pod:
		return len(k.Inboxes) > 0 || k.Pod != ""
	}
	return true
}

// within reports whether k sees no more than p: every inbox of k is one
// p may see; a pod key is within a pod or organisation key; an
// organisation key only within an organisation key.
func (p *Principal) within(k store.APIKey) bool {
	if p.Inboxes == nil {
		return p.Pod == "" || len(k.Inboxes) > 0 || k.Pod != ""
	}
	return p.allowsAll(k.Inboxes)
}

// CreateAPIKey makes a key for scope ks: of the organisation, the pod or
// one inbox.
func (s *Service) CreateAPIKey(ctx context.Context, p *Principal, ks keyScope, req CreateAPIKeyRequest) (APIKeyObject, error) {
	st, err := s.apiKeys()
	if err != nil {
		return APIKeyObject{}, err
	}
	var name string
	if req.Name != nil {
		name = *req.Name
	}
	if len(name) > 200 {
		return APIKeyObject{}, badField("name", "at most 200 bytes")
	}
	perms, err := ParsePermissions(req.Permissions)
	if err != nil {
		return APIKeyObject{}, err
	}
	if perms == nil && p.Permissions != nil {
		perms = slices.Clone(p.Permissions) // no wider than its maker
	}
	if err := p.grant(perms); err != nil {
		return APIKeyObject{}, err
	}
	if ks, err = s.scope(ctx, p, ks); err != nil {
		return APIKeyObject{}, err
	}
	var scope []string
	switch {
	case ks.inbox != "":
		scope = []string{ks.inbox}
	case p.Inboxes != nil:
		return APIKeyObject{}, errScopedKey
	case !ks.pod && p.Pod != "":
		return APIKeyObject{}, forbidden("a key bound to pod %s makes keys for that pod and its inboxes only (/v0/pods/%s/api-keys)", p.Pod, p.Pod)
	}
	key, k, err := NewKey(scope, name, s.cfg.Now())
	if err != nil {
		return APIKeyObject{}, err
	}
	k.Permissions, k.UpdatedAt = perms, k.CreatedAt
	if ks.pod {
		k.Pod = podID
	}
	if err := st.CreateAPIKey(ctx, k); err != nil {
		return APIKeyObject{}, err
	}
	o := apiKeyObject(k)
	o.APIKey = key
	return o, nil
}

// ListAPIKeys lists the live keys of scope ks that p may see, oldest
// first.
func (s *Service) ListAPIKeys(ctx context.Context, p *Principal, ks keyScope) (ListAPIKeys, error) {
	st, err := s.apiKeys()
	if err != nil {
		return ListAPIKeys{}, err
	}
	if ks, err = s.scope(ctx, p, ks); err != nil {
		return ListAPIKeys{}, err
	}
	keys, err := st.APIKeys(ctx)
	if err != nil {
		return ListAPIKeys{}, err
	}
	out := ListAPIKeys{APIKeys: []APIKeyObject{}}
	for _, k := range keys {
		if k.RevokedAt == nil && p.within(k) && ks.holds(k) {
			out.APIKeys = append(out.APIKeys, apiKeyObject(k))
		}
	}
	out.Count = len(out.APIKeys)
	return out, nil
}

// apiKey finds a live key of scope ks that p may see (404 for any other).
func (s *Service) apiKey(ctx context.Context, p *Principal, ks keyScope, id string) (store.APIKey, APIKeyStore, error) {
	st, err := s.apiKeys()
	if err != nil {
		return store.APIKey{}, nil, err
	}
	if ks, err = s.scope(ctx, p, ks); err != nil {
		return store.APIKey{}, nil, err
	}
	k, err := st.APIKeyByID(ctx, id)
	if errors.Is(err, store.ErrNotFound) || err == nil && (k.RevokedAt != nil || !p.within(k) || !ks.holds(k)) {
		return store.APIKey{}, nil, notFound("API key %s not found", id)
	}
	return k, st, err
}

// GetAPIKey returns a key p may see (never its secret).
func (s *Service) GetAPIKey(ctx context.Context, p *Principal, ks keyScope, id string) (APIKeyObject, error) {
	k, _, err := s.apiKey(ctx, p, ks, id)
	if err != nil {
		return APIKeyObject{}, err
	}
	return apiKeyObject(k), nil
}

// UpdateAPIKey renames a key p may see or sets its permissions (only
// ones p holds); the fields omitted stay.
func (s *Service) UpdateAPIKey(ctx context.Context, p *Principal, ks keyScope, id string, req CreateAPIKeyRequest) (APIKeyObject, error) {
	k, st, err := s.apiKey(ctx, p, ks, id)
	if err != nil {
		return APIKeyObject{}, err
	}
	if req.Name != nil {
		if len(*req.Name) > 200 {
			return APIKeyObject{}, badField("name", "at most 200 bytes")
		}
		k.Name = *req.Name
	}
	if req.Permissions != nil {
		if k.Permissions, err = ParsePermissions(req.Permissions); err != nil {
			return APIKeyObject{}, err
		}
		if err := p.grant(k.Permissions); err != nil {
			return APIKeyObject{}, err
		}
	}
	k.UpdatedAt = s.cfg.Now().UTC()
	if err := st.UpdateAPIKey(ctx, k.ID, k.Name, k.Permissions, k.UpdatedAt); errors.Is(err, store.ErrNotFound) {
		return APIKeyObject{}, notFound("API key %s not found", id)
	} else if err != nil {
		return APIKeyObject{}, err
	}
	return apiKeyObject(k), nil
}

// DeleteAPIKey revokes a key p may see (404 for any other).
func (s *Service) DeleteAPIKey(ctx context.Context, p *Principal, ks keyScope, id string) error {
	k, st, err := s.apiKey(ctx, p, ks, id)
	if err != nil {
		return err
	}
	return st.RevokeAPIKey(ctx, k.ID)
}

func (h *Handler) apiKeyRoutes(a func(string, authed)) {
	for _, pre := range []string{"/v0", "/v0/inboxes/{inbox_id}", "/v0/pods/{pod_id}"} {
		wrap := func(f authed) authed { return f }
		if pre == "/v0/pods/{pod_id}" {
			wrap = h.inPod
		}
		scope := func(r *http.Request) keyScope {
			return keyScope{inbox: r.PathValue("inbox_id"), pod: r.PathValue("pod_id") != ""}
		}
		a("GET "+pre+"/api-keys", wrap(func(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
			v, err := h.svc.ListAPIKeys(r.Context(), p, scope(r))
			return v, 0, err
		}))
		a("POST "+pre+"/api-keys", wrap(func(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
			return answer(r, decodeAs[CreateAPIKeyRequest], func(req CreateAPIKeyRequest) (any, error) {
				return h.svc.CreateAPIKey(r.Context(), p, scope(r), req)
			})
		}))
		a("GET "+pre+"/api-keys/{api_key_id}", wrap(func(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
			v, err := h.svc.GetAPIKey(r.Context(), p, scope(r), r.PathValue("api_key_id"))
			return v, 0, err
		}))
		a("PATCH "+pre+"/api-keys/{api_key_id}", wrap(func(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
			return answer(r, decodeAs[CreateAPIKeyRequest], func(req CreateAPIKeyRequest) (any, error) {
				return h.svc.UpdateAPIKey(r.Context(), p, scope(r), r.PathValue("api_key_id"), req)
			})
		}))
		a("DELETE "+pre+"/api-keys/{api_key_id}", wrap(func(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
			return noContent(w, h.svc.DeleteAPIKey(r.Context(), p, scope(r), r.PathValue("api_key_id")))
		}))
	}
}

// Identity is the SDK's Identity (auth.me): the scope of the key that
// asks. A key scoped to several inboxes answers its first as inbox_id
// and every one in inbox_ids (envelopd's).
type Identity struct {
	ScopeType      string   `json:"scope_type"` // organization, pod or inbox
	ScopeID        string   `json:"scope_id"`
	OrganizationID string   `json:"organization_id"`
	PodID          string   `json:"pod_id,omitempty"`
	InboxID        string   `json:"inbox_id,omitempty"`
	InboxIDs       []string `json:"inbox_ids,omitempty"`
	APIKeyID       string   `json:"api_key_id,omitempty"`
}

// Me is auth.me: p's identity.
func (p *Principal) Me() Identity {
	id := Identity{ScopeType: "organization", ScopeID: podID, OrganizationID: podID, APIKeyID: p.KeyID}
	switch {
	case p.Inboxes != nil:
		id.ScopeType, id.PodID, id.InboxIDs = "inbox", podID, p.Inboxes
		if len(p.Inboxes) > 0 {
			id.ScopeID, id.InboxID = p.Inboxes[0], p.Inboxes[0]
		}
	case p.Pod != "":
		id.ScopeType, id.ScopeID, id.PodID = "pod", p.Pod, p.Pod
	}
	return id
}

func (h *Handler) authMe(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
	return p.Me(), 0, nil
}
