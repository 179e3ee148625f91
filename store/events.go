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
// cost ingest ≈ 10 % more CPU, so it is written by the first event read
// after the message commits (syncEvents), or by the next other event,
// which keeps the log in the order of the facts. A reader cannot tell:
// every read catches up first. Their ids are the order
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

// EventTypes are the event types envelopd emits.
var EventTypes = []string{EventReceived, EventSent, EventDelivered, EventBounced, EventPaymentVerified, EventPaymentRejected}

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
// (syncEvents) or the triggers of another event (writeLogged).
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
// written late (SQLite), the trigger of such an event first writes
// every received event still owed, so that the log keeps the order of
// the facts — after a long time without event reads, a whole backlog in
// fn's transaction. writeLogged runs fn only in a transaction where what
// is owed fits the step; before, it writes the backlog in steps, each a
// write of its own between the other writers'. No transaction covers
// more than syncEventsStep message ids, and the log's order holds: the
// owed events still precede fn's.
func (s *core) writeLogged(ctx context.Context, fn func(tx Tx) error) error {
	if s.d.syncEvents == "" {
		return s.write(ctx, fn)
	}
	for {
		ran := false
		err := s.write(ctx, func(tx Tx) error {
			ran = false
			var behind int64
			if err := tx.QueryRow(s.d.eventsBehind).Scan(&behind); err != nil {
				return fmt.Errorf("store: event log catch-up: %w", err)
			}
			if behind > syncEventsStep-caughtUp(tx, 0) {
				_, err := s.catchUpStep(tx)
				return err
			}
			caughtUp(tx, max(behind, 0))
			ran = true
			return fn(tx)
		})
		if err != nil || ran {
			return err
		}
	}
}

// Events returns the events after f.After, in id order.
func (s *core) Events(ctx context.Context, f EventFilter) ([]Event, error) {
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
	rows, err := s.r.QueryContext(ctx, `SELECT id, type, inbox, message_id, recipients, detail, created_at
		FROM api_events e WHERE `+where+` ORDER BY e.id LIMIT ?`, append(args, f.Limit)...)
	if err != nil {
		return nil, fmt.Errorf("store: events: %w", err)
	}
	defer rows.Close()
	out := []Event{}
	for rows.Next() {
		var e Event
		var rcpts string
		var at int64
		if err := rows.Scan(&e.ID, &e.Type, &e.Inbox, &e.MessageID, &rcpts, &e.Detail, &at); err != nil {
			return nil, fmt.Errorf("store: events: %w", err)
		}
		_ = json.Unmarshal([]byte(rcpts), &e.Recipients)
		e.CreatedAt = time.Unix(0, at).UTC()
		out = append(out, e)
	}
	return out, rows.Err()
}

