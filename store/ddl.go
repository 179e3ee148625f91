package store

import "strings"

// The schema steps both backends take alike are written once, in
// SQLite's spelling, and rendered for each backend (sqliteDDL, pgDDL).
// Where the dialects must differ, the shared text carries a marker, for
// these reasons:
//
//   - INTEGER is SQLite's 64-bit integer: bigint in Postgres.
//     INTEGER{int4} (integer) and INTEGER{int2} (smallint) are counters,
//     flags and codes that fit in fewer bits, as the Postgres schema has
//     always had them.
//   - INTEGER{bool} is a flag: boolean in Postgres, which has the type
//     (SQLite stores 0 and 1); {false} or {true} is its default.
//   - BLOB is bytea; TEXT is text, the same type.
//   - {key} marks a keyset or lookup column that must compare bytewise,
//     as SQLite's default BINARY collation does: COLLATE "C" in Postgres,
//     so that pages come in the same order on both backends.
//   - ") WITHOUT ROWID" makes a SQLite table clustered on its primary
//     key; a Postgres table has no rowid to leave out.
//
// A step whose SQL differs beyond these (triggers, which Postgres writes
// as functions; event ids; JSON functions) is written per backend, the
// shared part first.

var (
	sqliteMarkers = strings.NewReplacer("{key}", "", "{int4}", "", "{int2}", "", "{bool}", "", "{false}", "0", "{true}", "1")
	// Replacer compares in argument order: a marked INTEGER before a bare one.
	pgMarkers = strings.NewReplacer(
		"INTEGER{int4}", "integer", "INTEGER{int2}", "smallint", "INTEGER{bool}", "boolean", "{false}", "false", "{true}", "true",
		"{key}", ` COLLATE "C"`, "INTEGER", "bigint", "BLOB", "bytea", "TEXT", "text", ") WITHOUT ROWID;", ");")
)

// sqliteDDL is shared DDL as SQLite runs it: the markers dropped, so the
// text is byte for byte what the step has always been.
func sqliteDDL(shared string) string { return sqliteMarkers.Replace(shared) }

// pgDDL is shared DDL as Postgres runs it.
func pgDDL(shared string) string { return pgMarkers.Replace(shared) }

// apiIndexDDL is the HTTP API's keys, inboxes and inbox index (step 12).
const apiIndexDDL = `
CREATE TABLE api_keys (
	id         TEXT PRIMARY KEY,                    -- public part of the key
	hash       BLOB NOT NULL,                       -- SHA-256 of the secret part
	inboxes    TEXT NOT NULL,                       -- JSON array; [] = every inbox
	name       TEXT NOT NULL DEFAULT '',
	created_at INTEGER NOT NULL,
	revoked_at INTEGER
);
CREATE TABLE api_inboxes (
	address      TEXT{key} PRIMARY KEY,
	display_name TEXT NOT NULL DEFAULT '',
	client_id    TEXT UNIQUE,
	created_at   INTEGER NOT NULL,
	updated_at   INTEGER NOT NULL,
	deleted      INTEGER{int4} NOT NULL DEFAULT 0
);
CREATE TABLE api_sync (
	id        INTEGER{int4} PRIMARY KEY CHECK (id = 1),
	synced_id INTEGER NOT NULL
);
INSERT INTO api_sync (id, synced_id) VALUES (1, 0);
CREATE TABLE inbox_messages (
	inbox      TEXT{key} NOT NULL,
	message_id INTEGER NOT NULL REFERENCES messages (id),
	thread_id  TEXT{key} NOT NULL,
	labels     TEXT NOT NULL DEFAULT ' ',           -- user labels, ' a b '
	PRIMARY KEY (inbox, message_id)
) WITHOUT ROWID;
CREATE INDEX inbox_messages_thread ON inbox_messages (inbox, thread_id, message_id);
CREATE TABLE inbox_threads (
	inbox     TEXT{key} NOT NULL,
	thread_id TEXT{key} NOT NULL,
	last_id   INTEGER NOT NULL,
	PRIMARY KEY (inbox, thread_id)
) WITHOUT ROWID;
CREATE INDEX inbox_threads_last ON inbox_threads (inbox, last_id);
CREATE INDEX inbox_threads_all ON inbox_threads (last_id, inbox);
`

// webhooksDDL is the HTTP API's webhooks and their delivery log (step
// 13, between the event triggers, which are per backend).
const webhooksDDL = `CREATE TABLE api_webhooks (
	id          TEXT{key} PRIMARY KEY,                   -- wh_<hex>
	url         TEXT NOT NULL,
	event_types TEXT NOT NULL DEFAULT '[]',         -- JSON array; [] = every type
	inbox_ids   TEXT NOT NULL DEFAULT '[]',         -- JSON array; [] = every inbox
	secret      TEXT NOT NULL,                      -- whsec_<base64>: needed to sign, so kept
	enabled     INTEGER{bool} NOT NULL DEFAULT {true},
	client_id   TEXT UNIQUE,
	key_id      TEXT NOT NULL DEFAULT '',           -- API key that made it
	created_at  INTEGER NOT NULL,
	updated_at  INTEGER NOT NULL
);
CREATE TABLE api_webhook_deliveries (
	webhook_id      TEXT{key} NOT NULL REFERENCES api_webhooks (id) ON DELETE CASCADE,
	event_id        INTEGER NOT NULL REFERENCES api_events (id),
	state           TEXT NOT NULL CHECK (state IN ('pending', 'done', 'dropped')),
	attempts        INTEGER{int4} NOT NULL DEFAULT 0,
	next_attempt_at INTEGER NOT NULL,
	last_error      TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (webhook_id, event_id)
) WITHOUT ROWID;
CREATE INDEX api_webhook_due ON api_webhook_deliveries (state, next_attempt_at);
`

