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

// FuzzParsePermissionList: any comma list is a sorted list of known
// names without repeats, or a 400 naming the field; never a panic.
func FuzzParsePermissionList(f *testing.F) {
	for _, s := range []string{"", "inbox_read", "message_read, inbox_read,message_read", "nope", ",,", "inbox_read,\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParsePermissionList(s)
		if err != nil {
			if e := asError(err); e.Status != 400 || got != nil {
				t.Fatalf("%q: %v %v", s, e, got)
			}
			return
		}
		if got == nil || !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) {
			t.Fatalf("%q: %v", s, got)
		}
		for _, n := range got {
			if !slices.Contains(Permissions, n) {
				t.Fatalf("%q: unknown %q accepted", s, n)
			}
		}
	})
}
