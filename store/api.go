// Package store keeps everything envelopd must not lose: received and sent
// messages with their raw bytes, threads, the uniqueness claims behind
// replay and duplicate detection, the hand-off (delivery) log, the outbound
// queue, IMAP poll positions, tunnelled-protocol keys and state, and relay
// mailboxes.
//
// The store is one engine (core: Tx, the dialect, the single writer)
// shared by rooms, one per concern — the rules core (ingest, check, reads,
// queue, hand-off, state), the HTTP API's keys, inbox index, event log,
// webhooks and idempotency, the relay's mailboxes and folders, payments,
// managed domains, drafts, lists and settings — each its own type with a
// small interface (rooms.go); a consumer holds only the interfaces it
// uses, and DB is all of them. The backends are SQLite (modernc.org/sqlite,
// pure Go) and Postgres; storetest holds the conformance suites, one per
// room, that both pass. The store knows nothing of SMTP or IMAP: callers
// hand it parsed facts (Incoming) and it makes the stateful decisions
// atomically, race-free by construction (UNIQUE keys and INSERT … ON
// CONFLICT, never check-then-insert).
package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/envelopd/envelopd/protocols"
)

// Message statuses.
const (
	StatusAccepted    = "accepted"
	StatusQuarantined = "quarantined" // failed validation: kept, never dropped
	StatusDuplicate   = "duplicate"   // duplicate_id / duplicate_proof / replay
)

// Directions.
const (
	DirIn  = "in"
	DirOut = "out"
)

// ErrNotFound is returned when a looked-up row does not exist.
var ErrNotFound = errors.New("store: not found")

// Asset is an amount of a token on a chain (OFFER want, ACCEPT payment).
type Asset struct {
	Amount string `json:"amount"`
	Token  string `json:"token"`
	Chain  string `json:"chain"`
}

// Incoming is one message to store, with everything the stateless stages
// (DKIM, parse, protocol validators) found. Addresses are lower-case bare
// addr-specs; Message-IDs are normalised (no angle brackets, domain lower-case).
type Incoming struct {
	Mailbox    string // recipient mailbox (relay mode); "" for the default
	Direction  string // DirIn or DirOut
	Raw        []byte
	MessageID  string
	InReplyTo  []string
	References []string
	Sender     string
	Recipients []string
	Subject    string
	ReceivedAt time.Time

	Type        string            // Envelopay type, lower case, or ""
	EnvelopayID string            // body "id", or ""
	Refs        map[string]string // typed refs: "order_ref" → id, …, and OOPS "ref"
	// ProofFingerprint identifies a payment proof (chain + canonical proof
	// JSON, hashed); "" when the message carries none.
	ProofFingerprint string
	// BodyFingerprint identifies the message's content (the canonical
	// Envelopay JSON body, hashed); "" when it has none. The same sender,
	// Envelopay id and BodyFingerprint as a stored message is a retry.
	BodyFingerprint string
	// Proof, with ProofFingerprint, makes a received message's payment
	// row (payments.go); nil when it carries no proof.
	Proof      *ProofFacts
	OfferWant  *Asset // OFFER: its want
	AcceptPaid *Asset // ACCEPT: its amount/token/chain, checked against the OFFER's want

	// Status as decided by the stateless checks: StatusAccepted, or
	// StatusQuarantined when Errors is not empty.
	Status      string
	Errors      protocols.Problems
	Warnings    protocols.Problems
	Result      json.RawMessage // the parse JSON, stored and handed off
	DKIM        json.RawMessage // JSON array of dkim results
	AuthResults string          // Authentication-Results header value
	// SenderVerdict is what the sender verdict in Result (its "sender"
	// key) says, given by the caller that wrote it there so that the
	// store does not decode Result again to learn it; the zero value
	// has the store read Result.
	SenderVerdict SenderVerdict

	Claims []protocols.Claim      // tunnelled-protocol uniqueness claims
	Links  []protocols.Link       // tunnelled-protocol hash-chain links
	Checks []protocols.StateCheck // state the message needs (AICP consent)
	Sets   []protocols.StateSet   // state the message sets when accepted

	// Handoff names the delivery targets ("exec", "webhook", …) to log a
	// pending delivery for when the message is new and accepted.
	Handoff []string
	// HandoffVerified holds the hand-off of a message with a payment
	// until the payment is verified (then it is due at once; a rejected
	// payment drops it). Messages without a proof are not held.
	HandoffVerified bool
	// OOPS, when set, says what the caller decided before the ingest
	// about the courtesy OOPS this message may be owed (data, no
	// callback). With the final outcome the store decides whether one is
	// owed (OOPSTerms.Owed), applies OOPSLimits and records the decision
	// on the message (Message.OOPS, and a warning oops_suppressed when
	// none is sent); an allowed OOPS is recorded as owed, a row in the
	// message's own transaction (OwedOOPS), which a worker composes, signs
	// and queues after the commit (ClaimOwedOOPS, ResolveOOPS).
	OOPS *OOPSTerms
	// OOPSLimits bound the courtesy OOPS (zero fields: the defaults).
	OOPSLimits OOPSLimits
}

