package mcp

import (
	"context"
	"encoding/json"
	"regexp"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/envelopd/envelopd/api"
	"github.com/envelopd/envelopd/protocols/tunnelsign"
	"github.com/envelopd/envelopd/protocols/vacant"
)

type aicpSignIn struct {
	Message json.RawMessage `json:"message" jsonschema:"the AICP v0.1 message object (from, to, body, ...); v, id, timestamp and nonce are filled when absent"`
	Now     string          `json:"now,omitempty" jsonschema:"the time to fill in and check against (RFC 3339); default now"`
}

type aicpSignOut struct {
	// Signed is the signed message (a JSON object).
	Signed json.RawMessage `json:"signed"`
	Valid  bool            `json:"valid"`
	// Errors are what validation with the signer's key found (a message
	// that stays invalid after filling, e.g. a stale timestamp).
	Errors []api.Problem `json:"errors"`
}

type vacantSignIn struct {
	To        string          `json:"to" jsonschema:"recipient vacant id: 64 lowercase hex digits"`
	Text      string          `json:"text,omitempty" jsonschema:"message text (one text part); or give message"`
	Message   json.RawMessage `json:"message,omitempty" jsonschema:"an A2A message object {role, parts, contextId, messageId}"`
	Role      string          `json:"role,omitempty" jsonschema:"role for text (default ROLE_USER)"`
	ContextID string          `json:"context_id,omitempty" jsonschema:"contextId for text"`
	Seq       int64           `json:"seq,omitempty" jsonschema:"sequence number (default: the stored chain tip + 1)"`
	Prev      string          `json:"prev,omitempty" jsonschema:"hash of the previous envelope (with seq; default: the stored tip)"`
	Idem      string          `json:"idem,omitempty" jsonschema:"idempotency key (default: a random UUID)"`
	Now       string          `json:"now,omitempty" jsonschema:"envelope timestamp (RFC 3339); default now"`
}

type vacantSignOut struct {
	// Envelope is the JSON-RPC wire form of the signed envelope.
	Envelope json.RawMessage `json:"envelope"`
	From     string          `json:"from"`
	Seq      int64           `json:"seq"`
	Prev     string          `json:"prev"`
}

var hex64 = regexp.MustCompile(`^[0-9a-f]{64}$`)

func parseNow(s string) (time.Time, error) {
	if s == "" {
		return time.Now(), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, invalid("now", "not an RFC 3339 time")
	}
	return t, nil
}

func (s *server) registerSign(srv *sdk.Server) {
	tool(s, srv, "aicp_sign", "Sign an AICP v0.1 message (to tunnel in an Envelopay message) with the server's AICP key; fills v, id, timestamp and nonce, then validates the result.",
		func(ctx context.Context, _ *api.Principal, in aicpSignIn) (aicpSignOut, error) {
			if s.cfg.AICPKey == nil {
				return aicpSignOut{}, &ToolError{API: &api.Error{Status: 501, Name: "NotImplementedError",
					Message: "no AICP key is configured (envelopd mcp --aicp-key FILE, or serve --mcp-aicp-key FILE)"}}
			}
			now, err := parseNow(in.Now)
			if err != nil {
				return aicpSignOut{}, err
			}
			signed, probs, err := tunnelsign.SignAICP(in.Message, s.cfg.AICPKey, now)
			if err != nil {
				return aicpSignOut{}, invalid("message", err.Error())
			}
			return aicpSignOut{Signed: signed, Valid: len(probs) == 0, Errors: api.Problems(probs)}, nil
		})
	tool(s, srv, "vacant_sign", "Build and sign a Vacant P6 envelope (to tunnel in an Envelopay message) with the server's Vacant key; the chain position defaults to the stored tip + 1.",
		func(ctx context.Context, _ *api.Principal, in vacantSignIn) (vacantSignOut, error) {
			if s.cfg.VacantKey == nil {
				return vacantSignOut{}, &ToolError{API: &api.Error{Status: 501, Name: "NotImplementedError",
					Message: "no Vacant key is configured (envelopd mcp --vacant-key FILE, or serve --mcp-vacant-key FILE)"}}
			}
			switch {
			case !hex64.MatchString(in.To):
				return vacantSignOut{}, invalid("to", "want 64 lowercase hex digits")
			case (in.Text == "") == (len(in.Message) == 0):
				return vacantSignOut{}, invalid("text", "give text or message (one of them)")
			case in.Prev != "" && in.Seq == 0, in.Seq > 1 && in.Prev == "":
				return vacantSignOut{}, invalid("prev", "give seq and prev together (prev may be left out for seq 1)")
			case in.Seq < 0:
				return vacantSignOut{}, invalid("seq", "must be positive")
			}
			now, err := parseNow(in.Now)
			if err != nil {
				return vacantSignOut{}, err
			}
			var msg vacant.Message
			if in.Text != "" {
				msg = tunnelsign.VacantText(in.Text, in.Role, in.ContextID)
			} else if msg, err = vacant.MessageFromJSON(in.Message); err != nil {
				return vacantSignOut{}, invalid("message", err.Error())
			}
			from := tunnelsign.VacantID(s.cfg.VacantKey)
			env := &vacant.Envelope{To: in.To, Seq: in.Seq, Prev: in.Prev, Time: now, Idem: in.Idem, Payload: msg}
			if in.Seq == 0 {
				if s.cfg.ChainTip == nil {
					return vacantSignOut{}, invalid("seq", "no store to read the chain tip from: give seq and prev")
				}
				seq, hash, err := s.cfg.ChainTip(ctx, vacant.Chain(from, in.To))
				if err != nil {
					return vacantSignOut{}, err
				}
				env.Seq, env.Prev = tunnelsign.VacantNext(seq, hash)
			}
			wire, err := tunnelsign.SignVacant(env, s.cfg.VacantKey)
			if err != nil {
				return vacantSignOut{}, invalid("message", err.Error())
			}
			return vacantSignOut{Envelope: wire, From: from, Seq: env.Seq, Prev: env.Prev}, nil
		})
}
