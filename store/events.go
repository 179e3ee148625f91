package store

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// The HTTP API's events: the event log the websocket and the
// webhooks read, the webhooks and their hand-off log, and Idempotency-Key
// records (migration 13).
//
// Events are written by triggers in the transaction that makes them true
// (a message stored, a queued recipient sent or failed), so an event
// exists exactly when its fact is durable — except SQLite's
// message.received (migration 16): writing it in the ingest transaction
// cost ingest CPU (docs/performance.md), so it is written by the first event read
// after the message commits (syncEvents), or by the next other event's
// write when what is owed fits a step; an other event behind a larger
// backlog is staged and numbered by the catch-up at its place (migration
// 26, writeLogged), which keeps the log in the order of the facts. A
// reader cannot tell: every read catches up first. Their ids are the order
// readers follow: a reader keeps the last id it saw and asks for the ones
// after it. That is only sound if no event can commit later below an id
// a reader has seen. SQLite keeps it by having one writer (writer.go).
// Postgres commits concurrently, so its triggers (migration 13 in
// postgres_schema.go) number a transaction's events from its own
// transaction id, as messages are (pgTx.InsertMessage), and readers only
// see ids below the oldest transaction still running (dialect
// eventVisible): nothing can commit below that line later.

// Event types (the SDK's EventType values envelopd emits).
const (
	EventReceived  = "message.received"
	EventSent      = "message.sent"
	EventDelivered = "message.delivered"
	EventBounced   = "message.bounced"
)

// The variants of message.received (the SDK's MessageReceivedEventType)
// replace it for such mail (store.receivedAs decides): a sender the
// inbox's lists block, a sender no check authenticates. envelopd has no
// spam classifier: message.received.spam is never sent.
const (
	EventReceivedBlocked         = "message.received.blocked"
	EventReceivedUnauthenticated = "message.received.unauthenticated"
)

// EventRejected is an outbound send refused (its recipient on a send
// block list, or not on an allow list): no message is stored, the event
// carries its inbox and Detail (RejectDetail's JSON) only.
const EventRejected = "message.rejected"

// EventTypes are the event types envelopd emits.
var EventTypes = []string{EventReceived, EventReceivedBlocked, EventReceivedUnauthenticated, EventSent, EventDelivered,
	EventBounced, EventRejected, EventPaymentVerified, EventPaymentRejected}

// IsReceived reports whether typ is message.received or one of its
// variants (one payload shape: the message and its thread).
func IsReceived(typ string) bool {
	return typ == EventReceived || typ == EventReceivedBlocked || typ == EventReceivedUnauthenticated
}

// Event is one entry of the event log.
type Event struct {
	ID         int64
	Type       string
	Inbox      string
	MessageID  int64    // messages.id
	Recipients []string // delivered / bounced
	Detail     string   // bounced: the last delivery error
	CreatedAt  time.Time
}

// EventFilter selects events after a cursor.
type EventFilter struct {
	After   int64
	Inboxes []string // nil: every inbox
	Types   []string // nil: every type
	Limit   int      // 0: 100
}

func inList(col string, vals []string) (string, []any) {
	ph := make([]string, len(vals))
	args := make([]any, len(vals))
	for i, v := range vals {
		ph[i], args[i] = "?", v
	}
	return col + " IN (" + strings.Join(ph, ",") + ")", args
}

// syncEvents brings the event log up to the committed messages where
// their message.received events are not written at insert (dialect
// syncEvents, SQLite's migration 16):
// every event read runs it first, so a reader sees a message's event as
// soon as the message is committed, as with a trigger. A failure (a
// read-only database) leaves the log as it is: the read goes on, and the
// API's index loop reports the error.
func (s *core) syncEvents(ctx context.Context) {
	if s.d.syncEvents == "" {
		return
	}
	for {
		var lag bool
		if err := s.r.QueryRowContext(ctx, s.d.eventsLag).Scan(&lag); err != nil || !lag {
			return
		}
		// In steps, each its own write, so that a backlog (mail stored
		// while nothing read the log) never holds the writer for long.
		var more bool
		if err := s.write(ctx, func(tx Tx) error {
			var err error
			more, err = s.catchUpStep(tx)
			return err
		}); err != nil || !more {
			return
		}
	}
}

// syncEventsStep bounds the message ids whose received events one
// writer transaction writes, whoever writes them: an event read
// (syncEvents) or a write that logs another event (writeLogged).
const syncEventsStep = 5000

// catchUpBudget is the writer's transaction on SQLite: it counts the
// message ids its catch-ups cover, so that the writes of one batch
// share one syncEventsStep.
type catchUpBudget interface{ caughtUp(n int64) int64 }

// caughtUp adds n to the ids tx's catch-ups cover and returns the total
// (0 where tx keeps no count).
func caughtUp(tx Tx, n int64) int64 {
	if b, ok := tx.(catchUpBudget); ok {
		return b.caughtUp(n)
	}
	return 0
}

// catchUpStep writes in tx the received events of the next message ids,
// within what is left of the transaction's step; more says ids are left.
func (s *core) catchUpStep(tx Tx) (more bool, err error) {
	var behind int64
	if err := tx.QueryRow(s.d.eventsBehind).Scan(&behind); err != nil {
		return false, fmt.Errorf("store: event log catch-up: %w", err)
	}
	n := min(behind, syncEventsStep-caughtUp(tx, 0))
	if n <= 0 {
		return behind > 0, nil
	}
	if _, err := tx.Exec(s.d.syncEvents, n); err != nil {
		return false, fmt.Errorf("store: event log catch-up: %w", err)
	}
	caughtUp(tx, n)
	return behind > n, nil
}