// SenderVerdict is what an Incoming's Result says of its sender, as far as
// the store's rules need it: whether it holds a sender verdict that
// authenticates no domain (its authenticated_as null).
type SenderVerdict uint8

const (
	// SenderVerdictInResult: not given; the store reads Result.
	SenderVerdictInResult SenderVerdict = iota
	// SenderVerdictAuthenticated: Result holds no verdict, or one that
	// authenticates a domain.
	SenderVerdictAuthenticated
	// SenderVerdictUnauthenticated: Result holds a verdict that
	// authenticates no domain.
	SenderVerdictUnauthenticated
)

// OOPSTerms are the facts a courtesy OOPS decision needs that only the
// caller knows (Envelopay v0.2.0, "OOPS is a courtesy"): whom it would go
// to and from, which errors are answered, and whether the caller
// suppresses it whatever the outcome (an unverified sender, automated
// mail: RFC 3834).
type OOPSTerms struct {
	// Codes are the errors answered, in order of preference
	// (parse.OOPSCodes).
	Codes []protocols.Code
	To    string // the recipient (the message's From), lower case
	From  string // the sender: an address at a domain the operator signs for
	// Suppressed, when not "", is why no OOPS is sent (e.g.
	// OOPSSenderUnverified); Detail is a sentence on it for the stored
	// warning.
	Suppressed, Detail string
}

// Owed returns the problem an OOPS answers for a message of Envelopay type
// typ with the final errors errs (protocols.OOPSOwed over t.Codes).
func (t *OOPSTerms) Owed(typ string, errs protocols.Problems) (protocols.Problem, bool) {
	return protocols.OOPSOwed(typ, errs, t.Codes)
}

// OOPSPlan is a courtesy OOPS a message is owed (Envelopay v0.2.0, "OOPS
// is a courtesy"; no backscatter: docs/serve.md), as data.
type OOPSPlan struct {
	Code protocols.Code // the error the OOPS answers
	To   string         // its recipient, lower case
	From string         // its sender, at a signing domain ("" when Suppressed)
	// Suppressed, when not "", is why the caller sends none (e.g.
	// OOPSSenderUnverified); the store records it and checks no limit.
	Suppressed string
	// Detail is a sentence on Suppressed for the stored warning.
	Detail string
}

// OOPSLimits are the courtesy OOPS rate limits, counted in the store so
// that a restart does not reset them. Zero means the default; a negative
// value means no limit.
type OOPSLimits struct {
	PerRecipientHour int // OOPS to one address in any hour (default 10)
	PerThreadCode    int // OOPS per thread and error code (default 1)
}

// Default OOPS limits.
const (
	DefaultOOPSPerRecipientHour = 10
	DefaultOOPSPerThreadCode    = 1
)

