package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/envelopd/envelopd/store"
)

// Events: the websocket at /v0 and the webhooks read one
// durable event log (store/events.go), written by the store in the
// transaction that makes each event true. The event objects are the
// SDK's (agentmail@0.5.27 api/resources/events/types, with the wire
// names of serialization/resources/events): MessageReceivedEvent,
// MessageSentEvent, MessageDeliveredEvent, MessageBouncedEvent.

// EventLog is the durable event log the websocket and webhooks follow.
// Events after a cursor must come in id order, and an id once seen must
// never be followed by a smaller one committing later (store/events.go).
type EventLog interface {
	Events(ctx context.Context, f store.EventFilter) ([]store.Event, error)
	LastEventID(ctx context.Context) (int64, error)
	WaitEvents(ctx context.Context, after int64) error
}

// EventID is the wire id of an event: evt_<log id>.
func EventID(id int64) string { return "evt_" + strconv.FormatInt(id, 10) }

// ParseEventID reads evt_<n> (or n).
func ParseEventID(s string) (int64, bool) {
	n, err := strconv.ParseInt(strings.TrimPrefix(s, "evt_"), 10, 64)
	return n, err == nil && n >= 0
}

// EventObject is one event as the SDK reads it.
type EventObject struct {
	Type      string        `json:"type"` // "event"
	EventType string        `json:"event_type"`
	EventID   string        `json:"event_id"`
	Message   *Message      `json:"message,omitempty"`
	Thread    *Thread       `json:"thread,omitempty"`
	Send      *EventDetail  `json:"send,omitempty"`
	Delivery  *EventDetail  `json:"delivery,omitempty"`
	Bounce    *BounceDetail `json:"bounce,omitempty"`
	Reject    *RejectDetail `json:"reject,omitempty"` // message.rejected
	Domain    *DomainObject `json:"domain,omitempty"` // domain.verified (domains.go)
	// Payment: payment.verified and payment.rejected — the settled
	// payment (docs/payments.md); Message carries it too, in its
	// envelopay extension.
	Payment *store.Payment `json:"payment,omitempty"`
}

// EventHead is what the SDK's Send, Delivery, Bounce and Reject begin
// with: the message an event is about and when it happened.
type EventHead struct {
	InboxID   string    `json:"inbox_id"`
	ThreadID  string    `json:"thread_id"`
	MessageID string    `json:"message_id"`
	Timestamp time.Time `json:"timestamp"`
}

// EventDetail is the SDK's Send and Delivery.
type EventDetail struct {
	EventHead
	Recipients []string `json:"recipients"`
}

// BounceDetail is the SDK's Bounce.
type BounceDetail struct {
	EventHead
	Type       string            `json:"type"`
	SubType    string            `json:"sub_type"`
	Recipients []BounceRecipient `json:"recipients"`
}

// RejectDetail is the SDK's Reject: a send refused before anything was
// stored; thread_id and message_id are the ones the send would have had.
type RejectDetail struct {
	EventHead
	Reason string `json:"reason"`
}

// BounceRecipient is the SDK's Recipient.
type BounceRecipient struct {
	Address string `json:"address"`
	Status  string `json:"status"`
}

func (s *Service) eventLog() (EventLog, error) {
	if s.cfg.EventLog != nil {
		return s.cfg.EventLog, nil
	}
	if l, ok := s.cfg.Store.(EventLog); ok {
		return l, nil
	}
	return nil, &Error{Status: 501, Name: "NotImplementedError", Message: "this store keeps no event log"}
}

