package api

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
)

// Per-operation permissions of an API key: the SDKs' ApiKeyPermissions
// (snake_case on the wire). A key created without permissions may do
// everything; a key with permissions only the operations set true. Every
// route names the permission it needs in routePermissions (one table;
// a route missing from it is refused), the websocket withholds the events
// a key may not read (eventPermissions) and the MCP server its tools the
// same way. A key never makes or changes a key with a permission it lacks
// itself (Principal.grant).

// Permissions are the names the SDKs declare: the TypeScript SDK's
// (agentmail 0.5.27) and the Python SDK's (0.5.0, which also has
// thread_read and thread_delete, and lacks message_delete,
// label_unauthenticated_read, api_key_update and the provider ones).
var Permissions = []string{
	"inbox_read", "inbox_create", "inbox_update", "inbox_delete",
	"thread_read", "thread_delete",
	"message_read", "message_send", "message_update", "message_delete",
	"label_spam_read", "label_blocked_read", "label_unauthenticated_read", "label_trash_read",
	"draft_read", "draft_create", "draft_update", "draft_delete", "draft_send",
	"webhook_read", "webhook_create", "webhook_update", "webhook_delete",
	"domain_read", "domain_create", "domain_update", "domain_delete",
	"list_entry_read", "list_entry_create", "list_entry_delete",
	"metrics_read",
	"api_key_read", "api_key_create", "api_key_update", "api_key_delete",
	"provider_connect", "provider_share_owner",
	"pod_read", "pod_create", "pod_delete",
}

// impliedBy: the TypeScript SDK has no thread permissions (message_read
// "also required to read threads", message_delete to delete them); the
// Python SDK's thread_read and thread_delete grant the same.
var impliedBy = map[string]string{"thread_read": "message_read", "thread_delete": "message_delete"}

// Can reports whether p holds perm ("" is every key's).
func (p *Principal) Can(perm string) bool {
	if perm == "" || p.Permissions == nil {
		return true
	}
	return slices.Contains(p.Permissions, perm) || impliedBy[perm] != "" && slices.Contains(p.Permissions, impliedBy[perm])
}

// Need is nil when p holds perm, else the 403 naming it.
func (p *Principal) Need(perm string) error {
	if p.Can(perm) {
		return nil
	}
	if alt := impliedBy[perm]; alt != "" {
		return forbidden("this API key lacks the %s permission (or %s, which grants it; docs/api.md, \"API keys\")", perm, alt)
	}
	return forbidden("this API key lacks the %s permission (docs/api.md, \"API keys\")", perm)
}

func forbidden(format string, args ...any) *Error {
	return &Error{Status: http.StatusForbidden, Name: "ForbiddenError", Message: fmt.Sprintf(format, args...)}
}

// ParsePermissions reads the SDK's permissions object: nil (omitted)
// stays nil (every permission); otherwise the names set true, sorted. An
// unknown name is a 400.
func ParsePermissions(m map[string]bool) ([]string, error) {
	if m == nil {
		return nil, nil
	}
	out := []string{}
	for name, ok := range m {
		if !slices.Contains(Permissions, name) {
			return nil, badField("permissions", "unknown permission %.64q (known: %s)", name, strings.Join(Permissions, ", "))
		}
		if ok {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out, nil
}

// ParsePermissionList reads a comma-separated list of permission names
// (the CLI's --permissions): "" is none.
func ParsePermissionList(s string) ([]string, error) {
	m := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			m[f] = true
		}
	}
	return ParsePermissions(m)
}

// permissionsObject is the SDK's ApiKeyPermissions of a stored list: nil
// (every permission) is omitted; otherwise every known name, true or
// false.
func permissionsObject(granted []string) map[string]bool {
	if granted == nil {
		return nil
	}
	m := make(map[string]bool, len(Permissions))
	for _, n := range Permissions {
		m[n] = slices.Contains(granted, n)
	}
	return m
}

