package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// ErrSchemaTooNew is returned when the database was written by a newer
// envelopd (its PRAGMA user_version is above the last migration known here).
var ErrSchemaTooNew = errors.New("store: database schema is newer than this program")

// migrations are the schema steps, in order; migration i (0-based) takes
// the database from user_version i to i+1. A released step is never
// edited: a change is a new step appended at the end. Steps Postgres
// takes alike are written once in ddl.go (sqliteDDL renders them as they
// were always written).
var migrations = []string{
	// 1: messages, raw bytes, and the uniqueness tables behind dedup.
	`
CREATE TABLE messages (
	id           INTEGER PRIMARY KEY AUTOINCREMENT, -- never reused: it is the watch cursor
	mailbox      TEXT NOT NULL,
	direction    TEXT NOT NULL CHECK (direction IN ('in', 'out')),
	message_id   TEXT NOT NULL,
	content_hash BLOB NOT NULL,                     -- SHA-256 of the raw bytes
	sender       TEXT NOT NULL,
	recipients   TEXT NOT NULL,                     -- JSON array
	subject      TEXT NOT NULL,
	type         TEXT NOT NULL,
	envelopay_id TEXT NOT NULL,
	status       TEXT NOT NULL CHECK (status IN ('accepted', 'quarantined', 'duplicate')),
	thread_id    TEXT NOT NULL,
	received_at  INTEGER NOT NULL,                  -- Unix nanoseconds, UTC
	errors       TEXT NOT NULL,                     -- JSON array of problems
	warnings     TEXT NOT NULL,
	result       BLOB,
	dkim         BLOB,
	auth_results TEXT NOT NULL,
	size         INTEGER NOT NULL,
	want_amount  TEXT,                              -- OFFER want
	want_token   TEXT,
	want_chain   TEXT
);
-- Exact redelivery: the same bytes under the same Message-ID (or, without
-- a Message-ID, the same bytes) in the same mailbox are one message.
-- Also the index for Message-ID lookups (threading, Thread).
CREATE UNIQUE INDEX messages_copy ON messages (message_id, mailbox, direction, content_hash);
CREATE INDEX messages_eid ON messages (envelopay_id);
CREATE INDEX messages_thread ON messages (thread_id, id);
CREATE TABLE message_raw (
	message_id INTEGER PRIMARY KEY REFERENCES messages (id) ON DELETE CASCADE,
	raw        BLOB NOT NULL
);
-- Envelopay v0.2.0 "Verification": replay protection by sender + id and by
-- proof. Only accepted messages hold a row here.
CREATE TABLE envelopay_ids (
	direction    TEXT NOT NULL,
	mailbox      TEXT NOT NULL,
	sender       TEXT NOT NULL,
	envelopay_id TEXT NOT NULL,
	message_id   INTEGER NOT NULL REFERENCES messages (id),
	PRIMARY KEY (direction, mailbox, sender, envelopay_id)
) WITHOUT ROWID;
CREATE TABLE proofs (
	direction   TEXT NOT NULL,
	mailbox     TEXT NOT NULL,
	fingerprint TEXT NOT NULL,
	message_id  INTEGER NOT NULL REFERENCES messages (id),
	PRIMARY KEY (direction, mailbox, fingerprint)
) WITHOUT ROWID;
-- Tunnelled-protocol claims (VCP idempotency, AICP nonces and ids).
CREATE TABLE claims (
	kind       TEXT NOT NULL,
	key        TEXT NOT NULL,
	value      TEXT NOT NULL,
	message_id INTEGER NOT NULL REFERENCES messages (id),
	created_at INTEGER NOT NULL,
	expires_at INTEGER NOT NULL,                    -- 0: never
	PRIMARY KEY (kind, key)
) WITHOUT ROWID;
-- Hash chains (Vacant P6 replay_protect): one row per accepted link; the
-- primary key makes two links with the same seq impossible.
CREATE TABLE chain_links (
	chain      TEXT NOT NULL,
	seq        INTEGER NOT NULL,
	prev       TEXT NOT NULL,
	hash       TEXT NOT NULL,
	message_id INTEGER NOT NULL REFERENCES messages (id),
	PRIMARY KEY (chain, seq)
) WITHOUT ROWID;
`,
	// 2: the outbound queue and the hand-off (delivery) log.
	`
CREATE TABLE queue (
	id         INTEGER PRIMARY KEY AUTOINCREMENT,
	kind       TEXT NOT NULL,
	sender     TEXT NOT NULL,
	message_id TEXT NOT NULL,
	raw        BLOB NOT NULL,
	copy_id    INTEGER REFERENCES messages (id),
	created_at INTEGER NOT NULL,
	expires_at INTEGER NOT NULL
);
CREATE UNIQUE INDEX queue_mid ON queue (message_id) WHERE message_id != '';
CREATE TABLE queue_rcpts (
	queue_id        INTEGER NOT NULL REFERENCES queue (id) ON DELETE CASCADE,
	rcpt            TEXT NOT NULL,
	state           TEXT NOT NULL CHECK (state IN ('pending', 'sent', 'failed', 'dropped')),
	attempts        INTEGER NOT NULL DEFAULT 0,
	next_attempt_at INTEGER NOT NULL,
	last_error      TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (queue_id, rcpt)
) WITHOUT ROWID;
CREATE INDEX queue_rcpts_due ON queue_rcpts (state, next_attempt_at);
CREATE TABLE deliveries (
	id              INTEGER PRIMARY KEY AUTOINCREMENT,
	message_id      INTEGER NOT NULL REFERENCES messages (id),
	target          TEXT NOT NULL,
	state           TEXT NOT NULL CHECK (state IN ('pending', 'done')),
	attempts        INTEGER NOT NULL DEFAULT 0,
	next_attempt_at INTEGER NOT NULL,
	last_error      TEXT NOT NULL DEFAULT '',
	UNIQUE (message_id, target)
);
CREATE INDEX deliveries_due ON deliveries (target, state, next_attempt_at);
`,
	// 3: IMAP poll positions and tunnelled-protocol keys.
	`
CREATE TABLE imap_state (
	key          TEXT PRIMARY KEY,
	uid_validity INTEGER NOT NULL,
	last_uid     INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE protocol_keys (
	protocol TEXT NOT NULL,
	handle   TEXT NOT NULL,
	key      TEXT NOT NULL,
	PRIMARY KEY (protocol, handle)
) WITHOUT ROWID;
`,
	// 4: protocol state per key (AICP consent of an ordered pair).
	`
CREATE TABLE states (
	kind       TEXT NOT NULL,
	key        TEXT NOT NULL,
	value      TEXT NOT NULL,
	message_id INTEGER NOT NULL,
	PRIMARY KEY (kind, key)
) WITHOUT ROWID;
`,
	// 5: relay mailboxes and their folder view (references to stored
	// messages with per-folder UIDs and flags, never copies).
	`
CREATE TABLE mailboxes (
	address       TEXT PRIMARY KEY,
	password      TEXT NOT NULL DEFAULT '',       -- hash; '' = cannot log in
	created_at    INTEGER NOT NULL,
	next_validity INTEGER NOT NULL,               -- UIDVALIDITY of the next folder
	synced_id     INTEGER NOT NULL DEFAULT 0      -- messages.id filed up to
) WITHOUT ROWID;
CREATE TABLE folders (
	mailbox      TEXT NOT NULL REFERENCES mailboxes (address),
	name         TEXT NOT NULL,
	uid_validity INTEGER NOT NULL,
	uid_next     INTEGER NOT NULL,
	PRIMARY KEY (mailbox, name)
) WITHOUT ROWID;
CREATE TABLE folder_messages (
	mailbox    TEXT NOT NULL,
	folder     TEXT NOT NULL,
	uid        INTEGER NOT NULL,
	message_id INTEGER NOT NULL REFERENCES messages (id),
	flags      TEXT NOT NULL DEFAULT '',          -- space-separated
	PRIMARY KEY (mailbox, folder, uid),
	FOREIGN KEY (mailbox, folder) REFERENCES folders (mailbox, name) ON DELETE CASCADE ON UPDATE CASCADE
) WITHOUT ROWID;
CREATE INDEX messages_mailbox ON messages (mailbox, id);
`,
	// 6: tunnelled-protocol state (claims, chain links, states) is kept
	// per scope — direction and mailbox, like envelopay_ids and proofs —
	// so that in relay mode the sender's Sent copy and each recipient's
	// copy of one message keep their own state instead of the first copy
	// making the others replays. Rows from before are inbound rows of the
	// default mailbox (scope "in\n").
	`
CREATE TABLE claims_v6 (
	scope      TEXT NOT NULL,                       -- direction "\n" mailbox
	kind       TEXT NOT NULL,
	key        TEXT NOT NULL,
	value      TEXT NOT NULL,
	message_id INTEGER NOT NULL REFERENCES messages (id),
	created_at INTEGER NOT NULL,
	expires_at INTEGER NOT NULL,                    -- 0: never
	PRIMARY KEY (scope, kind, key)
) WITHOUT ROWID;
INSERT INTO claims_v6 SELECT 'in' || char(10), kind, key, value, message_id, created_at, expires_at FROM claims;
DROP TABLE claims;
ALTER TABLE claims_v6 RENAME TO claims;
CREATE TABLE chain_links_v6 (
	scope      TEXT NOT NULL,
	chain      TEXT NOT NULL,
	seq        INTEGER NOT NULL,
	prev       TEXT NOT NULL,
	hash       TEXT NOT NULL,
	message_id INTEGER NOT NULL REFERENCES messages (id),
	PRIMARY KEY (scope, chain, seq)
) WITHOUT ROWID;
INSERT INTO chain_links_v6 SELECT 'in' || char(10), chain, seq, prev, hash, message_id FROM chain_links;
DROP TABLE chain_links;
ALTER TABLE chain_links_v6 RENAME TO chain_links;
CREATE INDEX chain_links_tip ON chain_links (chain, seq);
CREATE TABLE states_v6 (
	scope      TEXT NOT NULL,
	kind       TEXT NOT NULL,
	key        TEXT NOT NULL,
	value      TEXT NOT NULL,
	message_id INTEGER NOT NULL,
	PRIMARY KEY (scope, kind, key)
) WITHOUT ROWID;
INSERT INTO states_v6 SELECT 'in' || char(10), kind, key, value, message_id FROM states;
DROP TABLE states;
ALTER TABLE states_v6 RENAME TO states;
`,
	// 7: the canonical body hash of the message holding an Envelopay id,
	// so that a resend of identical content under a new Message-ID (a
	// naive retry after a lost 250) is told from a reused id.
	`
ALTER TABLE envelopay_ids ADD COLUMN body_hash TEXT NOT NULL DEFAULT '';
`,
	// 8: settings the running processes record for the others to read,
	// e.g. how the outbound queue is delivered (SettingOutbound).
	`
CREATE TABLE settings (
	key        TEXT PRIMARY KEY,
	value      TEXT NOT NULL,
	updated_at INTEGER NOT NULL -- Unix nanoseconds, UTC
) WITHOUT ROWID;
`,
	// 9: relay mailboxes get a Quarantine folder, and received mail that
	// is not accepted (quarantined, duplicates) moves there from INBOX
	// under new UIDs, so that INBOX holds only mail an agent may act on.
	`
INSERT INTO folders (mailbox, name, uid_validity, uid_next)
	SELECT address, 'Quarantine', next_validity, 1 FROM mailboxes WHERE true
	ON CONFLICT (mailbox, name) DO NOTHING;
UPDATE mailboxes SET next_validity = next_validity + 1;
INSERT INTO folder_messages (mailbox, folder, uid, message_id, flags)
	SELECT x.mailbox, 'Quarantine', q.uid_next - 1 + row_number() OVER (PARTITION BY x.mailbox ORDER BY x.uid),
		x.message_id, x.flags
	FROM folder_messages x
	JOIN messages m ON m.id = x.message_id
	JOIN folders q ON q.mailbox = x.mailbox AND q.name = 'Quarantine'
	WHERE x.folder = 'INBOX' AND m.status != 'accepted';
UPDATE folders SET uid_next = max(uid_next, 1 + coalesce((SELECT max(x.uid) FROM folder_messages x
	WHERE x.mailbox = folders.mailbox AND x.folder = folders.name), 0))
	WHERE name = 'Quarantine';
DELETE FROM folder_messages WHERE folder = 'INBOX'
	AND message_id IN (SELECT id FROM messages WHERE status != 'accepted');
`,
	// 10: a hand-off can be dropped by the operator (`envelopd handoff
	// drop`): the deliveries state gains 'dropped'. Ids are kept
	// (they are the event ids agents deduplicate on).
	`
CREATE TABLE deliveries_v7 (
	id              INTEGER PRIMARY KEY AUTOINCREMENT,
	message_id      INTEGER NOT NULL REFERENCES messages (id),
	target          TEXT NOT NULL,
	state           TEXT NOT NULL CHECK (state IN ('pending', 'done', 'dropped')),
	attempts        INTEGER NOT NULL DEFAULT 0,
	next_attempt_at INTEGER NOT NULL,
	last_error      TEXT NOT NULL DEFAULT '',
	UNIQUE (message_id, target)
);
INSERT INTO deliveries_v7 SELECT id, message_id, target, state, attempts, next_attempt_at, last_error FROM deliveries;
DROP TABLE deliveries;
ALTER TABLE deliveries_v7 RENAME TO deliveries;
CREATE INDEX deliveries_due ON deliveries (target, state, next_attempt_at);
`,
	// 11: courtesy OOPS decisions: what was decided for each
	// stored message (messages.oops, JSON OOPSRecord) and every OOPS
	// queued, for the rate limits (per recipient per hour, per thread
	// and code), so that a restart does not reset them.
	`
ALTER TABLE messages ADD COLUMN oops BLOB;
CREATE TABLE oops_sent (
	id         INTEGER PRIMARY KEY,
	recipient  TEXT NOT NULL,
	thread_id  TEXT NOT NULL,
	code       TEXT NOT NULL,
	sent_at    INTEGER NOT NULL,                    -- Unix nanoseconds of the answered message's receipt
	message_id INTEGER NOT NULL,                    -- messages.id answered
	queue_id   INTEGER NOT NULL
);
CREATE INDEX oops_sent_rcpt ON oops_sent (recipient, sent_at);
CREATE INDEX oops_sent_thread ON oops_sent (thread_id, code);
`,
	// 12: the HTTP API (api.go in this package: apistore.go):
	// API keys (a public id and the SHA-256 of a 256-bit random
	// secret), inboxes, and the inbox index — which stored messages each
	// inbox shows, with their user labels, and its threads by last message,
	// for keyset paging. The index references stored messages; removing a
	// row never deletes a message or the uniqueness facts it holds.
	sqliteDDL(apiIndexDDL),
	// 13: the HTTP API's events (events.go in this package): an
	// append-only event log written by triggers in the transaction that
	// stores a message (message.received / message.sent, one per inbox
	// that shows it) or ends a queued recipient (message.delivered /
	// message.bounced), so no writer can forget one; webhooks, their
	// hand-off log (one row per event and webhook, fanned out by trigger,
	// retried with backoff like deliveries), and Idempotency-Key records.
	`
CREATE TABLE api_events (
	id         INTEGER PRIMARY KEY AUTOINCREMENT,   -- event_id evt_<id>; commits in id order
	type       TEXT NOT NULL,
	inbox      TEXT NOT NULL,
	message_id INTEGER NOT NULL,                    -- messages.id
	recipients TEXT NOT NULL DEFAULT '[]',          -- delivered/bounced: JSON array
	detail     TEXT NOT NULL DEFAULT '',            -- bounced: the last error
	created_at INTEGER NOT NULL
);
CREATE INDEX api_events_inbox ON api_events (inbox, id);
CREATE TRIGGER api_events_message AFTER INSERT ON messages BEGIN
	INSERT INTO api_events (type, inbox, message_id, created_at)
	SELECT CASE new.direction WHEN 'out' THEN 'message.sent' ELSE 'message.received' END, b, new.id, new.received_at
	FROM (SELECT new.mailbox AS b WHERE new.mailbox != ''
		UNION SELECT lower(new.sender) WHERE new.mailbox = '' AND new.direction = 'out' AND new.sender != ''
		UNION SELECT lower(value) FROM json_each(CASE WHEN json_valid(new.recipients) THEN new.recipients ELSE '[]' END)
			WHERE new.mailbox = '' AND new.direction != 'out' AND value != '')
	ORDER BY b;
END;
CREATE TRIGGER api_events_rcpt AFTER UPDATE OF state ON queue_rcpts
	WHEN new.state IN ('sent', 'failed') AND old.state != new.state BEGIN
	INSERT INTO api_events (type, inbox, message_id, recipients, detail, created_at)
	SELECT CASE new.state WHEN 'sent' THEN 'message.delivered' ELSE 'message.bounced' END,
		CASE WHEN m.mailbox != '' THEN m.mailbox ELSE lower(m.sender) END, m.id, json_array(new.rcpt),
		CASE new.state WHEN 'failed' THEN new.last_error ELSE '' END, CAST(unixepoch('subsec') * 1000000000 AS INTEGER)
	FROM queue q JOIN messages m ON m.id = q.copy_id WHERE q.id = new.queue_id;
END;
` + sqliteDDL(webhooksDDL) + `CREATE TRIGGER api_events_fanout AFTER INSERT ON api_events BEGIN
	INSERT INTO api_webhook_deliveries (webhook_id, event_id, state, next_attempt_at)
	SELECT w.id, new.id, 'pending', new.created_at FROM api_webhooks w
	WHERE w.enabled
		AND (w.event_types = '[]' OR EXISTS (SELECT 1 FROM json_each(w.event_types) WHERE value = new.type))
		AND (w.inbox_ids = '[]' OR EXISTS (SELECT 1 FROM json_each(w.inbox_ids) WHERE value = new.inbox));
END;
` + sqliteDDL(idempotencyDDL),
	// 14: the web inbox's search and filters. Full-text search
	// over subject and note: an FTS5 index keyed by the message row id,
	// contentless (the text stays in messages), filled by a trigger at
	// insert — a message's subject and result never change — and from the
	// messages already stored. The note is the parse result's "note"; a
	// result that is not JSON indexes the subject only.
	`
CREATE VIRTUAL TABLE message_fts USING fts5 (subject, note, content = '', tokenize = 'unicode61 remove_diacritics 2');
CREATE TRIGGER message_fts_insert AFTER INSERT ON messages BEGIN
	INSERT INTO message_fts (rowid, subject, note) VALUES (new.id, new.subject,
		CASE WHEN new.result IS NOT NULL AND json_valid(CAST(new.result AS TEXT))
			THEN json_extract(CAST(new.result AS TEXT), '$.note') END);
END;
INSERT INTO message_fts (rowid, subject, note)
	SELECT id, subject, CASE WHEN result IS NOT NULL AND json_valid(CAST(result AS TEXT))
		THEN json_extract(CAST(result AS TEXT), '$.note') END FROM messages;
-- The web inbox's filters (status, type, sender, error code) as tags, so
-- that a rare value is found from its few messages instead of by walking
-- the inbox (store.InboxQuery): 'status:duplicate', 'type:pay',
-- 'sender:a@b.example', 'code:duplicate_proof' (errors and warnings).
-- Kept by triggers: Ingest sets status, errors and warnings at insert and
-- may update them in the same transaction.
CREATE TABLE message_tags (
	tag        TEXT NOT NULL,
	message_id INTEGER NOT NULL,
	PRIMARY KEY (tag, message_id)
) WITHOUT ROWID;
CREATE TRIGGER message_tags_insert AFTER INSERT ON messages BEGIN
	INSERT OR IGNORE INTO message_tags (tag, message_id)
	SELECT t, new.id FROM (
		SELECT 'status:' || new.status AS t
		UNION SELECT 'type:' || new.type WHERE new.type != ''
		UNION SELECT 'sender:' || new.sender WHERE new.sender != ''
		UNION SELECT 'code:' || json_extract(value, '$.code') FROM json_each(CASE WHEN json_valid(new.errors) THEN new.errors ELSE '[]' END)
		UNION SELECT 'code:' || json_extract(value, '$.code') FROM json_each(CASE WHEN json_valid(new.warnings) THEN new.warnings ELSE '[]' END)
	) WHERE t IS NOT NULL;
END;
CREATE TRIGGER message_tags_update AFTER UPDATE OF status, errors, warnings ON messages BEGIN
	DELETE FROM message_tags WHERE message_id = old.id AND tag IN (
		SELECT 'status:' || old.status
		UNION SELECT 'code:' || json_extract(value, '$.code') FROM json_each(CASE WHEN json_valid(old.errors) THEN old.errors ELSE '[]' END)
		UNION SELECT 'code:' || json_extract(value, '$.code') FROM json_each(CASE WHEN json_valid(old.warnings) THEN old.warnings ELSE '[]' END));
	INSERT OR IGNORE INTO message_tags (tag, message_id)
	SELECT t, new.id FROM (
		SELECT 'status:' || new.status AS t
		UNION SELECT 'code:' || json_extract(value, '$.code') FROM json_each(CASE WHEN json_valid(new.errors) THEN new.errors ELSE '[]' END)
		UNION SELECT 'code:' || json_extract(value, '$.code') FROM json_each(CASE WHEN json_valid(new.warnings) THEN new.warnings ELSE '[]' END)
	) WHERE t IS NOT NULL;
END;
INSERT OR IGNORE INTO message_tags (tag, message_id) SELECT 'status:' || status, id FROM messages;
INSERT OR IGNORE INTO message_tags (tag, message_id) SELECT 'type:' || type, id FROM messages WHERE type != '';
INSERT OR IGNORE INTO message_tags (tag, message_id) SELECT 'sender:' || sender, id FROM messages WHERE sender != '';
INSERT OR IGNORE INTO message_tags (tag, message_id)
	SELECT 'code:' || json_extract(j.value, '$.code'), m.id FROM messages m,
		json_each(CASE WHEN json_valid(m.errors) THEN m.errors ELSE '[]' END) j WHERE json_extract(j.value, '$.code') IS NOT NULL;
INSERT OR IGNORE INTO message_tags (tag, message_id)
	SELECT 'code:' || json_extract(j.value, '$.code'), m.id FROM messages m,
		json_each(CASE WHEN json_valid(m.warnings) THEN m.warnings ELSE '[]' END) j WHERE json_extract(j.value, '$.code') IS NOT NULL;
`,
	// 15: the web inbox's search and filter index leaves the ingest
	// transaction: an FTS5
	// insert in every message's savepoint, and the tags' JSON walk, cost
	// ingest much CPU per message (docs/performance.md). SyncInboxes (the API's index,
	// which every list reads behind) fills both for new messages
	// (dialect indexSearch); messages stored before this step were
	// indexed by the triggers, so search_floor keeps SyncInboxes from
	// indexing them twice. The update trigger stays: Ingest may change a
	// message's status and codes after its insert.
	`
DROP TRIGGER message_fts_insert;
DROP TRIGGER message_tags_insert;
CREATE TABLE search_floor (id INTEGER NOT NULL);
INSERT INTO search_floor (id) SELECT coalesce(max(id), 0) FROM messages;
`,
	// 16: the message.received events leave the ingest transaction too:
	// the trigger's insert into
	// api_events and its index cost every received message a share of its
	// store CPU and two more B-trees in every commit. event_sync holds
	// the highest message id whose received events are written; moving
	// it forward writes those events (trigger event_sync_received), in
	// message id order, in the writer: event ids still commit in order,
	// so a reader's cursor never skips one. Who moves it: every event
	// read first (core.syncEvents), and — so that the log keeps the
	// order of the facts — the triggers of the other events, before they
	// write theirs: a message.sent or a delivered/bounced event never
	// precedes the received event of a message committed before it.
	`
CREATE TABLE event_sync (id INTEGER NOT NULL);
INSERT INTO event_sync (id) SELECT coalesce(max(id), 0) FROM messages;
CREATE TRIGGER event_sync_received AFTER UPDATE OF id ON event_sync WHEN new.id > old.id BEGIN
	INSERT INTO api_events (type, inbox, message_id, created_at)
	SELECT 'message.received', b, id, received_at FROM (
		SELECT id, received_at, mailbox AS b FROM messages
			WHERE direction != 'out' AND mailbox != '' AND id > old.id AND id <= new.id
		UNION SELECT m.id, m.received_at, lower(j.value) FROM messages m,
			json_each(CASE WHEN json_valid(m.recipients) THEN m.recipients ELSE '[]' END) j
			WHERE m.direction != 'out' AND m.mailbox = '' AND j.value != '' AND m.id > old.id AND m.id <= new.id)
	ORDER BY id, b;
END;
DROP TRIGGER api_events_message;
CREATE TRIGGER api_events_message AFTER INSERT ON messages WHEN new.direction = 'out' BEGIN
	UPDATE event_sync SET id = new.id - 1 WHERE id < new.id - 1;
	INSERT INTO api_events (type, inbox, message_id, created_at)
	SELECT 'message.sent', b, new.id, new.received_at
	FROM (SELECT new.mailbox AS b WHERE new.mailbox != ''
		UNION SELECT lower(new.sender) WHERE new.mailbox = '' AND new.sender != '')
	ORDER BY b;
END;
CREATE TRIGGER api_events_rcpt_before BEFORE UPDATE OF state ON queue_rcpts
	WHEN new.state IN ('sent', 'failed') AND old.state != new.state BEGIN
	UPDATE event_sync SET id = (SELECT max(id) FROM messages) WHERE id < (SELECT max(id) FROM messages);
END;
`,
	// 17: managed domains (domains.go): each domain's settings and last
	// check; the update that first makes a domain verified writes its
	// domain.verified event (inbox '', message_id 0, detail the domain),
	// after bringing event_sync forward as the other event triggers do.
	sqliteDDL(domainsDDL) + `CREATE TRIGGER domains_verified AFTER UPDATE OF status ON domains
	WHEN new.status = 'verified' AND old.status != 'verified' BEGIN
	UPDATE event_sync SET id = (SELECT max(id) FROM messages) WHERE id < (SELECT max(id) FROM messages);
	INSERT INTO api_events (type, inbox, message_id, detail, created_at)
	VALUES ('domain.verified', '', 0, new.name, new.updated_at);
END;
`,
	// 18: payments (payments.go): one row per received message with a
	// payment proof, checked on the chain after commit by a claimed,
	// leased worker (payments_due), and the events payment.verified /
	// payment.rejected, written by a trigger when one settles (after
	// moving event_sync forward, as migration 16's other events do).
	// The Go step (migrate_proofs.go) identifies stored proofs by the
	// transaction they name; old rows that now collide are kept and
	// listed in proof_collisions.
	sqliteDDL(paymentsDDL) + `CREATE TRIGGER payments_event_before BEFORE UPDATE OF state ON payments
	WHEN new.state IN ('verified', 'mismatch', 'failed', 'not_found') AND old.state != new.state BEGIN
	UPDATE event_sync SET id = (SELECT max(id) FROM messages) WHERE id < (SELECT max(id) FROM messages);
END;
CREATE TRIGGER payments_event AFTER UPDATE OF state ON payments
	WHEN new.state IN ('verified', 'mismatch', 'failed', 'not_found') AND old.state != new.state BEGIN
	INSERT INTO api_events (type, inbox, message_id, detail, created_at)
	SELECT CASE new.state WHEN 'verified' THEN 'payment.verified' ELSE 'payment.rejected' END, b, new.message_id,
		CASE new.state WHEN 'verified' THEN '' ELSE new.state || ': ' || new.reason END, new.checked_at
	FROM (SELECT m.mailbox AS b FROM messages m WHERE m.id = new.message_id AND m.mailbox != ''
		UNION SELECT lower(j.value) FROM messages m,
			json_each(CASE WHEN json_valid(m.recipients) THEN m.recipients ELSE '[]' END) j
			WHERE m.id = new.message_id AND m.mailbox = '' AND j.value != '')
	ORDER BY b;
END;
`,
	// 19: webhooks cost the writer of mail nothing and one tenant's
	// webhooks cannot slow another's. The fan-out leaves the event's
	// transaction (the api_events_fanout trigger walked every webhook's
	// JSON lists in every send's transaction): the webhook sender makes
	// the deliveries of the events after api_webhook_fanout's id, in
	// short writes of its own, matching each event through
	// api_webhook_subs, an index of (event type, inbox) pairs ('' for
	// every type / every inbox), filled here from the webhooks' lists.
	// A webhook's endpoint is backed off as a whole after a failure
	// (failures, next_at: its circuit; next_at is also the lease of the
	// one delivery in flight to it); disabled_reason says why a webhook
	// is disabled, and the webhooks of keys already revoked are.
	`
DROP TRIGGER api_events_fanout;
ALTER TABLE api_webhooks ADD COLUMN failures INTEGER NOT NULL DEFAULT 0;
ALTER TABLE api_webhooks ADD COLUMN next_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE api_webhooks ADD COLUMN disabled_reason TEXT NOT NULL DEFAULT '';
CREATE TABLE api_webhook_subs (
	event_type TEXT NOT NULL,
	inbox      TEXT NOT NULL,
	webhook_id TEXT NOT NULL REFERENCES api_webhooks (id) ON DELETE CASCADE,
	PRIMARY KEY (event_type, inbox, webhook_id)
) WITHOUT ROWID;
CREATE INDEX api_webhook_subs_webhook ON api_webhook_subs (webhook_id);
CREATE INDEX api_webhook_deliveries_webhook ON api_webhook_deliveries (webhook_id, state, event_id);
INSERT OR IGNORE INTO api_webhook_subs (event_type, inbox, webhook_id)
	SELECT coalesce(t.value, ''), coalesce(b.value, ''), w.id FROM api_webhooks w
	LEFT JOIN json_each(CASE WHEN json_valid(w.event_types) THEN w.event_types ELSE '[]' END) t
	LEFT JOIN json_each(CASE WHEN json_valid(w.inbox_ids) THEN w.inbox_ids ELSE '[]' END) b
	WHERE true;
CREATE TABLE api_webhook_fanout (id INTEGER NOT NULL);
INSERT INTO api_webhook_fanout (id) SELECT coalesce(max(id), 0) FROM api_events;
UPDATE api_webhooks SET enabled = 0, disabled_reason = 'key_revoked'
	WHERE enabled AND key_id IN (SELECT id FROM api_keys WHERE revoked_at IS NOT NULL);
`,
	// 20: the API's drafts (store.Draft): a JSON document per draft; a
	// scheduled one (status 'scheduled', send_at) is leased to one node
	// at a time (lease_until) by ClaimDueDrafts.
	sqliteDDL(draftsDDL),
	// 21: the API's allow and block lists (store.ListEntry); scope is an
	// inbox address or '' for the organisation.
	sqliteDDL(listsDDL),
	// 22: metrics count the event log by time (EventCounts).
	sqliteDDL(eventsCreatedDDL),
	// 23: raw bytes stored compressed (rawcodec.go): codec says how a
	// row's raw is encoded. Rows from before are left as they are
	// (codec 0, the bytes as received) and read as before.
	sqliteDDL(rawCodecDDL),
	// 24: the search index's vocabulary (fts5vocab, read only: no data of
	// its own). A prefix term ("order"*) makes FTS5 merge the doclists of
	// every term with that prefix before it yields a row, a cost that
	// grows with the number of matches; the search expands a prefix to
	// the index's own terms (searchTerms) and walks their doclists lazily
	// instead.
	`CREATE VIRTUAL TABLE message_fts_terms USING fts5vocab (message_fts, 'instance');`,
	// 25: the stored parse result is compressed (rawcodec.go,
	// encodeResult), so SQL can no longer read its note: the note the
	// search index holds gets a column of its own, NULL when the result
	// has none. Rows from before keep their JSON result and a NULL note;
	// the index reads either (sqliteDialect.indexSearch).
	`ALTER TABLE messages ADD COLUMN note TEXT;`,
	// 26: the courtesy OOPS is data: an owed OOPS (oops_sent with
	// queue_id 0) carries its sender, and the owed-OOPS worker leases it
	// (next_at, attempts: ClaimOwedOOPS) until ResolveOOPS queues it.
	`
ALTER TABLE oops_sent ADD COLUMN sender TEXT NOT NULL DEFAULT '';
ALTER TABLE oops_sent ADD COLUMN next_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE oops_sent ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
CREATE INDEX oops_sent_owed ON oops_sent (next_at, id) WHERE queue_id = 0;
`,
	// 27: an event other than message.received no longer waits for the
	// received events owed before it. Until now its trigger first
	// brought event_sync up to the newest message, so a send after a
	// long time without event reads wrote the whole backlog before its
	// own event (in steps, but the send waited for all of them). Now
	// such an event is written at once only when the log is caught up
	// to its place (event_sync ≥ pos: every received event it must
	// follow is written); otherwise it is staged in api_events_staged
	// with its place, and the catch-up that moves event_sync past pos
	// numbers it after the received events of the messages up to pos
	// and before those of later messages: the log keeps the order of
	// the facts and ids still commit in order. pos is the newest message
	// id when the event happens (a message.sent: the message before the
	// sent one, which has no received event of its own).
	// Also received_as (store.receivedAs): how a received message's
	// events are typed, decided as it is stored — " u " for a sender
	// verdict that authenticates no domain (message.received.
	// unauthenticated), " b:<inbox> " for each inbox whose lists refuse
	// the sender (message.received.blocked, and the label blocked the
	// inbox index gives it). "" for most mail: message.received. The
	// catch-up types the received events it writes from it.
	// And the inbox events (the SDK's inboxes.events: label.added,
	// label.removed), one row per label an API call added to or removed
	// from a message of an inbox (SetInboxLabels), listed by id.
	`
CREATE TABLE api_events_staged (
	seq        INTEGER PRIMARY KEY,
	pos        INTEGER NOT NULL,
	type       TEXT NOT NULL,
	inbox      TEXT NOT NULL,
	message_id INTEGER NOT NULL,
	recipients TEXT NOT NULL DEFAULT '[]',
	detail     TEXT NOT NULL DEFAULT '',
	created_at INTEGER NOT NULL
);
DROP TRIGGER api_events_message;
CREATE TRIGGER api_events_message AFTER INSERT ON messages WHEN new.direction = 'out' BEGIN
	INSERT INTO api_events (type, inbox, message_id, created_at)
	SELECT 'message.sent', b, new.id, new.received_at
	FROM (SELECT new.mailbox AS b WHERE new.mailbox != ''
		UNION SELECT lower(new.sender) WHERE new.mailbox = '' AND new.sender != '')
	WHERE (SELECT id FROM event_sync) >= new.id - 1
	ORDER BY b;
	INSERT INTO api_events_staged (pos, type, inbox, message_id, created_at)
	SELECT new.id - 1, 'message.sent', b, new.id, new.received_at
	FROM (SELECT new.mailbox AS b WHERE new.mailbox != ''
		UNION SELECT lower(new.sender) WHERE new.mailbox = '' AND new.sender != '')
	WHERE (SELECT id FROM event_sync) < new.id - 1
	ORDER BY b;
END;
DROP TRIGGER api_events_rcpt_before;
DROP TRIGGER api_events_rcpt;
CREATE TRIGGER api_events_rcpt AFTER UPDATE OF state ON queue_rcpts
	WHEN new.state IN ('sent', 'failed') AND old.state != new.state BEGIN
	INSERT INTO api_events (type, inbox, message_id, recipients, detail, created_at)
	SELECT CASE new.state WHEN 'sent' THEN 'message.delivered' ELSE 'message.bounced' END,
		CASE WHEN m.mailbox != '' THEN m.mailbox ELSE lower(m.sender) END, m.id, json_array(new.rcpt),
		CASE new.state WHEN 'failed' THEN new.last_error ELSE '' END, CAST(unixepoch('subsec') * 1000000000 AS INTEGER)
	FROM queue q JOIN messages m ON m.id = q.copy_id WHERE q.id = new.queue_id
		AND (SELECT id FROM event_sync) >= (SELECT max(id) FROM messages);
	INSERT INTO api_events_staged (pos, type, inbox, message_id, recipients, detail, created_at)
	SELECT (SELECT max(id) FROM messages), CASE new.state WHEN 'sent' THEN 'message.delivered' ELSE 'message.bounced' END,
		CASE WHEN m.mailbox != '' THEN m.mailbox ELSE lower(m.sender) END, m.id, json_array(new.rcpt),
		CASE new.state WHEN 'failed' THEN new.last_error ELSE '' END, CAST(unixepoch('subsec') * 1000000000 AS INTEGER)
	FROM queue q JOIN messages m ON m.id = q.copy_id WHERE q.id = new.queue_id
		AND (SELECT id FROM event_sync) < (SELECT max(id) FROM messages);
END;
DROP TRIGGER domains_verified;
CREATE TRIGGER domains_verified AFTER UPDATE OF status ON domains
	WHEN new.status = 'verified' AND old.status != 'verified' BEGIN
	INSERT INTO api_events (type, inbox, message_id, detail, created_at)
	SELECT 'domain.verified', '', 0, new.name, new.updated_at
	WHERE (SELECT id FROM event_sync) >= coalesce((SELECT max(id) FROM messages), 0);
	INSERT INTO api_events_staged (pos, type, inbox, message_id, detail, created_at)
	SELECT (SELECT max(id) FROM messages), 'domain.verified', '', 0, new.name, new.updated_at
	WHERE (SELECT id FROM event_sync) < coalesce((SELECT max(id) FROM messages), 0);
END;
DROP TRIGGER payments_event_before;
DROP TRIGGER payments_event;
CREATE TRIGGER payments_event AFTER UPDATE OF state ON payments
	WHEN new.state IN ('verified', 'mismatch', 'failed', 'not_found') AND old.state != new.state BEGIN
	INSERT INTO api_events (type, inbox, message_id, detail, created_at)
	SELECT type, b, new.message_id, dt, new.checked_at FROM (
		SELECT CASE new.state WHEN 'verified' THEN 'payment.verified' ELSE 'payment.rejected' END AS type,
			CASE new.state WHEN 'verified' THEN '' ELSE new.state || ': ' || new.reason END AS dt)
	JOIN (SELECT m.mailbox AS b FROM messages m WHERE m.id = new.message_id AND m.mailbox != ''
		UNION SELECT lower(j.value) FROM messages m,
			json_each(CASE WHEN json_valid(m.recipients) THEN m.recipients ELSE '[]' END) j
			WHERE m.id = new.message_id AND m.mailbox = '' AND j.value != '')
	WHERE (SELECT id FROM event_sync) >= (SELECT max(id) FROM messages)
	ORDER BY b;
	INSERT INTO api_events_staged (pos, type, inbox, message_id, detail, created_at)
	SELECT (SELECT max(id) FROM messages), type, b, new.message_id, dt, new.checked_at FROM (
		SELECT CASE new.state WHEN 'verified' THEN 'payment.verified' ELSE 'payment.rejected' END AS type,
			CASE new.state WHEN 'verified' THEN '' ELSE new.state || ': ' || new.reason END AS dt)
	JOIN (SELECT m.mailbox AS b FROM messages m WHERE m.id = new.message_id AND m.mailbox != ''
		UNION SELECT lower(j.value) FROM messages m,
			json_each(CASE WHEN json_valid(m.recipients) THEN m.recipients ELSE '[]' END) j
			WHERE m.id = new.message_id AND m.mailbox = '' AND j.value != '')
	WHERE (SELECT id FROM event_sync) < (SELECT max(id) FROM messages)
	ORDER BY b;
END;
ALTER TABLE messages ADD COLUMN received_as TEXT NOT NULL DEFAULT '';
DROP TRIGGER event_sync_received;
CREATE TRIGGER event_sync_received AFTER UPDATE OF id ON event_sync WHEN new.id > old.id BEGIN
	INSERT INTO api_events (type, inbox, message_id, recipients, detail, created_at)
	SELECT CASE WHEN k = 1 THEN type WHEN instr(type, ' b:' || b || ' ') > 0 THEN 'message.received.blocked'
			WHEN instr(type, ' u ') > 0 THEN 'message.received.unauthenticated' ELSE 'message.received' END,
		b, mid, rc, dt, at FROM (
		SELECT id AS pos, 0 AS k, 0 AS seq, received_as AS type, mailbox AS b, id AS mid, '[]' AS rc, '' AS dt, received_at AS at
			FROM messages WHERE direction != 'out' AND mailbox != '' AND id > old.id AND id <= new.id
		UNION SELECT m.id, 0, 0, m.received_as, lower(j.value), m.id, '[]', '', m.received_at FROM messages m,
			json_each(CASE WHEN json_valid(m.recipients) THEN m.recipients ELSE '[]' END) j
			WHERE m.direction != 'out' AND m.mailbox = '' AND j.value != '' AND m.id > old.id AND m.id <= new.id
		UNION SELECT pos, 1, seq, type, inbox, message_id, recipients, detail, created_at FROM api_events_staged WHERE pos <= new.id)
	ORDER BY pos, k, seq, b;
	DELETE FROM api_events_staged WHERE pos <= new.id;
END;
CREATE TABLE api_inbox_events (
	id         INTEGER PRIMARY KEY AUTOINCREMENT,
	inbox      TEXT NOT NULL,
	type       TEXT NOT NULL,
	message_id INTEGER NOT NULL,
	label      TEXT NOT NULL,
	created_at INTEGER NOT NULL
);
CREATE INDEX api_inbox_events_inbox ON api_inbox_events (inbox, id);
CREATE INDEX api_inbox_events_created ON api_inbox_events (created_at);
`,
	// 28: API keys' per-operation permissions (NULL: all; else a JSON
	// array of the granted names), the pod a key is bound to ('': the
	// organisation) and when its name or permissions last changed.
	sqliteDDL(apiKeyPermissionsDDL),
	// 29: Postgres's storage of a message's filter tags and keys
	// (postgres_schema.go); SQLite's is unchanged.
	`SELECT 1;`,
	// 30: a webhook's custom delivery headers (JSON object, sent with
	// every delivery: WebhookHeaders), and the inbox index's usage per
	// inbox and hour (usage.go): messages, bytes and threads it took,
	// written by SyncInboxes, filled here from the index.
	sqliteDDL(usageDDL),
	// 31: Postgres bounds the pending list of its search index
	// (postgres_schema.go); FTS5 has none. Versions only.
	`SELECT 1;`,
	// 32: Postgres's search index and event log narrow
	// (postgres_schema.go); SQLite's are unchanged. Versions only.
	`SELECT 1;`,
	// 33: a message's errors and warnings are kept once: the column is
	// '' when its list is the stored result's (problems.go), and the
	// error and warning codes get a column of their own (codes: a JSON
	// array of the filter tags "code:…", NULL for none), which the
	// filter tags read instead of the lists (indexSearch, and this
	// update trigger). Rows from before keep their lists and no codes:
	// the tags read the lists too.
	`
ALTER TABLE messages ADD COLUMN codes TEXT;
DROP TRIGGER message_tags_update;
CREATE TRIGGER message_tags_update AFTER UPDATE OF status, errors, warnings, codes ON messages BEGIN
	DELETE FROM message_tags WHERE message_id = old.id AND tag IN (
		SELECT 'status:' || old.status
		UNION SELECT value FROM json_each(CASE WHEN json_valid(old.codes) THEN old.codes ELSE '[]' END)
		UNION SELECT 'code:' || json_extract(value, '$.code') FROM json_each(CASE WHEN json_valid(old.errors) THEN old.errors ELSE '[]' END)
		UNION SELECT 'code:' || json_extract(value, '$.code') FROM json_each(CASE WHEN json_valid(old.warnings) THEN old.warnings ELSE '[]' END));
	INSERT OR IGNORE INTO message_tags (tag, message_id)
	SELECT t, new.id FROM (
		SELECT 'status:' || new.status AS t
		UNION SELECT value FROM json_each(CASE WHEN json_valid(new.codes) THEN new.codes ELSE '[]' END)
		UNION SELECT 'code:' || json_extract(value, '$.code') FROM json_each(CASE WHEN json_valid(new.errors) THEN new.errors ELSE '[]' END)
		UNION SELECT 'code:' || json_extract(value, '$.code') FROM json_each(CASE WHEN json_valid(new.warnings) THEN new.warnings ELSE '[]' END)
	) WHERE t IS NOT NULL;
END;
`,
	// 34: the Envelopay-id and relay-mailbox indexes leave out the mail
	// that has none (most mail: plain mail has no Envelopay id, and only
	// the relay's mail has a mailbox), so that storing it writes two
	// B-trees fewer. Every lookup by either says envelopay_id <> '' or
	// mailbox <> '' (as on Postgres since its 29), which lets SQLite use
	// the partial index (https://sqlite.org/partialindex.html §2,
	// "Queries Using Partial Indexes"); TestLookupsUseIndexes.
	`
DROP INDEX messages_eid;
CREATE INDEX messages_eid ON messages (envelopay_id) WHERE envelopay_id <> '';
DROP INDEX messages_mailbox;
CREATE INDEX messages_mailbox ON messages (mailbox, id) WHERE mailbox <> '';
`,
}

