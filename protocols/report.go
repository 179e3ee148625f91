package protocols

// Report is the outcome of inspecting one tunnelled-protocol JSON document
// (an attachment or a JSON body part): which protocol it is, whether it is
// valid, its problems and a short summary (ids, from/to, kind/type, seq).
//
// Stateful facts that the store must check race-free (idempotency keys,
// nonces, hash-chain links) are returned as Claims and Links for the
// pipeline to hand to the store; the validators never touch the store.
type Report struct {
	// Protocol is "vcp", "aicp", "vacant", "a2a" or "pvp"; "" when the JSON
	// is none of them.
	Protocol string         `json:"protocol"`
	Valid    bool           `json:"valid"`
	Errors   Problems       `json:"errors"`
	Summary  map[string]any `json:"summary"`
	Claims   []Claim        `json:"-"`
	Links    []Link         `json:"-"`
	Checks   []StateCheck   `json:"-"`
	Sets     []StateSet     `json:"-"`
	// Withhold, when not "", says why the document must never be persisted
	// (PVP §20.3: secret values MUST NOT be persisted to disk); the
	// pipeline then stores the mail without its body.
	Withhold string `json:"-"`
}

// Claim asks the store to record Key under Kind (unique per Kind) with
// Value. If Key was already recorded with the same Value the message is a
// replay; with a different Value it is a conflict. Window, when non-zero,
// is how long (seconds) the claim lasts (AICP nonces: 24 h).
type Claim struct {
	Kind   string // e.g. "vcp_idem", "aicp_nonce", "aicp_id"
	Key    string // e.g. from + "\x00" + idempotency_key
	Value  string // e.g. hex SHA-256 of the canonical request
	Window int64
	// OnSame and OnConflict are the codes to report when the key exists
	// with the same or another value; "" means "not an error" (a replay
	// that is only marked).
	OnSame     Code
	OnConflict Code
}

// Link asks the store to append to a hash chain (Vacant P6): Chain names
// the (from, to) pair; Seq must be the tip's seq + 1 and Prev the tip's
// hash (seq 1: Prev is 64 zero hex digits); Hash becomes the new tip.
type Link struct {
	Chain string
	Seq   int64
	Prev  string
	Hash  string
}

// StateCheck asks the store to read the state (Kind, Key) inside the
// ingest transaction and fail the message unless its value is Want: the
// code Codes[value] when the value is listed there, else Default (also for
// a state never set). AICP consent (aicp-v0.1 §2.6): a message other than a
// handshake needs (from>to) "accepted"; "blocked" is consent_blocked,
// anything else consent_required.
type StateCheck struct {
	Kind, Key, Want string
	Codes           map[string]Code
	Default         Code
}

// StateSet asks the store to set the state (Kind, Key) to Value when the
// message is accepted — unless the current value is one of Keep (an AICP
// handshake request does not undo an accept or a block), or If is set and
// its tally is not resolved.
type StateSet struct {
	Kind, Key, Value string
	Keep             []string
	If               *Tally
}

// Tally lets a StateSet depend on what the store holds, read inside the
// ingest transaction after the message's own claims are taken (so they
// count): the claims of Kind whose key starts with Prefix and, when
// StateKind is not "", the states of StateKind whose key starts with
// StatePrefix. Rule gets each set as key (with its prefix removed) →
// value and says whether the StateSet applies. Like the rest it is undone
// when the message is not accepted. PVP gates count votes this way.
type Tally struct {
	Kind, Prefix           string
	StateKind, StatePrefix string
	Rule                   TallyRule
}

// TallyRule decides a Tally. An implementation is best a comparable value
// (not a func), so that reports stay comparable with reflect.DeepEqual.
type TallyRule interface {
	Resolved(claims, states map[string]string) bool
}