// writeLogged is write for an fn that may log an event other than
// message.received (a message sent, a recipient delivered or bounced, a
// payment settled, a domain verified). Where received events are
// written late (SQLite), such an event is written at once only when the
// log is caught up to its place; otherwise its trigger stages it
// (api_events_staged) and the catch-up that reaches its place numbers
// it, after the received events of the messages stored before it
// (migration 27): the log keeps the order of the facts without fn
// waiting for a backlog. writeLogged catches up, in fn's transaction,
// what is owed when it fits what is left of the step (the usual case:
// a few messages since the last read), so that fn's events are written
// at once; a larger backlog is left to the readers' catch-up
// (syncEvents), in steps between the other writers', and fn's
// transaction covers no message ids at all.
func (s *core) writeLogged(ctx context.Context, fn func(tx Tx) error) error {
	if s.d.syncEvents == "" {
		return s.write(ctx, fn)
	}
	return s.write(ctx, func(tx Tx) error {
		var behind int64
		if err := tx.QueryRow(s.d.eventsBehind).Scan(&behind); err != nil {
			return fmt.Errorf("store: event log catch-up: %w", err)
		}
		if behind > 0 && behind <= syncEventsStep-caughtUp(tx, 0) {
			if _, err := tx.Exec(s.d.syncEvents, behind); err != nil {
				return fmt.Errorf("store: event log catch-up: %w", err)
			}
			caughtUp(tx, behind)
		}
		return fn(tx)
	})
}

// RejectDetail is the Detail of a message.rejected event (JSON): the
// refused message's thread and Message-ID as the send would have had
// them, and why it was refused.
type RejectDetail struct {
	ThreadID  string `json:"thread_id"`
	MessageID string `json:"message_id"`
	Reason    string `json:"reason"`
}

// EventLogger is the ability to log an event no stored message carries
// (both backends).
type EventLogger interface {
	// LogRejected logs a message.rejected event of inbox at at.
	LogRejected(ctx context.Context, inbox string, d RejectDetail, at time.Time) error
}

// LogRejected implements EventLogger.
func (s eventRoom) LogRejected(ctx context.Context, inbox string, d RejectDetail, at time.Time) error {
	detail, err := json.Marshal(d)
	if err != nil {
		return err
	}
	return s.writeLogged(ctx, func(tx Tx) error {
		for _, q := range s.d.logEvent {
			if _, err := tx.Exec(q, EventRejected, strings.ToLower(inbox), string(detail), at.UTC().UnixNano()); err != nil {
				return fmt.Errorf("store: log event: %w", err)
			}
		}
		return nil
	})
}

// Events returns the events after f.After, in id order.
func (s eventRoom) Events(ctx context.Context, f EventFilter) ([]Event, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	s.syncEvents(ctx)
	if f.Limit <= 0 {
		f.Limit = 100
	}
	where, args := "e.id > ?"+s.and(s.d.eventVisible), []any{f.After}
	if f.Inboxes != nil {
		c, a := inList("inbox", f.Inboxes)
		where += " AND " + c
		args = append(args, a...)
	}
	if f.Types != nil {
		c, a := inList("type", f.Types)
		where += " AND " + c
		args = append(args, a...)
	}
	return queryAll(ctx, s.r, "events", func(sc scanner) (e Event, err error) {
		var rcpts string
		err = sc.Scan(&e.ID, &e.Type, &e.Inbox, &e.MessageID, &rcpts, &e.Detail, unixTime{&e.CreatedAt})
		_ = json.Unmarshal([]byte(rcpts), &e.Recipients)
		return e, err
	}, `SELECT id, type, inbox, message_id, recipients, detail, created_at
		FROM api_events e WHERE `+where+` ORDER BY e.id LIMIT ?`, append(args, f.Limit)...)
}

// LastEventID is the id of the newest event (0: none).
func (s eventRoom) LastEventID(ctx context.Context) (int64, error) {
	s.syncEvents(ctx)
	var id int64
	if err := s.r.QueryRowContext(ctx, `SELECT coalesce(max(e.id), 0) FROM api_events e`+s.where(s.d.eventVisible)).Scan(&id); err != nil {
		return 0, fmt.Errorf("store: events: %w", err)
	}
	return id, nil
}

// WaitEvents blocks until an event with ID > after exists or ctx ends. It
// wakes on commits of this process at once and polls every
// Options.PollInterval for other processes' (as WaitNew).
func (s eventRoom) WaitEvents(ctx context.Context, after int64) error {
	return s.waitAbove(ctx, after, s.LastEventID)
}

// Webhook is a stored webhook.
type Webhook struct {
	ID         string
	URL        string
	EventTypes []string // empty: every type
	InboxIDs   []string // empty: every inbox
	Secret     string   // whsec_<base64>
	Enabled    bool
	// DisabledReason says why a webhook is not enabled: "key_revoked"
	// (RevokeAPIKey disabled it), "operator" (envelopd webhook disable).
	DisabledReason string
	ClientID       string
	KeyID          string // the API key that made it (its owner)
	// Failures counts the endpoint's consecutive failed deliveries; while
	// it is above 0 the endpoint is backed off until NextAt (its circuit
	// is open): none of its deliveries is claimed before.
	Failures  int
	NextAt    time.Time
	CreatedAt time.Time
	UpdatedAt time.Time
	// Headers are sent with every delivery (CheckWebhookHeaders), never
	// shown back: only their names are (WebhookHeaderNames).
	Headers map[string]string
}

// State is "enabled", "failing" (enabled, its endpoint backed off after
// failures) or "disabled".
func (w Webhook) State() string {
	switch {
	case !w.Enabled:
		return "disabled"
	case w.Failures > 0:
		return "failing"
	}
	return "enabled"
}