// Why no courtesy OOPS was sent (OOPSRecord.Reason; stable strings).
const (
	OOPSSenderUnverified = "sender_unverified"      // no passing aligned DKIM signature, no authenticated submission
	OOPSNoSigningDomain  = "no_signing_domain"      // no domain to send it from
	OOPSAutomated        = "automated"              // RFC 3834 loop safety
	OOPSOnePerMail       = "one_per_mail"           // relay: another copy of the mail got it
	OOPSRateRecipient    = "rate_limited_recipient" // OOPSLimits.PerRecipientHour reached
	OOPSRateThread       = "rate_limited_thread"    // OOPSLimits.PerThreadCode reached
	OOPSComposeFailed    = "compose_failed"
)

// OOPSRecord is the courtesy OOPS decision stored with a message: the
// code answered, and either the OOPS queued (its queue id, Message-ID and
// body: the stored OOPS is the sent OOPS) or why none was sent.
type OOPSRecord struct {
	Code protocols.Code `json:"code"`
	To   string         `json:"to"`
	Sent bool           `json:"sent"`
	// Pending: allowed and owed, not composed and queued yet (a worker
	// composes it after the ingest commits; see OwedOOPS).
	Pending   bool            `json:"pending,omitempty"`
	Reason    string          `json:"reason,omitempty"`
	QueueID   int64           `json:"queue_id,omitempty"`
	MessageID string          `json:"message_id,omitempty"`
	Body      json.RawMessage `json:"body,omitempty"`
}

// Outcome is what Ingest decided.
type Outcome struct {
	ID       int64  // row id of the stored message (of the earlier copy for a redelivery)
	Status   string // final status
	ThreadID string
	// Redelivery is true when the same message (Message-ID and content hash)
	// was already stored: nothing new was written and nothing is handed off.
	Redelivery bool
	// Errors are the final errors: the stateless ones plus stateful ones
	// (duplicate_id, duplicate_proof, amount_mismatch, replay_detected,
	// chain_fork, idempotency_conflict, …).
	Errors   protocols.Problems
	Warnings protocols.Problems
	// Replay is true when a claim matched an earlier one with the same value
	// and its OnSame code is "" (a marked, harmless replay).
	Replay bool
	// QueuedOOPS is the queue id of the courtesy OOPS once queued, or 0:
	// Ingest leaves it 0 (an allowed OOPS is owed, OOPS.Pending, and the
	// owed-OOPS worker queues it: OOPSRecord.QueueID on the message).
	QueuedOOPS int64
	// OOPS is the courtesy OOPS decision, or nil when none was owed.
	OOPS *OOPSRecord
}

// Message is a stored message as read back.
type Message struct {
	ID          int64              `json:"id"`
	Mailbox     string             `json:"mailbox"`
	Direction   string             `json:"direction"`
	MessageID   string             `json:"message_id"`
	Sender      string             `json:"sender"`
	Recipients  []string           `json:"recipients"`
	Subject     string             `json:"subject"`
	Type        string             `json:"type"`
	EnvelopayID string             `json:"envelopay_id"`
	Status      string             `json:"status"`
	ThreadID    string             `json:"thread_id"`
	ReceivedAt  time.Time          `json:"received_at"`
	Errors      protocols.Problems `json:"errors"`
	Warnings    protocols.Problems `json:"warnings"`
	Result      json.RawMessage    `json:"result"`
	DKIM        json.RawMessage    `json:"dkim"`
	AuthResults string             `json:"authentication_results"`
	Size        int                `json:"size"`
	// OOPS is the courtesy OOPS decision (nil: none was owed).
	OOPS *OOPSRecord `json:"oops_decision"`
	// Payment is the payment its proof makes (payments.go), nil when it
	// carries none (or was sent by us).
	Payment *Payment `json:"payment"`
	Raw     []byte   `json:"-"`
}