// SchemaVersion is the schema version this program writes (PRAGMA
// user_version after all migrations).
const SchemaVersion = 34

// migrate brings db from its user_version up to version target, one
// transaction per step. Several processes may open a fresh database at
// once (two `serve`, `serve` and `send`): each step runs in a write
// transaction (the writer DSN's _txlock=immediate makes BeginTx a BEGIN
// IMMEDIATE, so two migrators never interleave) and re-reads user_version
// inside it, so a step another process has applied meanwhile is skipped
// instead of failing with "table … already exists". A database already at
// target is never written to (a read-only file still opens).
func migrate(ctx context.Context, db *sql.DB, target int) error {
	v, err := schemaVersion(ctx, db)
	if err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if v > len(migrations) {
		return fmt.Errorf("%w: version %d, known up to %d", ErrSchemaTooNew, v, len(migrations))
	}
	for v < target {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("migration %d: %w", v+1, err)
		}
		// Under the write lock: another process may have migrated since.
		if v, err = schemaVersion(ctx, tx); err != nil {
			tx.Rollback()
			return fmt.Errorf("read schema version: %w", err)
		}
		if v >= target {
			tx.Rollback()
			break
		}
		if v > len(migrations) {
			tx.Rollback()
			return fmt.Errorf("%w: version %d, known up to %d", ErrSchemaTooNew, v, len(migrations))
		}
		if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %d: %w", v+1, err)
		}
		if err := runStep(ctx, tx, v+1, func(q string) string { return q }, func(a []any) []any { return a }); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %d: %w", v+1, err)
		}
		// PRAGMA takes no parameters; v+1 is an int.
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", v+1)); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %d: %w", v+1, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("migration %d: %w", v+1, err)
		}
		v++
	}
	return nil
}

// schemaVersion reads PRAGMA user_version through db or a transaction.
func schemaVersion(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) (int, error) {
	var v int
	err := q.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v)
	return v, err
}
