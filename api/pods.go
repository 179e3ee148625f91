package api

import (
	"context"
	"net/http"
	"time"
)

// Pods and the organisation (the SDK's pods and organizations clients):
// a self-hosted envelopd is one organisation holding one pod, podID, and
// every inbox is in it (each Inbox reports pod_id). The pod's routes are
// the inbox and thread routes under /v0/pods/{pod_id}; creating or
// deleting a pod is a 400 naming the one pod, another pod id a 404.

// Pod is the SDK's Pod.
type Pod struct {
	PodID     string    `json:"pod_id"`
	Name      string    `json:"name"`
	UpdatedAt time.Time `json:"updated_at"`
	CreatedAt time.Time `json:"created_at"`
}

// ListPods is the SDK's ListPodsResponse.
type ListPods struct {
	Count int   `json:"count"`
	Limit int   `json:"limit"`
	Pods  []Pod `json:"pods"`
}

// Organization is the SDK's Organization.
type Organization struct {
	OrganizationID string    `json:"organization_id"`
	InboxCount     int       `json:"inbox_count"`
	DomainCount    int       `json:"domain_count"`
	UpdatedAt      time.Time `json:"updated_at"`
	CreatedAt      time.Time `json:"created_at"`
}

// since is when the installation began, as the API can tell: the oldest
// inbox's creation, or the Unix epoch before any inbox exists.
func (s *Service) since(ctx context.Context, p *Principal) (time.Time, error) {
	l, err := s.ListInboxes(ctx, p, ListParams{Limit: 1, Ascending: true})
	if err != nil || len(l.Inboxes) == 0 {
		return time.Unix(0, 0).UTC(), err
	}
	return l.Inboxes[0].CreatedAt, nil
}

// GetPod returns the one pod.
func (s *Service) GetPod(ctx context.Context, p *Principal, id string) (Pod, error) {
	if id != podID {
		return Pod{}, notFound("pod %s not found: the only pod is %q", id, podID)
	}
	t, err := s.since(ctx, p)
	return Pod{PodID: podID, Name: podID, UpdatedAt: t, CreatedAt: t}, err
}

// Organization returns the one organisation: its inboxes (those p may
// see) and domains.
func (s *Service) Organization(ctx context.Context, p *Principal) (Organization, error) {
	o := Organization{OrganizationID: podID, DomainCount: len(s.cfg.Domains)}
	lp := ListParams{Limit: 100, Ascending: true}
	for {
		l, err := s.ListInboxes(ctx, p, lp)
		if err != nil {
			return Organization{}, err
		}
		if o.InboxCount == 0 && len(l.Inboxes) > 0 {
			o.CreatedAt = l.Inboxes[0].CreatedAt
		}
		o.InboxCount += len(l.Inboxes)
		if l.NextPageToken == "" {
			break
		}
		if lp.Cursor, err = DecodeCursor(l.NextPageToken); err != nil {
			return Organization{}, err
		}
	}
	if o.CreatedAt.IsZero() {
		o.CreatedAt = time.Unix(0, 0).UTC()
	}
	o.UpdatedAt = o.CreatedAt
	return o, nil
}

func (h *Handler) podRoutes(a func(string, authed)) {
	a("GET /v0/pods", func(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
		pod, err := h.svc.GetPod(r.Context(), p, podID)
		return ListPods{Count: 1, Limit: 1, Pods: []Pod{pod}}, 0, err
	})
	a("GET /v0/pods/{pod_id}", func(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
		return respond(h.svc.GetPod(r.Context(), p, r.PathValue("pod_id")))
	})
	one := func(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
		return nil, 0, badField("pod_id", "envelopd has exactly one pod, %q, holding every inbox; pods cannot be created or deleted (docs/api.md, \"Pods and the organisation\")", podID)
	}
	a("POST /v0/pods", one)
	a("DELETE /v0/pods/{pod_id}", h.inPod(one))
	a("GET /v0/organizations", func(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
		return respond(h.svc.Organization(r.Context(), p))
	})
	pre := "/v0/pods/{pod_id}"
	for pattern, f := range map[string]authed{
		"GET " + pre + "/inboxes":                                         h.listInboxes,
		"POST " + pre + "/inboxes":                                        h.createInbox,
		"GET " + pre + "/inboxes/{inbox_id}":                              h.getInbox,
		"PATCH " + pre + "/inboxes/{inbox_id}":                            h.updateInbox,
		"DELETE " + pre + "/inboxes/{inbox_id}":                           h.deleteInbox,
		"GET " + pre + "/threads":                                         h.listThreads,
		"GET " + pre + "/threads/{thread_id}":                             h.getThread,
		"PATCH " + pre + "/threads/{thread_id}":                           h.updateThread,
		"DELETE " + pre + "/threads/{thread_id}":                          h.deleteThread,
		"GET " + pre + "/threads/{thread_id}/attachments/{attachment_id}": h.getAttachment,
	} {
		a(pattern, h.inPod(f))
	}
}

// inPod answers 404 for a pod other than the one, else f.
func (h *Handler) inPod(f authed) authed {
	return func(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
		if id := r.PathValue("pod_id"); id != podID {
			return nil, 0, notFound("pod %s not found: the only pod is %q", id, podID)
		}
		return f(w, r, p)
	}
}