// Filter selects messages for listing; zero fields match everything.
type Filter struct {
	Mailbox   string
	Direction string // DirIn or DirOut; "" for both
	Type      string
	Status    string
	ThreadID  string
	AfterID   int64 // cursor: only messages with ID > AfterID
	Limit     int   // 0: no limit
	WithRaw   bool
	// Newest lists newest first (default: oldest first).
	Newest bool
}

// Outgoing is a message to deliver: raw bytes (already signed) from an
// envelope sender to recipients. Copy, when set, is stored as a DirOut
// message in the same transaction so that threads show both directions.
type Outgoing struct {
	From       string
	Recipients []string
	Raw        []byte
	MessageID  string
	Kind       string // "send", "oops", "relay"
	Copy       *Incoming
	// Expires is when delivery is given up (default: created + 24 h).
	Expires time.Time
}

// Queue recipient states.
const (
	QueuePending = "pending"
	QueueSent    = "sent"
	QueueFailed  = "failed"
	QueueDropped = "dropped"
)

// QueueEntry is one queued message with per-recipient state.
type QueueEntry struct {
	ID         int64            `json:"id"`
	Kind       string           `json:"kind"`
	From       string           `json:"from"`
	MessageID  string           `json:"message_id"`
	CreatedAt  time.Time        `json:"created_at"`
	Expires    time.Time        `json:"expires_at"`
	Recipients []QueueRecipient `json:"recipients"`
}

// QueueRecipient is the delivery state of one recipient of a queue entry.
// NextAttempt is zero unless State is QueuePending (nothing more is tried),
// and its JSON "next_attempt_at" is then null.
type QueueRecipient struct {
	Rcpt        string    `json:"rcpt"`
	State       string    `json:"state"`
	Attempts    int       `json:"attempts"`
	NextAttempt time.Time `json:"next_attempt_at"`
	LastError   string    `json:"last_error"`
}

// MarshalJSON writes next_attempt_at as null when there is no next
// attempt (a zero NextAttempt: sent, failed or dropped).
func (r QueueRecipient) MarshalJSON() ([]byte, error) {
	type plain QueueRecipient
	var next *time.Time
	if !r.NextAttempt.IsZero() {
		next = &r.NextAttempt
	}
	return json.Marshal(struct {
		plain
		NextAttempt *time.Time `json:"next_attempt_at"`
	}{plain(r), next})
}

// Due is one recipient whose next attempt is due, with the bytes to send.
type Due struct {
	QueueID  int64
	Rcpt     string
	From     string
	Raw      []byte
	Attempts int // attempts already recorded, including the current one
	Expires  time.Time
}

// Delivery is one pending hand-off of a stored message to a target.
type Delivery struct {
	ID        int64
	MessageID int64 // stored message row id
	Target    string
	Attempts  int
}

// Store is the rules core and the relay's mailboxes together: the small
// interfaces of the rules room (Ingester, Reader), the queue room
// (OutboundQueue), the hand-off room (HandoffLog), the state room
// (StateStore) and the relay room (Mailboxes). It is what a process that
// ingests mail opens (DB adds the other rooms); each consumer holds only
// the small interfaces it uses. All methods are safe for concurrent use.
type Store interface {
	Ingester
	Reader
	OutboundQueue
	HandoffLog
	StateStore
	// Relay mailboxes and their folder view (mailbox.go).
	Mailboxes

	Close() error
}

// Ingester is the rules room's ingest: every stateful decision about a
// message is made here (ingest.go, check.go).
type Ingester interface {
	// Ingest stores one message and makes every stateful decision (exact
	// redelivery, duplicate_id, duplicate_proof, ACCEPT↔OFFER amounts,
	// claims, chain links, threading, hand-off log, courtesy OOPS) in one
	// transaction. It returns only after the transaction is durable.
	Ingest(ctx context.Context, in *Incoming) (Outcome, error)
	// Check returns the Outcome Ingest would return for in, writing
	// nothing; it also requires each typed ref to name a stored message
	// (unknown_ref): how an outbound message is checked before queueing.
	Check(ctx context.Context, in *Incoming) (Outcome, error)
}

