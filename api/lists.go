package api

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/envelopd/envelopd/store"
)

// Allow and block lists (the SDK's lists, pods.lists and inboxes.lists
// clients): entries per direction (send, receive, reply) and type
// (allow, block) at an inbox's scope or the organisation's (the one pod
// is the organisation: /v0/lists and /v0/pods/envelopd/lists are the
// same lists). The rule is the store's (ListVerdict). A send to a
// recipient the lists refuse is a 403 MessageRejectedError, nothing
// queued.

// ListEntryObject is the SDK's ListEntry / PodListEntry.
type ListEntryObject struct {
	Entry          string    `json:"entry"`
	OrganizationID string    `json:"organization_id"`
	PodID          string    `json:"pod_id"`
	InboxID        string    `json:"inbox_id,omitempty"`
	Reason         string    `json:"reason,omitempty"`
	Direction      string    `json:"direction"`
	ListType       string    `json:"list_type"`
	EntryType      string    `json:"entry_type"`
	CreatedAt      time.Time `json:"created_at"`
}

// ListEntriesObject is the SDK's ListListEntriesResponse.
type ListEntriesObject struct {
	Page
	Entries []ListEntryObject `json:"entries"`
}

func listEntryObject(e store.ListEntry) ListEntryObject {
	o := ListEntryObject{Entry: e.Entry, OrganizationID: podID, PodID: podID, InboxID: e.Scope, Reason: e.Reason,
		Direction: e.Direction, ListType: e.Type, EntryType: "email", CreatedAt: e.CreatedAt}
	if e.EntryIsDomain() {
		o.EntryType = "domain"
	}
	return o
}

func (s *Service) lists() (store.ListStore, error) {
	if ls, ok := s.cfg.Store.(store.ListStore); ok {
		return ls, nil
	}
	return nil, &Error{Status: http.StatusNotImplemented, Name: "NotImplementedError", Message: "this store keeps no lists"}
}

// listScope checks the path's direction and type and returns the scope:
// the inbox p may see, or "" for the organisation (an unscoped key's
// only: a scoped key manages its inboxes' lists).
func (s *Service) listScope(ctx context.Context, p *Principal, inbox, direction, typ string) (string, error) {
	if direction != store.ListSend && direction != store.ListReceive && direction != store.ListReply {
		return "", badField("direction", "want send, receive or reply")
	}
	if typ != store.ListAllow && typ != store.ListBlock {
		return "", badField("type", "want allow or block")
	}
	if inbox == "" {
		if p.Inboxes != nil {
			return "", &Error{Status: http.StatusForbidden, Name: "ForbiddenError", Message: "a key scoped to inboxes manages their lists only"}
		}
		return "", nil
	}
	b, err := s.inbox(ctx, p, inbox)
	if err != nil {
		return "", err
	}
	return b.Address, nil
}

// list is the store and the scope of one list p may manage.
func (s *Service) list(ctx context.Context, p *Principal, inbox, direction, typ string) (store.ListStore, string, error) {
	ls, err := s.lists()
	if err != nil {
		return nil, "", err
	}
	scope, err := s.listScope(ctx, p, inbox, direction, typ)
	return ls, scope, err
}

// normalEntry checks an entry is an address (local@domain) or a domain
// and lower-cases it.
func normalEntry(entry string) (string, error) {
	e := strings.ToLower(strings.TrimSpace(entry))
	dom, ok := e, true
	if local, d, isAddr := strings.Cut(e, "@"); isAddr {
		dom = d
		ok = local != "" && !strings.ContainsAny(local, " \t\"<>(),;:\\[]@")
	}
	if !ok || !domainRE.MatchString(dom) || !strings.Contains(dom, ".") {
		return "", badField("entry", "%q is neither an address (name@example.com) nor a domain (example.com)", entry)
	}
	return e, nil
}

// CreateListEntry adds an entry to a list.
func (s *Service) CreateListEntry(ctx context.Context, p *Principal, inbox, direction, typ, entry, reason string) (ListEntryObject, error) {
	ls, scope, err := s.list(ctx, p, inbox, direction, typ)
	if err != nil {
		return ListEntryObject{}, err
	}
	e, err := normalEntry(entry)
	if err != nil {
		return ListEntryObject{}, err
	}
	got, err := ls.PutListEntry(ctx, store.ListEntry{Scope: scope, Direction: direction, Type: typ, Entry: e, Reason: reason, CreatedAt: s.cfg.Now().UTC()})
	if err != nil {
		return ListEntryObject{}, err
	}
	return listEntryObject(got), nil
}

// GetListEntry returns one entry.
func (s *Service) GetListEntry(ctx context.Context, p *Principal, inbox, direction, typ, entry string) (ListEntryObject, error) {
	ls, scope, err := s.list(ctx, p, inbox, direction, typ)
	if err != nil {
		return ListEntryObject{}, err
	}
	got, err := ls.GetListEntry(ctx, scope, direction, typ, entry)
	if err != nil {
		return ListEntryObject{}, err
	}
	return listEntryObject(got), nil
}

