package store

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
// metrics.go): EventLog, EventMetrics, APILogPruner.
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