// Reader is the rules room's reads of stored messages (read.go).
type Reader interface {
	Message(ctx context.Context, id int64) (*Message, error)
	// MessageInfo is Message without the raw bytes (Raw nil): what the
	// message's JSON needs.
	MessageInfo(ctx context.Context, id int64) (*Message, error)
	Messages(ctx context.Context, f Filter) ([]Message, error)
	// Thread returns the messages of the thread holding ref (a thread id, a
	// Message-ID or an Envelopay id), oldest first.
	Thread(ctx context.Context, ref string) ([]Message, error)
	// WaitNew blocks until a message with ID > after exists or ctx ends.
	WaitNew(ctx context.Context, after int64) error
	// MessagesChanged returns a channel closed at the next commit that
	// may have stored messages (on any node, for Postgres).
	MessagesChanged() <-chan struct{}
}

// OutboundQueue is the queue room: outbound mail, one row per recipient
// (queue.go).
type OutboundQueue interface {
	Enqueue(ctx context.Context, out *Outgoing) (int64, error)
	CheckedEnqueuer
	// ClaimDue returns recipients due at now and, before returning, records
	// the attempt (attempts+1, next attempt pushed to now+lease) so that a
	// crash during the try neither loses nor duplicates work.
	ClaimDue(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]Due, error)
	// RecordDelivery stores the result of an attempt: state QueueSent,
	// QueueFailed, or QueuePending with the next attempt time.
	RecordDelivery(ctx context.Context, queueID int64, rcpt, state, lastErr string, next time.Time) error
	Queue(ctx context.Context, state string) ([]QueueEntry, error)
	QueueRetry(ctx context.Context, id int64) error
	QueueDrop(ctx context.Context, id int64) error
	// QueueChanged returns a channel closed at the next commit that may
	// have queued outbound mail (on any node, for Postgres).
	QueueChanged() <-chan struct{}
}

// HandoffLog is the hand-off room's worker side: at-least-once delivery
// of stored messages to the agent (delivery.go).
type HandoffLog interface {
	ClaimDeliveries(ctx context.Context, target string, now time.Time, lease time.Duration, limit int) ([]Delivery, error)
	DeliveryDone(ctx context.Context, id int64) error
	DeliveryRetry(ctx context.Context, id int64, next time.Time, lastErr string) error
	// DeliveryRelease puts a claimed hand-off back unattempted: pending,
	// due at now, its claim's attempt taken back.
	DeliveryRelease(ctx context.Context, id int64, now time.Time) error
}

// StateStore is the state room: what the protocols and pollers keep
// between messages (state.go).
type StateStore interface {
	// IMAP poll positions, per account+mailbox key.
	IMAPState(ctx context.Context, key string) (uidValidity uint32, lastUID uint32, err error)
	SetIMAPState(ctx context.Context, key string, uidValidity, lastUID uint32) error

	// Keys for tunnelled protocols (e.g. protocol "aicp", handle "alice").
	PutKey(ctx context.Context, protocol, handle, key string) error
	// PutKeyIfAbsent stores key unless the handle has one, and returns
	// the stored one: one winner however many nodes ask.
	PutKeyIfAbsent(ctx context.Context, protocol, handle, key string) (string, error)
	Keys(ctx context.Context, protocol string) (map[string]string, error)
	// ChainTip returns the tip (seq, hash) of a hash chain, or 0 and the
	// zero hash when empty.
	ChainTip(ctx context.Context, chain string) (int64, string, error)
}

// Mailbox is a relay mailbox: one address at a local domain. Its stored
// messages are those with Incoming.Mailbox equal to Address.
type Mailbox struct {
	Address     string    `json:"address"`
	HasPassword bool      `json:"has_password"`
	CreatedAt   time.Time `json:"created_at"`
	Messages    int       `json:"messages"` // stored messages, both directions
}