// idempotencyDDL is the Idempotency-Key records (step 13, last).
const idempotencyDDL = `CREATE TABLE api_idempotency (
	key_id     TEXT NOT NULL,                       -- the API key's id: keys are per caller
	idem_key   TEXT NOT NULL,                       -- the Idempotency-Key header
	request    BLOB NOT NULL,                       -- SHA-256 of method, path and body
	status     INTEGER{int4} NOT NULL DEFAULT 0,          -- 0 while the first request runs
	response   BLOB,
	created_at INTEGER NOT NULL,
	PRIMARY KEY (key_id, idem_key)
) WITHOUT ROWID;
`

// domainsDDL is managed domains (step 17; its trigger is per backend).
const domainsDDL = `
CREATE TABLE domains (
	name        TEXT{key} PRIMARY KEY,                   -- lower case A-labels, no trailing dot
	config      TEXT NOT NULL,                      -- JSON (package domain)
	status      TEXT NOT NULL CHECK (status IN ('pending', 'verified', 'invalid')),
	checks      TEXT NOT NULL DEFAULT '',           -- JSON of the last check
	client_id   TEXT UNIQUE,
	created_at  INTEGER NOT NULL,
	updated_at  INTEGER NOT NULL,
	checked_at  INTEGER NOT NULL DEFAULT 0,
	verified_at INTEGER NOT NULL DEFAULT 0
);
`

// paymentsDDL is payments and proof collisions (step 18; its triggers are per backend).
const paymentsDDL = `
CREATE TABLE payments (
	message_id    INTEGER PRIMARY KEY,            -- messages.id (no REFERENCES: a foreign key check per ingest)
	mailbox       TEXT NOT NULL,
	sender        TEXT NOT NULL,
	authenticated INTEGER{bool} NOT NULL DEFAULT {false},
	chain         TEXT NOT NULL,
	tx            TEXT NOT NULL,
	token         TEXT NOT NULL DEFAULT '',
	amount        TEXT NOT NULL DEFAULT '',
	state         TEXT NOT NULL CHECK (state IN ('unverified', 'pending', 'verified', 'mismatch', 'failed', 'not_found', 'duplicate')),
	reason        TEXT NOT NULL DEFAULT '',
	paid          TEXT NOT NULL DEFAULT '',
	to_addr       TEXT NOT NULL DEFAULT '',
	from_addr     TEXT NOT NULL DEFAULT '',
	block         INTEGER NOT NULL DEFAULT 0,
	confirmations INTEGER NOT NULL DEFAULT 0,
	warnings      TEXT NOT NULL DEFAULT '[]',
	checked_at    INTEGER NOT NULL DEFAULT 0,     -- 0: never
	attempts      INTEGER{int4} NOT NULL DEFAULT 0,
	next_check_at INTEGER NOT NULL DEFAULT 0,     -- pending: due / end of the claim's lease
	created_at    INTEGER NOT NULL
);
-- Only pending rows are indexed for the claim; listing by state scans
-- (an operator's command), which spares every ingest an index entry.
CREATE INDEX payments_due ON payments (authenticated DESC, next_check_at) WHERE state = 'pending';
CREATE TABLE proof_collisions (
	message_id  INTEGER PRIMARY KEY,
	kept_id     INTEGER NOT NULL,
	fingerprint TEXT NOT NULL,
	found_at    INTEGER NOT NULL
);
`

// draftsDDL is the API's drafts (step 20).
const draftsDDL = `
CREATE TABLE api_drafts (
	id          TEXT{key} PRIMARY KEY,
	inbox       TEXT NOT NULL,
	request     TEXT NOT NULL,
	send_at     INTEGER NOT NULL DEFAULT 0,
	lease_until INTEGER NOT NULL DEFAULT 0,
	status      TEXT NOT NULL DEFAULT '',
	last_error  TEXT NOT NULL DEFAULT '',
	client_id   TEXT UNIQUE,
	created_at  INTEGER NOT NULL,
	updated_at  INTEGER NOT NULL
);
CREATE INDEX api_drafts_inbox ON api_drafts (inbox, created_at, id);
CREATE INDEX api_drafts_due ON api_drafts (status, send_at);
`

// listsDDL is the API's allow and block lists (step 21).
const listsDDL = `
CREATE TABLE api_lists (
	scope      TEXT{key} NOT NULL,
	direction  TEXT{key} NOT NULL,
	list_type  TEXT{key} NOT NULL,
	entry      TEXT{key} NOT NULL,
	reason     TEXT NOT NULL DEFAULT '',
	created_at INTEGER NOT NULL,
	PRIMARY KEY (scope, direction, list_type, entry)
) WITHOUT ROWID;
`

// eventsCreatedDDL is the event log's index by time, for metrics (step 22).
const eventsCreatedDDL = `CREATE INDEX api_events_created ON api_events (created_at, type);`

// rawCodecDDL is how a row's raw bytes are encoded (step 23).
const rawCodecDDL = `
ALTER TABLE message_raw ADD COLUMN codec INTEGER{int2} NOT NULL DEFAULT 0;
`

// apiKeyPermissionsDDL is the API keys' permissions, pod and updated_at
// (step 28).
const apiKeyPermissionsDDL = `
ALTER TABLE api_keys ADD COLUMN permissions TEXT;
ALTER TABLE api_keys ADD COLUMN pod TEXT NOT NULL DEFAULT '';
ALTER TABLE api_keys ADD COLUMN updated_at INTEGER;
`
