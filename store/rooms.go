package store

import (
	"context"
	"encoding/json"
	"time"
)

// The store is one engine — core: the Tx the rules run in, the dialect,
// the single writer and the commit wake-ups — shared by rooms, one per
// concern. Each room is its own type over the engine with a small
// interface of its own (below, or beside the room's code); a backend
// (SQLite, Postgres) embeds every room through rooms, so a consumer
// holds only the interface of the room it uses. docs/development.md maps
// the rooms and says where a new concern goes.
//
// A room's methods use the engine (s.write, s.r, s.d, the shared
// helpers query, where, syncEvents, writeLogged, composeOwed, …): what
// two rooms share lives on core. A room that needs another's answer
// names that room (attachPayments asks paymentRoom{s}.PaymentsFor).

// rulesRoom is the ingest rules and the reads of stored messages
// (ingest.go, check.go, unique.go, thread.go, read.go): Ingester,
// Reader, OOPSLog.
type rulesRoom struct{ *core }

// queueRoom is the outbound queue (queue.go): OutboundQueue.
type queueRoom struct{ *core }

// handoffRoom is the hand-off log of stored messages to the agent
// (delivery.go: the worker's side; handoffs.go: the operator's):
// HandoffLog, HandoffAdmin.
type handoffRoom struct{ *core }

// stateRoom is the protocols' state: IMAP poll positions, keys, hash
// chains (state.go): StateStore.
type stateRoom struct{ *core }

// apiKeyRoom is the HTTP API's keys (apistore.go): APIKeyStore.
type apiKeyRoom struct{ *core }

// indexRoom is the HTTP API's inboxes and their message index
// (apistore.go, apithreads.go): InboxIndex.
type indexRoom struct{ *core }

// eventRoom is the HTTP API's event log and its retention (events.go,
// metrics.go): EventLog, EventMetrics, APILogPruner,
// EventLogger (message.rejected), InboxEventLog (label events).
type eventRoom struct{ *core }

// webhookRoom is the webhooks and their deliveries (events.go):
// WebhookStore.
type webhookRoom struct{ *core }

// idempotencyRoom is the HTTP API's Idempotency-Key records
// (events.go): IdempotencyStore.
type idempotencyRoom struct{ *core }

// relayRoom is relay mode's mailboxes and their folder view
// (mailbox.go): Mailboxes.
type relayRoom struct{ *core }

// paymentRoom is the payments and their checks (payments.go): Payments.
type paymentRoom struct{ *core }

// domainRoom is the managed domains (domains.go): DomainStore.
type domainRoom struct{ *core }

// draftRoom is the HTTP API's drafts (drafts.go): DraftStore.
type draftRoom struct{ *core }

// listRoom is the allow/block lists (lists.go): ListStore.
type listRoom struct{ *core }

// settingRoom is the operator's key-value settings (settings.go):
// Settings.
type settingRoom struct{ *core }

// rooms is every room over one engine; a backend embeds it.
type rooms struct {
	rulesRoom
	queueRoom
	handoffRoom
	stateRoom
	apiKeyRoom
	indexRoom
	eventRoom
	webhookRoom
	idempotencyRoom
	relayRoom
	paymentRoom
	domainRoom
	draftRoom
	listRoom
	settingRoom
}

func newRooms(c *core) rooms {
	return rooms{
		rulesRoom{c}, queueRoom{c}, handoffRoom{c}, stateRoom{c},
		apiKeyRoom{c}, indexRoom{c}, eventRoom{c}, webhookRoom{c}, idempotencyRoom{c},
		relayRoom{c}, paymentRoom{c}, domainRoom{c}, draftRoom{c}, listRoom{c}, settingRoom{c},
	}
}

// Each room implements its own interfaces by itself, not only through a
// backend.
var (
	_ Ingester         = rulesRoom{}
	_ Reader           = rulesRoom{}
	_ OOPSLog          = rulesRoom{}
	_ OutboundQueue    = queueRoom{}
	_ HandoffLog       = handoffRoom{}
	_ HandoffAdmin     = handoffRoom{}
	_ StateStore       = stateRoom{}
	_ APIKeyStore      = apiKeyRoom{}
	_ InboxIndex       = indexRoom{}
	_ EventLog         = eventRoom{}
	_ EventMetrics     = eventRoom{}
	_ EventLogger      = eventRoom{}
	_ InboxEventLog    = eventRoom{}
	_ APILogPruner     = eventRoom{}
	_ WebhookStore     = webhookRoom{}
	_ IdempotencyStore = idempotencyRoom{}
	_ Mailboxes        = relayRoom{}
	_ Payments         = paymentRoom{}
	_ DomainStore      = domainRoom{}
	_ DraftStore       = draftRoom{}
	_ ListStore        = listRoom{}
	_ Settings         = settingRoom{}
)