// WebhookLimits bound what one tenant's webhooks may cost: every event
// is matched against the webhooks through an index of (event type,
// inbox) pairs (api_webhook_subs), whose rows per webhook these bound,
// and the webhooks per key and per inbox bound the deliveries one event
// can fan out to. Zero fields take the defaults (DefaultWebhookLimits).
type WebhookLimits struct {
	PerKey       int // webhooks one API key may own; default 32
	PerInbox     int // webhooks naming one inbox; default 16
	EventTypes   int // event types of one webhook; default 16
	EventTypeLen int // bytes of one event type; default 64
	Inboxes      int // inbox ids of one webhook; default 10
	Headers      int // custom delivery headers of one webhook; default 16
	HeaderBytes  int // bytes of one header's name and value; default 1024
}

// DefaultWebhookLimits are the limits of a zero WebhookLimits.
var DefaultWebhookLimits = WebhookLimits{PerKey: 32, PerInbox: 16, EventTypes: 16, EventTypeLen: 64, Inboxes: 10, Headers: 16, HeaderBytes: 1024}

// WithDefaults is l with its zero fields set to DefaultWebhookLimits'.
func (l WebhookLimits) WithDefaults() WebhookLimits {
	d := DefaultWebhookLimits
	if l.PerKey > 0 {
		d.PerKey = l.PerKey
	}
	if l.PerInbox > 0 {
		d.PerInbox = l.PerInbox
	}
	if l.EventTypes > 0 {
		d.EventTypes = l.EventTypes
	}
	if l.EventTypeLen > 0 {
		d.EventTypeLen = l.EventTypeLen
	}
	if l.Inboxes > 0 {
		d.Inboxes = l.Inboxes
	}
	if l.Headers > 0 {
		d.Headers = l.Headers
	}
	if l.HeaderBytes > 0 {
		d.HeaderBytes = l.HeaderBytes
	}
	return d
}

// ErrLimit is wrapped by the errors of a create or update over a
// WebhookLimits bound (also ErrBadInput: the request asked too much).
var ErrLimit = fmt.Errorf("%w: over a limit", ErrBadInput)

// checkShape checks w's own lists against l.
func (l WebhookLimits) checkShape(w Webhook) error {
	if len(w.EventTypes) > l.EventTypes {
		return fmt.Errorf("%w: at most %d event_types per webhook", ErrLimit, l.EventTypes)
	}
	for _, t := range w.EventTypes {
		if len(t) > l.EventTypeLen || t == "" {
			return fmt.Errorf("%w: an event type is 1 to %d bytes", ErrLimit, l.EventTypeLen)
		}
	}
	if len(w.InboxIDs) > l.Inboxes {
		return fmt.Errorf("%w: at most %d inbox_ids per webhook", ErrLimit, l.Inboxes)
	}
	for _, b := range w.InboxIDs {
		if b == "" {
			return fmt.Errorf("%w: an empty inbox id", ErrBadInput)
		}
	}
	return nil
}

// checkCounts checks, in tx, that adding w (or changing it: its own row
// is not counted) keeps its key and each of its inboxes within l.
func (s webhookRoom) checkWebhookCounts(tx Tx, w Webhook, l WebhookLimits) error {
	if w.KeyID != "" {
		// Creates by one key are serialised on its row (several nodes).
		var id string
		if err := tx.QueryRow(`SELECT id FROM api_keys WHERE id = ?`+s.d.forUpdate, w.KeyID).Scan(&id); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("store: webhook limits: %w", err)
		}
		var n int
		if err := tx.QueryRow(`SELECT count(*) FROM api_webhooks WHERE key_id = ? AND id != ?`, w.KeyID, w.ID).Scan(&n); err != nil {
			return fmt.Errorf("store: webhook limits: %w", err)
		}
		if n >= l.PerKey {
			return fmt.Errorf("%w: at most %d webhooks per API key", ErrLimit, l.PerKey)
		}
	}
	for _, b := range w.InboxIDs {
		var n int
		if err := tx.QueryRow(`SELECT count(DISTINCT webhook_id) FROM api_webhook_subs WHERE inbox = ? AND webhook_id != ?`, b, w.ID).Scan(&n); err != nil {
			return fmt.Errorf("store: webhook limits: %w", err)
		}
		if n >= l.PerInbox {
			return fmt.Errorf("%w: at most %d webhooks per inbox", ErrLimit, l.PerInbox)
		}
	}
	return nil
}

// putWebhookSubs writes w's rows of the (event type, inbox) index the
// fan-out matches events through: one per pair, "" standing for every
// type or every inbox.
func putWebhookSubs(tx Tx, w Webhook) error {
	if _, err := tx.Exec(`DELETE FROM api_webhook_subs WHERE webhook_id = ?`, w.ID); err != nil {
		return err
	}
	types, inboxes := w.EventTypes, w.InboxIDs
	if len(types) == 0 {
		types = []string{""}
	}
	if len(inboxes) == 0 {
		inboxes = []string{""}
	}
	for _, t := range types {
		for _, b := range inboxes {
			if _, err := tx.Exec(`INSERT INTO api_webhook_subs (event_type, inbox, webhook_id) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`, t, b, w.ID); err != nil {
				return err
			}
		}
	}
	return nil
}

func jsonList(l []string) string {
	if len(l) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(l)
	return string(b)
}

// jsonHeaders is a webhook's custom headers as stored.
func jsonHeaders(h map[string]string) string {
	if len(h) == 0 {
		return "{}"
	}
	b, _ := json.Marshal(h)
	return string(b)
}

const webhookCols = `id, url, event_types, inbox_ids, secret, enabled, disabled_reason, coalesce(client_id, ''), key_id, failures, next_at, created_at, updated_at, headers`