// grant checks that p may give a key the permissions want (nil: every
// one): each must be p's too (403 naming the first that is not).
func (p *Principal) grant(want []string) error {
	if p.Permissions == nil {
		return nil
	}
	if want == nil {
		return forbidden("a key with permissions cannot make or change a key with every permission; give permissions within its own")
	}
	for _, n := range want {
		if !p.Can(n) {
			return forbidden("this API key lacks the %s permission and cannot give it to a key", n)
		}
	}
	return nil
}

// routePermissions is the permission each route needs, by routeKey (the
// method and the path after /v0 without the pod and inbox prefix: the
// organisation, pod and inbox forms of an operation need the same). ""
// is a route every key may call.
var routePermissions = map[string]string{
	"GET /auth/me": "",
	"GET /tokens":  "", // no inbox data
	"/":            "", // the 501 of what envelopd does not serve

	"GET /inboxes":               "inbox_read",
	"GET /inboxes/search":        "inbox_read",
	"POST /inboxes":              "inbox_create",
	"GET /inboxes/{inbox_id}":    "inbox_read",
	"PATCH /inboxes/{inbox_id}":  "inbox_update",
	"DELETE /inboxes/{inbox_id}": "inbox_delete",

	"GET /messages":                                          "message_read",
	"GET /messages/search":                                   "message_read",
	"GET /messages/{message_id}":                             "message_read",
	"GET /messages/{message_id}/raw":                         "message_read",
	"GET /messages/{message_id}/attachments/{attachment_id}": "message_read",
	"GET /messages/{message_id}/handoffs":                    "message_read",
	"POST /messages/batch-get":                               "message_read",
	"GET /events":                                            "message_read", // label changes of messages
	"PATCH /messages/{message_id}":                           "message_update",
	"POST /messages/batch-update":                            "message_update",
	"POST /messages/{message_id}/hold":                       "message_update",
	"POST /messages/{message_id}/release":                    "message_update",
	"DELETE /messages/{message_id}":                          "message_delete",
	"POST /messages/send":                                    "message_send",
	"POST /messages/{message_id}/reply":                      "message_send",
	"POST /messages/{message_id}/reply-all":                  "message_send",
	"POST /messages/{message_id}/forward":                    "message_send",
	"POST /threads/{thread_id}/reply":                        "message_send",

	"GET /threads":             "thread_read",
	"GET /threads/search":      "thread_read",
	"GET /threads/{thread_id}": "thread_read",
	"GET /threads/{thread_id}/attachments/{attachment_id}": "thread_read",
	"PATCH /threads/{thread_id}":                           "message_update",
	"DELETE /threads/{thread_id}":                          "thread_delete",

	"GET /drafts":            "draft_read",
	"GET /drafts/{draft_id}": "draft_read",
	"GET /drafts/{draft_id}/attachments/{attachment_id}": "draft_read",
	"POST /drafts":                 "draft_create",
	"PATCH /drafts/{draft_id}":     "draft_update",
	"DELETE /drafts/{draft_id}":    "draft_delete",
	"POST /drafts/{draft_id}/send": "draft_send",

	"GET /lists/{direction}/{type}":            "list_entry_read",
	"GET /lists/{direction}/{type}/{entry}":    "list_entry_read",
	"POST /lists/{direction}/{type}":           "list_entry_create",
	"DELETE /lists/{direction}/{type}/{entry}": "list_entry_delete",

	"GET /webhooks":                        "webhook_read",
	"GET /webhooks/{webhook_id}":           "webhook_read",
	"GET /webhooks/{webhook_id}/headers":   "webhook_read",
	"POST /webhooks":                       "webhook_create",
	"PATCH /webhooks/{webhook_id}":         "webhook_update",
	"PATCH /webhooks/{webhook_id}/headers": "webhook_update",
	"PUT /webhooks/{webhook_id}/headers":   "webhook_update",
	"DELETE /webhooks/{webhook_id}":        "webhook_delete",

	"GET /domains":                       "domain_read",
	"GET /domains/{domain_id}":           "domain_read",
	"GET /domains/{domain_id}/zone-file": "domain_read",
	"POST /domains":                      "domain_create",
	"PATCH /domains/{domain_id}":         "domain_update",
	"POST /domains/{domain_id}/verify":   "domain_update",
	"DELETE /domains/{domain_id}":        "domain_delete",

	"GET /metrics":        "metrics_read",
	"GET /metrics/events": "metrics_read",
	"GET /metrics/usage":  "metrics_read",

	"GET /api-keys":                 "api_key_read",
	"GET /api-keys/{api_key_id}":    "api_key_read",
	"POST /api-keys":                "api_key_create",
	"PATCH /api-keys/{api_key_id}":  "api_key_update",
	"DELETE /api-keys/{api_key_id}": "api_key_delete",

	"GET /pods":             "pod_read",
	"GET /pods/{pod_id}":    "pod_read",
	"GET /organizations":    "pod_read", // the organisation is its one pod
	"POST /pods":            "pod_create",
	"DELETE /pods/{pod_id}": "pod_delete",
}