// OOPSLog is the rules room's owed courtesy OOPS: the rows an ingest
// records as owed, which the owed-OOPS worker claims, composes and
// settles (ingest.go).
type OOPSLog interface {
	OwedOOPSList(ctx context.Context, olderThan time.Time, limit int) ([]OwedOOPS, error)
	ClaimOwedOOPS(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]OwedOOPS, error)
	ReleaseOwedOOPS(ctx context.Context, id int64, next time.Time) error
	ResolveOOPS(ctx context.Context, owed OwedOOPS, msg *Outgoing, body json.RawMessage, reason string) (*OOPSRecord, error)
}

// APIKeyStore is the HTTP API's keys (apistore.go).
type APIKeyStore interface {
	CreateAPIKey(ctx context.Context, k APIKey) error
	APIKeyByID(ctx context.Context, id string) (APIKey, error)
	APIKeys(ctx context.Context) ([]APIKey, error)
	UpdateAPIKey(ctx context.Context, id, name string, permissions []string, at time.Time) error
	RevokeAPIKey(ctx context.Context, id string) error
}

// InboxIndex is the HTTP API's inboxes and the index of their messages
// and threads (apistore.go, apithreads.go).
type InboxIndex interface {
	SyncInboxes(ctx context.Context, max int) (int, error)
	CreateInbox(ctx context.Context, address, displayName, clientID string, mailbox bool) (Inbox, bool, error)
	InboxByAddress(ctx context.Context, address string) (Inbox, error)
	Inboxes(ctx context.Context, after string, limit int, desc bool, only []string) ([]Inbox, error)
	UpdateInbox(ctx context.Context, address, displayName string) error
	DeleteInbox(ctx context.Context, address string) error
	InboxMessages(ctx context.Context, q InboxQuery) ([]InboxMessage, error)
	InboxMessageByRef(ctx context.Context, inbox, ref string) (*InboxMessage, error)
	SetInboxLabels(ctx context.Context, inbox string, id int64, add, remove []string) ([]string, error)
	HideMessages(ctx context.Context, inbox, thread string, ids []int64) error
	InboxThreads(ctx context.Context, q InboxQuery) ([]ThreadRef, error)
	ThreadInboxes(ctx context.Context, thread string) ([]string, error)
	ThreadsMessages(ctx context.Context, refs []ThreadRef) ([]InboxMessage, error)
}

// EventLog is the HTTP API's event log, read by the websocket and the
// webhooks (events.go).
type EventLog interface {
	Events(ctx context.Context, f EventFilter) ([]Event, error)
	LastEventID(ctx context.Context) (int64, error)
	WaitEvents(ctx context.Context, after int64) error
}

// EventMetrics counts the event log's events per period (metrics.go).
type EventMetrics interface {
	EventCounts(ctx context.Context, inboxes, types []string, start, end time.Time, period time.Duration) (map[string][]Bucket, error)
}

// WebhookStore is the webhooks and their deliveries (events.go).
type WebhookStore interface {
	CreateWebhook(ctx context.Context, w Webhook, l WebhookLimits) (Webhook, bool, error)
	WebhookByID(ctx context.Context, id string) (Webhook, error)
	Webhooks(ctx context.Context, cursorAt int64, cursorID string, limit int) ([]Webhook, error)
	UpdateWebhook(ctx context.Context, w Webhook, l WebhookLimits) error
	DeleteWebhook(ctx context.Context, id string) error
	ClaimWebhookDeliveries(ctx context.Context, now time.Time, lease time.Duration, limit, perOwner int, busy map[string]int) ([]WebhookDelivery, error)
	WebhookDeliveryDone(ctx context.Context, webhook string, event int64) error
	WebhookDeliveryRetry(ctx context.Context, webhook string, event int64, next time.Time, lastErr string) error
	WebhookDeliveryDrop(ctx context.Context, webhook string, event int64, lastErr string) error
	WebhookDeliveries(ctx context.Context) ([]WebhookDeliveryState, error)
	SetWebhookHeaders(ctx context.Context, id string, set map[string]string, remove []string, l WebhookLimits, at time.Time) (Webhook, error)
}

// IdempotencyStore is the HTTP API's Idempotency-Key records
// (events.go).
type IdempotencyStore interface {
	ClaimIdempotency(ctx context.Context, keyID, key string, req []byte, now time.Time, stale time.Duration) (claimed bool, status int, resp []byte, err error)
	FinishIdempotency(ctx context.Context, keyID, key string, status int, resp []byte) error
}