// EventObject renders a logged event. The message and thread are read
// as they are now; a message no longer stored is ErrNotFound.
func (s *Service) EventObject(ctx context.Context, e store.Event) (EventObject, error) {
	o := EventObject{Type: "event", EventType: e.Type, EventID: EventID(e.ID)}
	switch e.Type {
	case store.EventDomainVerified:
		return s.domainEvent(ctx, o, e)
	case store.EventRejected:
		var d store.RejectDetail
		if err := json.Unmarshal([]byte(e.Detail), &d); err != nil {
			return o, fmt.Errorf("api: message.rejected event %d: %w", e.ID, err)
		}
		o.Reject = &RejectDetail{EventHead{InboxID: e.Inbox, ThreadID: d.ThreadID, MessageID: d.MessageID, Timestamp: e.CreatedAt}, d.Reason}
		return o, nil
	}
	m, err := s.cfg.Store.Message(ctx, e.MessageID)
	if err != nil {
		return o, err
	}
	im := &store.InboxMessage{Inbox: e.Inbox, Message: *m}
	head := EventHead{InboxID: e.Inbox, ThreadID: m.ThreadID, MessageID: wireMessageID(m), Timestamp: e.CreatedAt}
	switch e.Type {
	case store.EventReceived, store.EventReceivedBlocked, store.EventReceivedUnauthenticated:
		s.sync(ctx)
		if x, err := s.cfg.Store.InboxMessageByRef(ctx, e.Inbox, strconv.FormatInt(m.ID, 10)); err == nil {
			im.Labels = x.Labels
		}
		mo, err := messageObject(im, true)
		if err != nil {
			return o, err
		}
		o.Message = &mo
		ms, err := s.cfg.Store.InboxMessages(ctx, store.InboxQuery{Inbox: e.Inbox, ThreadID: m.ThreadID, Ascending: true})
		if err != nil {
			return o, err
		}
		if len(ms) == 0 {
			ms = []store.InboxMessage{*im}
		}
		t := threadObject(e.Inbox, m.ThreadID, ms)
		o.Thread = &t
	case store.EventSent, store.EventDelivered:
		d := &EventDetail{EventHead: head, Recipients: nonNil(e.Recipients)}
		if e.Type == store.EventSent {
			d.Recipients = nonNil(m.Recipients)
			o.Send = d
		} else {
			o.Delivery = d
		}
	case store.EventPaymentVerified, store.EventPaymentRejected:
		mo, err := messageObject(im, false)
		if err != nil {
			return o, err
		}
		o.Message, o.Payment = &mo, m.Payment
	case store.EventBounced:
		b := &BounceDetail{EventHead: head, Type: "Permanent", SubType: "General", Recipients: []BounceRecipient{}}
		for _, r := range e.Recipients {
			b.Recipients = append(b.Recipients, BounceRecipient{Address: r, Status: e.Detail})
		}
		o.Bounce = b
	default:
		return o, fmt.Errorf("api: unknown event type %q", e.Type)
	}
	return o, nil
}

// Subscription is what a websocket subscriber (or a webhook) listens to:
// empty lists mean everything the key may see.
type Subscription struct {
	EventTypes []string `json:"event_types"`
	InboxIDs   []string `json:"inbox_ids"`
}

// checkSubscription validates event types and inbox ids.
// A subscription's lists are bounded before anything else is done with
// them (a webhook's are bounded further by store.WebhookLimits): every
// event is matched against them.
const (
	maxSubscriptionTypes   = 64
	maxEventTypeLen        = 64
	maxSubscriptionInboxes = 100
)

func checkSubscription(sub *Subscription) error {
	if len(sub.EventTypes) > maxSubscriptionTypes {
		return badField("event_types", "at most %d event types", maxSubscriptionTypes)
	}
	var types []string
	for _, t := range sub.EventTypes {
		if len(t) > maxEventTypeLen || !slices.Contains(store.EventTypes, t) && !strings.HasPrefix(t, "message.") && t != "domain.verified" {
			return badField("event_types", "unknown event type %.64q", t)
		}
		if !slices.Contains(types, t) {
			types = append(types, t)
		}
	}
	if sub.EventTypes != nil {
		sub.EventTypes = types
	}
	if len(sub.InboxIDs) > maxSubscriptionInboxes {
		return badField("inbox_ids", "at most %d inbox ids", maxSubscriptionInboxes)
	}
	for i, b := range sub.InboxIDs {
		sub.InboxIDs[i] = strings.ToLower(strings.TrimSpace(b))
	}
	return nil
}

// filter is the store filter of sub for p, after cursor; ok false when
// nothing can match (a scoped key subscribing only to other inboxes).
func (sub Subscription) filter(p *Principal, after int64) (store.EventFilter, bool) {
	f := store.EventFilter{After: after, Limit: 100}
	switch {
	case len(sub.InboxIDs) > 0:
		for _, b := range sub.InboxIDs {
			if p.Allowed(b) {
				f.Inboxes = append(f.Inboxes, b)
			}
		}
		if len(f.Inboxes) == 0 {
			return f, false
		}
	case p.Inboxes != nil:
		f.Inboxes = p.Inboxes
	}
	if len(sub.EventTypes) > 0 {
		f.Types = sub.EventTypes
	}
	return f, true
}

