package api

import (
	"slices"

	"github.com/envelopd/envelopd/mailout"
	"testing"
)

// TestRoutePermissions: every authenticated route names the permission
// it needs (routePermissions), one the SDKs declare or "" for a route
// every key may call: a route added without one fails here (and is
// refused to every key).
func TestRoutePermissions(t *testing.T) {
	t.Parallel()
	svc, err := NewService(Config{Store: struct{ Store }{}, Mailer: func(string) *mailout.Mailer { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	h := NewHandler(svc, HandlerOptions{})
	if len(h.patterns) < 100 {
		t.Fatalf("%d routes", len(h.patterns))
	}
	public := []string{"GET /v0/auth/me", "GET /v0/tokens", "/v0/"}
	for _, pattern := range h.patterns {
		perm, ok := routePermission(pattern)
		switch {
		case !ok:
			t.Errorf("route %q (%s) declares no permission", pattern, routeKey(pattern))
		case perm == "" && !slices.Contains(public, pattern):
			t.Errorf("route %q needs no permission", pattern)
		case perm != "" && !slices.Contains(Permissions, perm):
			t.Errorf("route %q needs %q, not a permission of the SDKs", pattern, perm)
		}
	}
	for pattern, want := range map[string]string{
		"GET /v0/pods/{pod_id}/inboxes/{inbox_id}":             "inbox_read",
		"DELETE /v0/pods/{pod_id}":                             "pod_delete",
		"POST /v0/inboxes/{inbox_id}/messages/send":            "message_send",
		"GET /v0/inboxes/{inbox_id}/threads/{thread_id}":       "thread_read",
		"PATCH /v0/pods/{pod_id}/api-keys/{api_key_id}":        "api_key_update",
		"GET /v0/inboxes/{inbox_id}/lists/{direction}/{type}":  "list_entry_read",
		"POST /v0/pods/{pod_id}/inboxes/{inbox_id}/drafts":     "draft_create",
		"GET /v0/pods/{pod_id}/metrics/events":                 "metrics_read",
		"DELETE /v0/inboxes/{inbox_id}/webhooks/{webhook_id}":  "webhook_delete",
		"POST /v0/domains/{domain_id}/verify":                  "domain_update",
		"GET /v0/inboxes/{inbox_id}/messages/{message_id}/raw": "message_read",
	} {
		if got, _ := routePermission(pattern); got != want {
			t.Errorf("%s needs %q, want %q", pattern, got, want)
		}
	}
}