func scanWebhook(sc scanner) (Webhook, error) {
	var w Webhook
	var types, inboxes, headers string
	var next, created, updated int64
	if err := sc.Scan(&w.ID, &w.URL, &types, &inboxes, &w.Secret, &w.Enabled, &w.DisabledReason, &w.ClientID, &w.KeyID,
		&w.Failures, &next, &created, &updated, &headers); err != nil {
		return Webhook{}, err
	}
	_ = json.Unmarshal([]byte(headers), &w.Headers)
	_ = json.Unmarshal([]byte(types), &w.EventTypes)
	_ = json.Unmarshal([]byte(inboxes), &w.InboxIDs)
	if next != 0 {
		w.NextAt = time.Unix(0, next).UTC()
	}
	w.CreatedAt, w.UpdatedAt = time.Unix(0, created).UTC(), time.Unix(0, updated).UTC()
	return w, nil
}

// CreateWebhook stores w within l. With a ClientID already used, it
// returns the first webhook and created false.
func (s webhookRoom) CreateWebhook(ctx context.Context, w Webhook, l WebhookLimits) (Webhook, bool, error) {
	l = l.WithDefaults()
	if err := l.checkShape(w); err != nil {
		return Webhook{}, false, err
	}
	if err := l.CheckWebhookHeaders(w.Headers); err != nil {
		return Webhook{}, false, err
	}
	created := false
	var out Webhook
	err := s.write(ctx, func(tx Tx) error {
		if w.ClientID != "" {
			got, err := scanWebhook(tx.QueryRow(`SELECT `+webhookCols+` FROM api_webhooks WHERE client_id = ?`, w.ClientID))
			if err == nil {
				out = got
				return nil
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("store: create webhook: %w", err)
			}
		}
		if err := s.checkWebhookCounts(tx, w, l); err != nil {
			return err
		}
		var cid any
		if w.ClientID != "" {
			cid = w.ClientID
		}
		// ON CONFLICT (client_id): a create racing this one with the same
		// client_id (another node) wins; this one returns its webhook.
		res, err := tx.Exec(`INSERT INTO api_webhooks (id, url, event_types, inbox_ids, secret, enabled, disabled_reason, client_id, key_id, created_at, updated_at, headers)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (client_id) DO NOTHING`, w.ID, w.URL, jsonList(w.EventTypes), jsonList(w.InboxIDs), w.Secret, w.Enabled,
			w.DisabledReason, cid, w.KeyID, w.CreatedAt.UTC().UnixNano(), w.UpdatedAt.UTC().UnixNano(), jsonHeaders(w.Headers))
		if err != nil {
			return fmt.Errorf("store: create webhook: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("store: create webhook: %w", err)
		} else if n == 0 {
			got, err := scanWebhook(tx.QueryRow(`SELECT `+webhookCols+` FROM api_webhooks WHERE client_id = ?`, w.ClientID))
			if err != nil {
				return fmt.Errorf("store: create webhook: %w", err)
			}
			out = got
			return nil
		}
		if err := putWebhookSubs(tx, w); err != nil {
			return fmt.Errorf("store: create webhook: %w", err)
		}
		out, created = w, true
		return nil
	})
	return out, created, err
}

// WebhookByID returns a webhook or ErrNotFound.
func (s webhookRoom) WebhookByID(ctx context.Context, id string) (Webhook, error) {
	w, err := scanWebhook(s.r.QueryRowContext(ctx, `SELECT `+webhookCols+` FROM api_webhooks WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Webhook{}, fmt.Errorf("webhook %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Webhook{}, fmt.Errorf("store: webhook: %w", err)
	}
	return w, nil
}

// Webhooks lists webhooks, newest first, created before the cursor
// (created_at, id) when cursorAt is non-zero; at most limit (0: all).
func (s webhookRoom) Webhooks(ctx context.Context, cursorAt int64, cursorID string, limit int) ([]Webhook, error) {
	q := `SELECT ` + webhookCols + ` FROM api_webhooks`
	var args []any
	if cursorAt != 0 {
		q += ` WHERE (created_at, id) < (?, ?)`
		args = append(args, cursorAt, cursorID)
	}
	q += ` ORDER BY created_at DESC, id DESC`
	if limit > 0 {
		q += ` LIMIT ?`
		args = append(args, limit)
	}
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: webhooks: %w", err)
	}
	defer rows.Close()
	out := []Webhook{}
	for rows.Next() {
		w, err := scanWebhook(rows)
		if err != nil {
			return nil, fmt.Errorf("store: webhooks: %w", err)
		}
		out = append(out, w)
	}
	return out, rows.Err()
}

// UpdateWebhook replaces a webhook's url, event types, inbox ids,
// enabled flag and disabled reason, within l. Enabling it again clears
// its failures.
func (s webhookRoom) UpdateWebhook(ctx context.Context, w Webhook, l WebhookLimits) error {
	l = l.WithDefaults()
	if err := l.checkShape(w); err != nil {
		return err
	}
	if w.Enabled {
		w.DisabledReason = ""
	}
	return s.write(ctx, func(tx Tx) error {
		if err := s.checkWebhookCounts(tx, Webhook{ID: w.ID, InboxIDs: w.InboxIDs}, l); err != nil {
			return err
		}
		res, err := tx.Exec(`UPDATE api_webhooks SET url = ?, event_types = ?, inbox_ids = ?, enabled = ?, disabled_reason = ?, updated_at = ?,
			failures = CASE WHEN enabled THEN failures ELSE 0 END, next_at = CASE WHEN enabled THEN next_at ELSE 0 END WHERE id = ?`,
			w.URL, jsonList(w.EventTypes), jsonList(w.InboxIDs), w.Enabled, w.DisabledReason, w.UpdatedAt.UTC().UnixNano(), w.ID)
		if err != nil {
			return fmt.Errorf("store: update webhook: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("webhook %s: %w", w.ID, ErrNotFound)
		}
		if err := putWebhookSubs(tx, w); err != nil {
			return fmt.Errorf("store: update webhook: %w", err)
		}
		return nil
	})
}

// DeleteWebhook removes a webhook and its pending deliveries.
func (s webhookRoom) DeleteWebhook(ctx context.Context, id string) error {
	return s.write(ctx, func(tx Tx) error {
		for _, q := range []string{`DELETE FROM api_webhook_deliveries WHERE webhook_id = ?`, `DELETE FROM api_webhook_subs WHERE webhook_id = ?`} {
			if _, err := tx.Exec(q, id); err != nil {
				return fmt.Errorf("store: delete webhook: %w", err)
			}
		}
		res, err := tx.Exec(`DELETE FROM api_webhooks WHERE id = ?`, id)
		if err != nil {
			return fmt.Errorf("store: delete webhook: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("webhook %s: %w", id, ErrNotFound)
		}
		return nil
	})
}

// WebhookDelivery is a claimed delivery of one event to one webhook.
type WebhookDelivery struct {
	Webhook  Webhook
	Event    Event
	Attempts int
}

// fanOutStep bounds the events one fan-out write covers.
const fanOutStep = 1000

// fanOutWebhooks makes the deliveries of the events logged since the
// last fan-out (api_webhook_fanout holds the last event id done), in
// steps of fanOutStep events, each its own short write: never in the
// transaction that logs an event, so a tenant's webhooks cost the
// writer of mail nothing. Events find their webhooks through the
// (event type, inbox) index, four point lookups an event, not a walk of
// every webhook's lists. Only events no transaction can still commit
// below are passed (dialect eventVisible), and a delivery made twice by
// two nodes is one row (its primary key).
func (s *core) fanOutWebhooks(ctx context.Context) error {
	// Most calls find nothing new: a read, not a write, says so.
	var pending bool
	if err := s.r.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM api_events e WHERE e.id > (SELECT id FROM api_webhook_fanout)`+
		s.and(s.d.eventVisible)+`)`).Scan(&pending); err != nil {
		return fmt.Errorf("store: webhook fan-out: %w", err)
	}
	if !pending {
		return nil
	}
	for {
		var from, to int64
		var n int
		err := s.write(ctx, func(tx Tx) error {
			if err := tx.QueryRow(`SELECT id FROM api_webhook_fanout` + s.d.forUpdate).Scan(&from); err != nil {
				return err
			}
			if err := tx.QueryRow(`SELECT coalesce(max(id), ?), count(*) FROM (SELECT e.id FROM api_events e WHERE e.id > ?`+s.and(s.d.eventVisible)+
				` ORDER BY e.id LIMIT ?) x`, from, from, fanOutStep).Scan(&to, &n); err != nil {
				return err
			}
			if to == from {
				return nil
			}
			if _, err := tx.Exec(`INSERT INTO api_webhook_deliveries (webhook_id, event_id, state, next_attempt_at)
				SELECT DISTINCT w.id, e.id, 'pending', e.created_at FROM api_events e
				JOIN api_webhook_subs u ON u.event_type IN (e.type, '') AND u.inbox IN (e.inbox, '')
				JOIN api_webhooks w ON w.id = u.webhook_id
				WHERE e.id > ? AND e.id <= ? AND w.enabled
				ON CONFLICT DO NOTHING`, from, to); err != nil {
				return err
			}
			_, err := tx.Exec(`UPDATE api_webhook_fanout SET id = ?`, to)
			return err
		})
		if err != nil {
			return fmt.Errorf("store: webhook fan-out: %w", err)
		}
		if n < fanOutStep {
			return nil
		}
	}
}

// ClaimWebhookDeliveries is ClaimDeliveries for webhooks, fair across
// endpoints: of every enabled webhook not backed off (NextAt passed) and
// not in flight, its oldest pending delivery due at now — one per
// webhook, oldest event first, up to limit. The delivery gets
// attempts+1 and its next attempt pushed to now+lease, and its webhook
// is leased as long (one delivery in flight per endpoint, on every node;
// a crash mid-delivery retries after the lease: at-least-once).
// WebhookDeliveryDone, Retry or Drop end the lease. Events are fanned out
// to their webhooks first (fanOutWebhooks).
//
// perOwner > 0 bounds the deliveries in flight per owner (the API key
// that made the webhook): an owner with busy[owner] in flight already
// gets at most perOwner - busy[owner] more, so that one tenant's many
// webhooks cannot take every slot of the sender.
func (s webhookRoom) ClaimWebhookDeliveries(ctx context.Context, now time.Time, lease time.Duration, limit, perOwner int, busy map[string]int) ([]WebhookDelivery, error) {
	if limit <= 0 {
		limit = 100
	}
	s.syncEvents(ctx)
	if err := s.fanOutWebhooks(ctx); err != nil {
		return nil, err
	}
	at, until := now.UTC().UnixNano(), now.Add(lease).UTC().UnixNano()
	// The candidates are read first: most calls find none and write
	// nothing. The writes below take each one again conditionally.
	cand, err := s.webhookCandidates(ctx, at)
	if err != nil || len(cand) == 0 {
		return nil, err
	}
	var out []WebhookDelivery
	err = s.write(ctx, func(tx Tx) error {
		out = nil
		slices.SortFunc(cand, func(a, b WebhookDelivery) int { return cmp.Compare(a.Event.ID, b.Event.ID) })
		taken := maps.Clone(busy)
		if taken == nil {
			taken = map[string]int{}
		}
		for _, d := range cand {
			if len(out) == limit {
				break
			}
			if perOwner > 0 && taken[d.Webhook.KeyID] >= perOwner {
				continue
			}
			// The webhook's lease: another node may have taken it.
			res, err := tx.Exec(`UPDATE api_webhooks SET next_at = ? WHERE id = ? AND enabled AND next_at <= ?`, until, d.Webhook.ID, at)
			if err != nil {
				return fmt.Errorf("store: claim webhook deliveries: %w", err)
			}
			if n, _ := res.RowsAffected(); n == 0 {
				continue
			}
			err = tx.QueryRow(`UPDATE api_webhook_deliveries SET attempts = attempts + 1, next_attempt_at = ?
				WHERE webhook_id = ? AND event_id = ? AND state = 'pending' RETURNING attempts`, until, d.Webhook.ID, d.Event.ID).Scan(&d.Attempts)
			if errors.Is(err, sql.ErrNoRows) {
				// Delivered or dropped since it was read: the webhook's
				// lease goes back.
				if _, err := tx.Exec(`UPDATE api_webhooks SET next_at = 0 WHERE id = ? AND next_at = ?`, d.Webhook.ID, until); err != nil {
					return fmt.Errorf("store: claim webhook deliveries: %w", err)
				}
				continue
			}
			if err != nil {
				return fmt.Errorf("store: claim webhook deliveries: %w", err)
			}
			w, err := scanWebhook(tx.QueryRow(`SELECT `+webhookCols+` FROM api_webhooks WHERE id = ?`, d.Webhook.ID))
			if err != nil {
				return fmt.Errorf("store: claim webhook deliveries: %w", err)
			}
			d.Webhook = w
			var rcpts string
			var created int64
			if err := tx.QueryRow(`SELECT type, inbox, message_id, recipients, detail, created_at FROM api_events WHERE id = ?`, d.Event.ID).
				Scan(&d.Event.Type, &d.Event.Inbox, &d.Event.MessageID, &rcpts, &d.Event.Detail, &created); err != nil {
				return fmt.Errorf("store: claim webhook deliveries: %w", err)
			}
			_ = json.Unmarshal([]byte(rcpts), &d.Event.Recipients)
			d.Event.CreatedAt = time.Unix(0, created).UTC()
			taken[d.Webhook.KeyID]++
			out = append(out, d)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// webhookCandidates reads, for every enabled webhook not backed off nor
// in flight at at, its oldest pending delivery due.
func (s webhookRoom) webhookCandidates(ctx context.Context, at int64) ([]WebhookDelivery, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT w.id, w.key_id, (SELECT min(d.event_id) FROM api_webhook_deliveries d
			WHERE d.webhook_id = w.id AND d.state = 'pending' AND d.next_attempt_at <= ?) AS ev
		FROM api_webhooks w WHERE w.enabled AND w.next_at <= ?`, at, at)
	if err != nil {
		return nil, fmt.Errorf("store: claim webhook deliveries: %w", err)
	}
	defer rows.Close()
	var cand []WebhookDelivery
	for rows.Next() {
		var d WebhookDelivery
		var ev sql.NullInt64
		if err := rows.Scan(&d.Webhook.ID, &d.Webhook.KeyID, &ev); err != nil {
			return nil, fmt.Errorf("store: claim webhook deliveries: %w", err)
		}
		if ev.Valid {
			d.Event.ID = ev.Int64
			cand = append(cand, d)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: claim webhook deliveries: %w", err)
	}
	return cand, nil
}

// WebhookDeliveryDone records a delivered event: the endpoint is healthy
// again (its failures cleared, its lease ended).
func (s webhookRoom) WebhookDeliveryDone(ctx context.Context, webhook string, event int64) error {
	return s.setWebhookDelivery(ctx, webhook, event, `UPDATE api_webhooks SET failures = 0, next_at = 0 WHERE id = ?`, []any{webhook},
		`UPDATE api_webhook_deliveries SET state = 'done', last_error = '' WHERE webhook_id = ? AND event_id = ?`, webhook, event)
}

// WebhookDeliveryRetry keeps a delivery pending, due at next, and backs
// its endpoint off until next (one more consecutive failure): none of
// the webhook's deliveries is claimed before (its circuit is open).
func (s webhookRoom) WebhookDeliveryRetry(ctx context.Context, webhook string, event int64, next time.Time, lastErr string) error {
	n := next.UTC().UnixNano()
	return s.setWebhookDelivery(ctx, webhook, event, `UPDATE api_webhooks SET failures = failures + 1, next_at = ? WHERE id = ?`, []any{n, webhook},
		`UPDATE api_webhook_deliveries SET state = 'pending', next_attempt_at = ?, last_error = ? WHERE webhook_id = ? AND event_id = ?`,
		n, lastErr, webhook, event)
}

// WebhookDeliveryDrop gives a delivery up (its error kept) and ends the
// webhook's lease (its failures stay).
func (s webhookRoom) WebhookDeliveryDrop(ctx context.Context, webhook string, event int64, lastErr string) error {
	return s.setWebhookDelivery(ctx, webhook, event, `UPDATE api_webhooks SET next_at = 0 WHERE id = ?`, []any{webhook},
		`UPDATE api_webhook_deliveries SET state = 'dropped', last_error = ? WHERE webhook_id = ? AND event_id = ?`, lastErr, webhook, event)
}

func (s webhookRoom) setWebhookDelivery(ctx context.Context, webhook string, event int64, wq string, wargs []any, q string, args ...any) error {
	return s.write(ctx, func(tx Tx) error {
		// A webhook deleted meanwhile took its deliveries with it.
		if _, err := tx.Exec(q, args...); err != nil {
			return fmt.Errorf("store: webhook %s delivery %d: %w", webhook, event, err)
		}
		if _, err := tx.Exec(wq, wargs...); err != nil {
			return fmt.Errorf("store: webhook %s delivery %d: %w", webhook, event, err)
		}
		return nil
	})
}

// WebhookDeliveryState is one row of the webhooks' hand-off log.
type WebhookDeliveryState struct {
	WebhookID   string    `json:"webhook_id"`
	EventID     int64     `json:"event_id"`
	State       string    `json:"state"` // pending, done, dropped
	Attempts    int       `json:"attempts"`
	NextAttempt time.Time `json:"next_attempt_at"`
	LastError   string    `json:"last_error"`
}

// WebhookDeliveries lists the webhooks' hand-off log, oldest event first.
func (s webhookRoom) WebhookDeliveries(ctx context.Context) ([]WebhookDeliveryState, error) {
	s.syncEvents(ctx)
	if err := s.fanOutWebhooks(ctx); err != nil {
		return nil, err
	}
	return queryAll(ctx, s.r, "webhook deliveries", func(sc scanner) (d WebhookDeliveryState, err error) {
		err = sc.Scan(&d.WebhookID, &d.EventID, &d.State, &d.Attempts, unixTime{&d.NextAttempt}, &d.LastError)
		return d, err
	}, `SELECT webhook_id, event_id, state, attempts, next_attempt_at, last_error
		FROM api_webhook_deliveries ORDER BY event_id, webhook_id`)
}

// Idempotency-Key records.

// ErrIdempotencyMismatch: the key was used with another request.
var ErrIdempotencyMismatch = errors.New("store: idempotency key used with another request")

// ErrIdempotencyInFlight: the first request with the key is still running.
var ErrIdempotencyInFlight = errors.New("store: idempotency key in use by a running request")

// ClaimIdempotency claims (keyID, key) for a request whose hash is req.
// The primary key makes the claim race-safe: of two concurrent requests
// one claims, the other gets ErrIdempotencyInFlight. A finished request
// with the same hash returns its stored status and response (claimed
// false); another hash is ErrIdempotencyMismatch. A claim older than
// stale whose request never finished (a crash) is taken over.
func (s idempotencyRoom) ClaimIdempotency(ctx context.Context, keyID, key string, req []byte, now time.Time, stale time.Duration) (claimed bool, status int, resp []byte, err error) {
	err = s.write(ctx, func(tx Tx) error {
		claimed, status, resp = false, 0, nil
		var gotReq []byte
		var at int64
		e := tx.QueryRow(`SELECT request, status, response, created_at FROM api_idempotency WHERE key_id = ? AND idem_key = ?`+s.d.forUpdate,
			keyID, key).Scan(&gotReq, &status, &resp, &at)
		switch {
		case errors.Is(e, sql.ErrNoRows):
			// The primary key decides a race (another node): the loser
			// inserts nothing and finds the winner's claim running.
			res, err := tx.Exec(`INSERT INTO api_idempotency (key_id, idem_key, request, created_at) VALUES (?, ?, ?, ?)
				ON CONFLICT (key_id, idem_key) DO NOTHING`, keyID, key, req, now.UTC().UnixNano())
			if err != nil {
				return fmt.Errorf("store: idempotency: %w", err)
			}
			if n, err := res.RowsAffected(); err != nil {
				return fmt.Errorf("store: idempotency: %w", err)
			} else if n == 0 {
				return ErrIdempotencyInFlight
			}
			claimed = true
			return nil
		case e != nil:
			return fmt.Errorf("store: idempotency: %w", e)
		}
		if !bytes.Equal(gotReq, req) {
			return ErrIdempotencyMismatch
		}
		if status != 0 {
			return nil
		}
		if now.Sub(time.Unix(0, at)) < stale {
			return ErrIdempotencyInFlight
		}
		if _, err := tx.Exec(`UPDATE api_idempotency SET created_at = ? WHERE key_id = ? AND idem_key = ?`,
			now.UTC().UnixNano(), keyID, key); err != nil {
			return fmt.Errorf("store: idempotency: %w", err)
		}
		claimed = true
		return nil
	})
	return claimed, status, resp, err
}

// FinishIdempotency stores the response of a claimed key; status 0
// releases the claim (the request failed without effect: a retry may run
// it again).
func (s idempotencyRoom) FinishIdempotency(ctx context.Context, keyID, key string, status int, resp []byte) error {
	return s.write(ctx, func(tx Tx) error {
		var err error
		if status == 0 {
			_, err = tx.Exec(`DELETE FROM api_idempotency WHERE key_id = ? AND idem_key = ? AND status = 0`, keyID, key)
		} else {
			_, err = tx.Exec(`UPDATE api_idempotency SET status = ?, response = ? WHERE key_id = ? AND idem_key = ?`,
				status, resp, keyID, key)
		}
		if err != nil {
			return fmt.Errorf("store: idempotency: %w", err)
		}
		return nil
	})
}

// Retention of the API's logs.

// Default retentions of the event log and the Idempotency-Key records
// (serve's -event-retention and -idempotency-retention).
const (
	DefaultEventRetention       = 30 * 24 * time.Hour
	DefaultIdempotencyRetention = 24 * time.Hour
)

// APILogPruner is the ability to forget the API's old events and
// Idempotency-Key records (both backends).
type APILogPruner interface {
	// PruneAPILogs deletes, in steps of pruneStep rows each its own
	// write, the events (and inbox events) created before now-events and the
	// Idempotency-Key records created before now-idempotency (a
	// duration ≤ 0 keeps them all). An event is kept while it may still
	// be delivered: not yet fanned out to the webhooks, or at or after
	// the oldest pending delivery; the hand-off log of the events
	// deleted goes with them. It returns the rows deleted.
	PruneAPILogs(ctx context.Context, now time.Time, events, idempotency time.Duration) (int, error)
}

// pruneStep bounds the rows one pruning write deletes.
const pruneStep = 1000

// PruneAPILogs implements APILogPruner.
func (s eventRoom) PruneAPILogs(ctx context.Context, now time.Time, events, idempotency time.Duration) (int, error) {
	total := 0
	for _, p := range []struct {
		keep time.Duration
		what string
		// step deletes up to pruneStep rows created before cut.
		step func(tx Tx, cut int64) (sql.Result, error)
	}{
		{events, "events", func(tx Tx, cut int64) (sql.Result, error) {
			// The oldest events first (by id, the primary key): a step
			// reads at most pruneStep of them.
			var to sql.NullInt64
			if err := tx.QueryRow(`SELECT max(e.id) FROM (SELECT id, created_at FROM api_events ORDER BY id LIMIT ?) e
				WHERE e.created_at < ? AND e.id <= (SELECT id FROM api_webhook_fanout)
				AND e.id < coalesce((SELECT min(d.event_id) FROM api_webhook_deliveries d WHERE d.state = 'pending'), e.id + 1)`,
				pruneStep, cut).Scan(&to); err != nil || !to.Valid {
				return nil, err
			}
			if _, err := tx.Exec(`DELETE FROM api_webhook_deliveries WHERE event_id IN
				(SELECT id FROM api_events WHERE id <= ? AND created_at < ?)`, to.Int64, cut); err != nil {
				return nil, err
			}
			return tx.Exec(`DELETE FROM api_events WHERE id <= ? AND created_at < ?`, to.Int64, cut)
		}},
		{events, "inbox events", func(tx Tx, cut int64) (sql.Result, error) {
			return tx.Exec(`DELETE FROM api_inbox_events WHERE id IN
				(SELECT id FROM api_inbox_events WHERE created_at < ? ORDER BY created_at LIMIT ?)`, cut, pruneStep)
		}},
		{idempotency, "idempotency keys", func(tx Tx, cut int64) (sql.Result, error) {
			return tx.Exec(`DELETE FROM api_idempotency WHERE (key_id, idem_key) IN
				(SELECT key_id, idem_key FROM api_idempotency WHERE created_at < ? LIMIT ?)`, cut, pruneStep)
		}},
	} {
		if p.keep <= 0 {
			continue
		}
		cut := now.Add(-p.keep).UTC().UnixNano()
		n, err := s.pruneSteps(ctx, func(tx Tx) (sql.Result, error) { return p.step(tx, cut) })
		total += n
		if err != nil {
			return total, fmt.Errorf("store: prune %s: %w", p.what, err)
		}
	}
	return total, nil
}

// pruneSteps runs step, each time its own write, until it deletes
// nothing (a nil result: nothing to delete); it returns the rows
// deleted.
func (s eventRoom) pruneSteps(ctx context.Context, step func(tx Tx) (sql.Result, error)) (int, error) {
	total := 0
	for {
		var n int64
		err := s.write(ctx, func(tx Tx) error {
			n = 0
			res, err := step(tx)
			if err != nil || res == nil {
				return err
			}
			n, err = res.RowsAffected()
			return err
		})
		if err != nil {
			return total, err
		}
		total += int(n)
		if n == 0 {
			return total, nil
		}
	}
}

// Inbox events: the label changes of an inbox's messages (the SDK's
// InboxEvent, label.added and label.removed), kept apart from the event
// log the websocket and webhooks follow (AgentMail sends them to
// neither).

// Inbox event types.
const (
	InboxEventLabelAdded   = "label.added"
	InboxEventLabelRemoved = "label.removed"
)

// InboxEvent is one label added to or removed from a message of an
// inbox.
type InboxEvent struct {
	ID        int64
	Inbox     string
	Type      string // InboxEventLabelAdded, InboxEventLabelRemoved
	MessageID int64  // messages.id
	// RFCMessageID is the message's Message-ID ("" when it has none).
	RFCMessageID string
	Label        string
	CreatedAt    time.Time
}

// InboxEventFilter selects one inbox's events: after the keyset cursor
// Cursor (0: from the newest, or the oldest when Ascending), at most
// Limit.
type InboxEventFilter struct {
	Inbox     string
	Cursor    int64
	Ascending bool
	Limit     int
}

// InboxEventLog is the ability to list an inbox's label events (both
// backends).
type InboxEventLog interface {
	InboxEvents(ctx context.Context, f InboxEventFilter) ([]InboxEvent, error)
}

// logLabelEvents writes, in tx, the label events of a message whose
// labels went from before to after.
func logLabelEvents(tx Tx, inbox string, id int64, before, after []string, at time.Time) error {
	log := func(typ string, from, to []string) error {
		for _, l := range to {
			if slices.Contains(from, l) {
				continue
			}
			if _, err := tx.Exec(`INSERT INTO api_inbox_events (inbox, type, message_id, label, created_at) VALUES (?, ?, ?, ?, ?)`,
				inbox, typ, id, l, at.UTC().UnixNano()); err != nil {
				return fmt.Errorf("store: inbox events: %w", err)
			}
		}
		return nil
	}
	if err := log(InboxEventLabelAdded, before, after); err != nil {
		return err
	}
	return log(InboxEventLabelRemoved, after, before)
}

// InboxEvents implements InboxEventLog.
func (s eventRoom) InboxEvents(ctx context.Context, f InboxEventFilter) ([]InboxEvent, error) {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	cmp, order := "<", "DESC"
	if f.Ascending {
		cmp, order = ">", "ASC"
	}
	where, args := `e.inbox = ?`, []any{strings.ToLower(f.Inbox)}
	if f.Cursor > 0 {
		where += ` AND e.id ` + cmp + ` ?`
		args = append(args, f.Cursor)
	}
	return queryAll(ctx, s.r, "inbox events", func(sc scanner) (e InboxEvent, err error) {
		err = sc.Scan(&e.ID, &e.Inbox, &e.Type, &e.MessageID, &e.RFCMessageID, &e.Label, unixTime{&e.CreatedAt})
		return e, err
	}, `SELECT e.id, e.inbox, e.type, e.message_id, coalesce(m.message_id, ''), e.label, e.created_at
		FROM api_inbox_events e LEFT JOIN messages m ON m.id = e.message_id
		WHERE `+where+` ORDER BY e.id `+order+` LIMIT ?`, append(args, f.Limit)...)
}