// LastEventID is the id of the newest event (0: none).
func (s *core) LastEventID(ctx context.Context) (int64, error) {
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
func (s *core) WaitEvents(ctx context.Context, after int64) error {
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
}

// DefaultWebhookLimits are the limits of a zero WebhookLimits.
var DefaultWebhookLimits = WebhookLimits{PerKey: 32, PerInbox: 16, EventTypes: 16, EventTypeLen: 64, Inboxes: 10}

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
func (s *core) checkWebhookCounts(tx Tx, w Webhook, l WebhookLimits) error {
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

const webhookCols = `id, url, event_types, inbox_ids, secret, enabled, disabled_reason, coalesce(client_id, ''), key_id, failures, next_at, created_at, updated_at`

func scanWebhook(sc scanner) (Webhook, error) {
	var w Webhook
	var types, inboxes string
	var next, created, updated int64
	if err := sc.Scan(&w.ID, &w.URL, &types, &inboxes, &w.Secret, &w.Enabled, &w.DisabledReason, &w.ClientID, &w.KeyID,
		&w.Failures, &next, &created, &updated); err != nil {
		return Webhook{}, err
	}
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
func (s *core) CreateWebhook(ctx context.Context, w Webhook, l WebhookLimits) (Webhook, bool, error) {
	l = l.WithDefaults()
	if err := l.checkShape(w); err != nil {
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
		res, err := tx.Exec(`INSERT INTO api_webhooks (id, url, event_types, inbox_ids, secret, enabled, disabled_reason, client_id, key_id, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (client_id) DO NOTHING`, w.ID, w.URL, jsonList(w.EventTypes), jsonList(w.InboxIDs), w.Secret, w.Enabled,
			w.DisabledReason, cid, w.KeyID, w.CreatedAt.UTC().UnixNano(), w.UpdatedAt.UTC().UnixNano())
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
func (s *core) WebhookByID(ctx context.Context, id string) (Webhook, error) {
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
func (s *core) Webhooks(ctx context.Context, cursorAt int64, cursorID string, limit int) ([]Webhook, error) {
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
func (s *core) UpdateWebhook(ctx context.Context, w Webhook, l WebhookLimits) error {
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
func (s *core) DeleteWebhook(ctx context.Context, id string) error {
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
func (s *core) ClaimWebhookDeliveries(ctx context.Context, now time.Time, lease time.Duration, limit, perOwner int, busy map[string]int) ([]WebhookDelivery, error) {
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
func (s *core) webhookCandidates(ctx context.Context, at int64) ([]WebhookDelivery, error) {
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
func (s *core) WebhookDeliveryDone(ctx context.Context, webhook string, event int64) error {
	return s.setWebhookDelivery(ctx, webhook, event, `UPDATE api_webhooks SET failures = 0, next_at = 0 WHERE id = ?`, []any{webhook},
		`UPDATE api_webhook_deliveries SET state = 'done', last_error = '' WHERE webhook_id = ? AND event_id = ?`, webhook, event)
}

// WebhookDeliveryRetry keeps a delivery pending, due at next, and backs
// its endpoint off until next (one more consecutive failure): none of
// the webhook's deliveries is claimed before (its circuit is open).
func (s *core) WebhookDeliveryRetry(ctx context.Context, webhook string, event int64, next time.Time, lastErr string) error {
	n := next.UTC().UnixNano()
	return s.setWebhookDelivery(ctx, webhook, event, `UPDATE api_webhooks SET failures = failures + 1, next_at = ? WHERE id = ?`, []any{n, webhook},
		`UPDATE api_webhook_deliveries SET state = 'pending', next_attempt_at = ?, last_error = ? WHERE webhook_id = ? AND event_id = ?`,
		n, lastErr, webhook, event)
}

// WebhookDeliveryDrop gives a delivery up (its error kept) and ends the
// webhook's lease (its failures stay).
func (s *core) WebhookDeliveryDrop(ctx context.Context, webhook string, event int64, lastErr string) error {
	return s.setWebhookDelivery(ctx, webhook, event, `UPDATE api_webhooks SET next_at = 0 WHERE id = ?`, []any{webhook},
		`UPDATE api_webhook_deliveries SET state = 'dropped', last_error = ? WHERE webhook_id = ? AND event_id = ?`, lastErr, webhook, event)
}

func (s *core) setWebhookDelivery(ctx context.Context, webhook string, event int64, wq string, wargs []any, q string, args ...any) error {
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
func (s *core) WebhookDeliveries(ctx context.Context) ([]WebhookDeliveryState, error) {
	s.syncEvents(ctx)
	if err := s.fanOutWebhooks(ctx); err != nil {
		return nil, err
	}
	rows, err := s.r.QueryContext(ctx, `SELECT webhook_id, event_id, state, attempts, next_attempt_at, last_error
		FROM api_webhook_deliveries ORDER BY event_id, webhook_id`)
	if err != nil {
		return nil, fmt.Errorf("store: webhook deliveries: %w", err)
	}
	defer rows.Close()
	out := []WebhookDeliveryState{}
	for rows.Next() {
		var d WebhookDeliveryState
		var next int64
		if err := rows.Scan(&d.WebhookID, &d.EventID, &d.State, &d.Attempts, &next, &d.LastError); err != nil {
			return nil, fmt.Errorf("store: webhook deliveries: %w", err)
		}
		d.NextAttempt = time.Unix(0, next).UTC()
		out = append(out, d)
	}
	return out, rows.Err()
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
func (s *core) ClaimIdempotency(ctx context.Context, keyID, key string, req []byte, now time.Time, stale time.Duration) (claimed bool, status int, resp []byte, err error) {
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
func (s *core) FinishIdempotency(ctx context.Context, keyID, key string, status int, resp []byte) error {
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
	// write, the events created before now-events and the
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
func (s *core) PruneAPILogs(ctx context.Context, now time.Time, events, idempotency time.Duration) (int, error) {
	total := 0
	if events > 0 {
		cut := now.Add(-events).UTC().UnixNano()
		n, err := s.pruneSteps(ctx, func(tx Tx) (sql.Result, error) {
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
		})
		total += n
		if err != nil {
			return total, fmt.Errorf("store: prune events: %w", err)
		}
	}
	if idempotency > 0 {
		cut := now.Add(-idempotency).UTC().UnixNano()
		n, err := s.pruneSteps(ctx, func(tx Tx) (sql.Result, error) {
			return tx.Exec(`DELETE FROM api_idempotency WHERE (key_id, idem_key) IN
				(SELECT key_id, idem_key FROM api_idempotency WHERE created_at < ? LIMIT ?)`, cut, pruneStep)
		})
		total += n
		if err != nil {
			return total, fmt.Errorf("store: prune idempotency keys: %w", err)
		}
	}
	return total, nil
}

// pruneSteps runs step, each time its own write, until it deletes
// nothing (a nil result: nothing to delete); it returns the rows
// deleted.
func (s *core) pruneSteps(ctx context.Context, step func(tx Tx) (sql.Result, error)) (int, error) {
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