// Folder is one folder of a mailbox's view (an IMAP mailbox: INBOX, Sent,
// or one the user created). UIDs are strictly ascending within a folder
// and never reused while UIDValidity stays the same (RFC 9051 §2.3.1.1).
type Folder struct {
	Name        string `json:"name"`
	UIDValidity uint32 `json:"uid_validity"`
	UIDNext     uint32 `json:"uid_next"`
	Count       int    `json:"count"`
}

// FolderMessage is a stored message as filed in a folder, with the
// stored verdict on it (for a view's own header fields).
type FolderMessage struct {
	UID        uint32
	ID         int64 // stored message row id (Message returns its bytes)
	Flags      []string
	Size       int
	ReceivedAt time.Time

	Direction   string
	Status      string
	Errors      protocols.Problems
	DKIM        json.RawMessage // JSON array of dkim results
	AuthResults string          // "" when DKIM was not verified
	// Payment is the state of its payment when read ("" when it has
	// none).
	Payment string
}

// The folders every mailbox has. New received messages are filed in
// FolderInbox when accepted and in FolderQuarantine otherwise (duplicates,
// replays, quarantined mail: an agent reading INBOX sees only mail it may
// act on); stored copies of sent ones go to FolderSent.
const (
	FolderInbox      = "INBOX"
	FolderSent       = "Sent"
	FolderQuarantine = "Quarantine"
)

// Folder errors.
var (
	ErrFolderExists = errors.New("store: folder exists")
	ErrFolderFixed  = errors.New("store: INBOX cannot be deleted or renamed")
)

// Mailboxes is the part of Store behind relay mode: the mailboxes, their
// password hashes (opaque to the store), and a folder view over the stored
// messages — the messages themselves are never copied; a folder holds
// references with per-folder UIDs and flags. Removing a message from a
// folder (EXPUNGE, MOVE) never deletes the stored message or the
// uniqueness facts it holds.
type Mailboxes interface {
	// EnsureMailbox creates the mailbox (no password, folders INBOX,
	// Quarantine and Sent) unless it exists, and reports whether it
	// created it.
	EnsureMailbox(ctx context.Context, address string) (created bool, err error)
	// SetMailboxPassword creates the mailbox if needed and sets its
	// password hash.
	SetMailboxPassword(ctx context.Context, address, hash string) error
	// MailboxPassword returns the password hash ("" when none is set), or
	// ErrNotFound for an unknown mailbox.
	MailboxPassword(ctx context.Context, address string) (string, error)
	// ListMailboxes returns every mailbox, by address.
	ListMailboxes(ctx context.Context) ([]Mailbox, error)

	// SyncFolders files the mailbox's messages stored since the last call:
	// received ones in INBOX when accepted and in Quarantine otherwise,
	// sent copies in Sent (flagged \Seen), each with the folder's next
	// UID. It returns how many it filed.
	SyncFolders(ctx context.Context, mailbox string) (int, error)
	// Folders lists the mailbox's folders by name (ErrNotFound for an
	// unknown mailbox).
	Folders(ctx context.Context, mailbox string) ([]Folder, error)
	CreateFolder(ctx context.Context, mailbox, name string) error
	DeleteFolder(ctx context.Context, mailbox, name string) error
	RenameFolder(ctx context.Context, mailbox, from, to string) error
	// FolderMessages lists the folder's messages with UID > afterUID, in
	// UID order.
	FolderMessages(ctx context.Context, mailbox, folder string, afterUID uint32) ([]FolderMessage, error)
	// SetFlags replaces the flags of the given UIDs.
	SetFlags(ctx context.Context, mailbox, folder string, flags map[uint32][]string) error
	// Unfile removes UIDs from a folder (the stored messages stay).
	Unfile(ctx context.Context, mailbox, folder string, uids []uint32) error
	// Refile files the UIDs of folder src in folder dst under new UIDs
	// (returned in the same order), keeping their flags; move also removes
	// them from src, in the same transaction.
	Refile(ctx context.Context, mailbox, src, dst string, uids []uint32, move bool) (Folder, []uint32, error)
}