// Follow calls fn for every event after cursor that sub selects for p,
// in order, until ctx ends or fn fails; it returns the last event id
// handled. A changed subscription is picked up from subs between batches.
func (s *Service) Follow(ctx context.Context, p *Principal, after int64, sub func() Subscription, fn func(EventObject) error) (int64, error) {
	log, err := s.eventLog()
	if err != nil {
		return after, err
	}
	for {
		// The newest id before the query: every event up to it is visible
		// to the query (ids commit in order), so waiting for one after it
		// misses nothing.
		last, err := log.LastEventID(ctx)
		if err != nil {
			return after, err
		}
		p = s.refreshed(ctx, p)
		f, ok := sub().filter(p, after)
		var evs []store.Event
		if ok {
			if evs, err = log.Events(ctx, f); err != nil {
				return after, err
			}
		}
		for _, e := range evs {
			if !p.canSee(e.Type) {
				after = e.ID // withheld from a key without the permission
				continue
			}
			o, err := s.EventObject(ctx, e)
			if errors.Is(err, store.ErrNotFound) {
				after = e.ID
				continue
			}
			if err != nil {
				return after, err
			}
			if err := fn(o); err != nil {
				return after, err
			}
			after = e.ID
		}
		if ok && len(evs) == f.Limit {
			continue // more may match
		}
		// Every event up to last is handled or not selected.
		after = max(after, last)
		if err := log.WaitEvents(ctx, after); err != nil {
			return after, err
		}
	}
}

// Inbox events: the SDK's inboxes.events.list (InboxEvent,
// ListInboxEventsResponse): the labels added to and removed from an
// inbox's messages, newest first unless ascending, keyset-paged.

// InboxEventObject is the SDK's InboxEvent.
type InboxEventObject struct {
	OrganizationID string    `json:"organization_id"`
	PodID          string    `json:"pod_id"`
	InboxID        string    `json:"inbox_id"`
	EventID        string    `json:"event_id"`
	EventType      string    `json:"event_type"`
	MessageID      string    `json:"message_id"`
	Label          string    `json:"label"`
	EventAt        time.Time `json:"event_at"`
	CreatedAt      time.Time `json:"created_at"`
}

// InboxEventsObject is the SDK's ListInboxEventsResponse.
type InboxEventsObject struct {
	Page
	Events []InboxEventObject `json:"events"`
}

// ListInboxEvents lists an inbox's label events.
func (s *Service) ListInboxEvents(ctx context.Context, p *Principal, inbox string, lp ListParams) (InboxEventsObject, error) {
	b, err := s.inbox(ctx, p, inbox)
	if err != nil {
		return InboxEventsObject{}, err
	}
	l, ok := s.cfg.Store.(store.InboxEventLog)
	if !ok {
		return InboxEventsObject{}, &Error{Status: 501, Name: "NotImplementedError", Message: "this store keeps no inbox events"}
	}
	es, err := l.InboxEvents(ctx, store.InboxEventFilter{Inbox: b.Address, Cursor: lp.Cursor.ID, Ascending: lp.Ascending, Limit: lp.Limit + 1})
	if err != nil {
		return InboxEventsObject{}, err
	}
	out := InboxEventsObject{Page: Page{Limit: lp.Limit}, Events: []InboxEventObject{}}
	es, out.NextPageToken = cutPage(es, lp, func(e store.InboxEvent) Cursor { return Cursor{ID: e.ID, Asc: lp.Ascending} })
	for _, e := range es {
		mid := strconv.FormatInt(e.MessageID, 10)
		if e.RFCMessageID != "" {
			mid = "<" + e.RFCMessageID + ">"
		}
		out.Events = append(out.Events, InboxEventObject{OrganizationID: podID, PodID: podID, InboxID: e.Inbox,
			EventID: "ievt_" + strconv.FormatInt(e.ID, 10), EventType: e.Type, MessageID: mid, Label: e.Label,
			EventAt: e.CreatedAt, CreatedAt: e.CreatedAt})
	}
	out.Count = len(out.Events)
	return out, nil
}

func (h *Handler) listInboxEvents(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
	return answer(r, h.listParams, func(lp ListParams) (any, error) {
		return h.svc.ListInboxEvents(r.Context(), p, r.PathValue("inbox_id"), lp)
	})
}