// DeleteListEntry removes one entry.
func (s *Service) DeleteListEntry(ctx context.Context, p *Principal, inbox, direction, typ, entry string) error {
	ls, scope, err := s.list(ctx, p, inbox, direction, typ)
	if err != nil {
		return err
	}
	return ls.DeleteListEntry(ctx, scope, direction, typ, entry)
}

// ListListEntries lists one list by entry (keyset: the last entry).
func (s *Service) ListListEntries(ctx context.Context, p *Principal, inbox, direction, typ string, lp ListParams) (ListEntriesObject, error) {
	ls, scope, err := s.list(ctx, p, inbox, direction, typ)
	if err != nil {
		return ListEntriesObject{}, err
	}
	es, err := ls.ListEntries(ctx, scope, direction, typ, lp.Cursor.Inbox, lp.Limit+1)
	if err != nil {
		return ListEntriesObject{}, err
	}
	out := ListEntriesObject{Page: Page{Limit: lp.Limit}, Entries: []ListEntryObject{}}
	es, out.NextPageToken = cutPage(es, lp, func(e store.ListEntry) Cursor { return Cursor{Inbox: e.Entry} })
	for _, e := range es {
		out.Entries = append(out.Entries, listEntryObject(e))
	}
	out.Count = len(out.Entries)
	return out, nil
}

// checkSendLists refuses a send from inbox to a recipient its send lists
// block (403 MessageRejectedError).
func (s *Service) checkSendLists(ctx context.Context, inbox string, rcpts []string) error {
	ls, ok := s.cfg.Store.(store.ListStore)
	if !ok {
		return nil
	}
	for _, r := range rcpts {
		blocked, entry, err := ls.ListVerdict(ctx, inbox, store.ListSend, r)
		if err != nil {
			return err
		}
		if blocked {
			why := "not on the send allow list"
			if entry != "" {
				why = "on the send block list (" + entry + ")"
			}
			return &Error{Status: http.StatusForbidden, Name: "MessageRejectedError", Message: "recipient " + r + " is " + why + "; nothing was sent"}
		}
	}
	return nil
}

// logRejected logs the message.rejected event of a send refused with
// refusal: its thread and Message-ID are the ones it would have had. A
// failure to log is logged; the refusal stands.
func (s *Service) logRejected(ctx context.Context, inbox string, out *store.Outgoing, refusal error) {
	el, ok := s.cfg.Store.(store.EventLogger)
	if !ok {
		return
	}
	d := store.RejectDetail{MessageID: "<" + out.MessageID + ">", Reason: refusal.Error()}
	var e *Error
	if errors.As(refusal, &e) {
		d.Reason = e.Message
	}
	// The thread it would have joined: the ingest rules' answer for its
	// stored copy, when the store can tell without writing (Check).
	if ck, ok := s.cfg.Store.(store.Ingester); ok && out.Copy != nil {
		if oc, err := ck.Check(ctx, out.Copy); err == nil {
			d.ThreadID = oc.ThreadID
		}
	}
	if err := el.LogRejected(ctx, inbox, d, time.Now()); err != nil {
		s.cfg.Logger.Warn("api: message.rejected not logged", "inbox", inbox, "error", err)
	}
}

// Handlers.

func (h *Handler) listRoutes(a func(string, authed)) {
	for _, pre := range []string{"/v0/lists", "/v0/inboxes/{inbox_id}/lists", "/v0/pods/{pod_id}/lists"} {
		wrap := func(f authed) authed { return f }
		if strings.Contains(pre, "pod_id") {
			wrap = h.inPod
		}
		a("GET "+pre+"/{direction}/{type}", wrap(h.listListEntries))
		a("POST "+pre+"/{direction}/{type}", wrap(h.createListEntry))
		a("GET "+pre+"/{direction}/{type}/{entry}", wrap(h.getListEntry))
		a("DELETE "+pre+"/{direction}/{type}/{entry}", wrap(h.deleteListEntry))
	}
}

func pathEntry(r *http.Request) string {
	e := r.PathValue("entry")
	if u, err := url.PathUnescape(e); err == nil {
		e = u
	}
	return e
}

func (h *Handler) listListEntries(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
	lp, err := h.listParams(r)
	if err != nil {
		return nil, 0, err
	}
	return respond(h.svc.ListListEntries(r.Context(), p, r.PathValue("inbox_id"), r.PathValue("direction"), r.PathValue("type"), lp))
}

func (h *Handler) createListEntry(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
	var req struct {
		Entry  string `json:"entry"`
		Reason string `json:"reason"`
	}
	if err := decode(r, &req); err != nil {
		return nil, 0, err
	}
	return respond(h.svc.CreateListEntry(r.Context(), p, r.PathValue("inbox_id"), r.PathValue("direction"), r.PathValue("type"), req.Entry, req.Reason))
}

func (h *Handler) getListEntry(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
	return respond(h.svc.GetListEntry(r.Context(), p, r.PathValue("inbox_id"), r.PathValue("direction"), r.PathValue("type"), pathEntry(r)))
}

func (h *Handler) deleteListEntry(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
	return noContent(w, h.svc.DeleteListEntry(r.Context(), p, r.PathValue("inbox_id"), r.PathValue("direction"), r.PathValue("type"), pathEntry(r)))
}