// routeKey is pattern's key in routePermissions: "GET
// /v0/pods/{pod_id}/inboxes/{inbox_id}/threads" → "GET /threads".
func routeKey(pattern string) string {
	method, path, ok := strings.Cut(pattern, " ")
	if !ok {
		method, path = "", pattern
	}
	path = strings.TrimPrefix(path, "/v0")
	for _, pre := range []string{"/pods/{pod_id}", "/inboxes/{inbox_id}"} {
		if rest, ok := strings.CutPrefix(path, pre); ok && strings.HasPrefix(rest, "/") {
			path = rest
		}
	}
	if path == "" {
		path = "/"
	}
	return strings.TrimSpace(method + " " + path)
}

// routePermission is the permission pattern needs; ok is false for a
// route the table does not name (it is then refused to every key).
func routePermission(pattern string) (perm string, ok bool) {
	perm, ok = routePermissions[routeKey(pattern)]
	return perm, ok
}

// eventPermissions are the permissions a key needs to be sent an event of
// type t (the websocket): message events need message_read, the
// received ones of blocked and unauthenticated senders also
// label_blocked_read and label_unauthenticated_read; domain events
// domain_read.
func eventPermissions(t string) []string {
	switch {
	case t == "message.received.blocked":
		return []string{"message_read", "label_blocked_read"}
	case t == "message.received.unauthenticated":
		return []string{"message_read", "label_unauthenticated_read"}
	case strings.HasPrefix(t, "domain."):
		return []string{"domain_read"}
	}
	return []string{"message_read"} // message.*, payment.*
}

// canSee reports whether p may be sent events of type t.
func (p *Principal) canSee(t string) bool {
	for _, perm := range eventPermissions(t) {
		if !p.Can(perm) {
			return false
		}
	}
	return true
}

// permitted runs f for a principal holding the permission pattern needs
// (routePermissions), and answers 403 naming it otherwise.
func (h *Handler) permitted(pattern string, f authed) authed {
	h.patterns = append(h.patterns, pattern)
	perm, ok := routePermission(pattern)
	return func(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
		if !ok {
			return nil, 0, forbidden("%s declares no permission", pattern)
		}
		if err := p.Need(perm); err != nil {
			return nil, 0, err
		}
		return f(w, r, p)
	}
}

// mayFollow is nil when p may be sent every event of types (none: every
// type), else the 403 naming the permission it lacks: a webhook carries
// what the websocket would.
func (p *Principal) mayFollow(types []string) error {
	if len(types) == 0 {
		types = []string{"message.received.blocked", "message.received.unauthenticated", "domain.verified"}
	}
	for _, t := range types {
		for _, perm := range eventPermissions(t) {
			if err := p.Need(perm); err != nil {
				return err
			}
		}
	}
	return nil
}

// refreshed is p with its key's permissions as stored now (a stream
// outlives the request that opened it: an update narrowing them applies
// from its next batch); p itself when the key cannot be read.
func (s *Service) refreshed(ctx context.Context, p *Principal) *Principal {
	if p.KeyID == "" {
		return p
	}
	k, err := s.cfg.Store.APIKeyByID(ctx, p.KeyID)
	if err != nil {
		return p
	}
	cur := *p
	cur.Permissions = k.Permissions
	return &cur
}
