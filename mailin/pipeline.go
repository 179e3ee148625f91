package mailin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/envelopd/envelopd/dkim"
	"github.com/envelopd/envelopd/parse"
	"github.com/envelopd/envelopd/payments/proof"
	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/protocols/canonjson"
	"github.com/envelopd/envelopd/protocols/envelopay"
	"github.com/envelopd/envelopd/senderauth"
	"github.com/envelopd/envelopd/store"
)

// Meta is what the transport knows about a message besides its bytes.
type Meta struct {
	Source   string   // "smtp" or "imap"
	MailFrom string   // envelope sender; "" is the null reverse-path
	Rcpts    []string // envelope recipients
	Mailbox  string   // store mailbox ("" = default)
	Remote   string   // peer address, for logs
	// User is the authenticated submission user ("" when none): a From
	// equal to it is a verified sender (courtesy OOPS).
	User string
	// NoOOPS, when not "", is why this copy gets no courtesy OOPS
	// whatever its errors (store.OOPSOnePerMail in relay mode).
	NoOOPS string
	// SPF is the SMTP transaction's SPF outcome (nil: not received over
	// SMTP, or sender authentication off).
	SPF *senderauth.SPF
}

// OOPSComposer builds a courtesy OOPS in reply to the parsed message r
// for the problem p, from our address, and returns the raw (signed)
// message. Package mailout provides it (mailout.ComposeOOPSFor, signed).
type OOPSComposer func(r *parse.Result, p protocols.Problem, from string) (raw []byte, err error)

// OOPSCodes are the errors a courtesy OOPS is sent for (issue: serve,
// "Courtesy OOPS"); parse.OOPSCodes.
var OOPSCodes = parse.OOPSCodes

// Pipeline processes one raw message from any transport: the stateless
// stages (Analyze), then one store transaction. It is safe for concurrent
// use.
type Pipeline struct {
	Store    store.Store
	Verifier *dkim.Verifier
	Lenient  bool
	// Limits bound the analysis of one message (zero: defaults).
	Limits parse.Limits
	// Keys returns the AICP keys known now (nil: none).
	Keys func(ctx context.Context) map[string][]byte
	// Handoff names the delivery targets logged for accepted messages.
	Handoff []string
	// Handler, when set, is called after each new message is stored.
	Handler Handler
	// OOPS composes courtesy OOPS mails; nil disables them.
	OOPS OOPSComposer
	// OOPSDomains are the domains an OOPS may be sent from: those the
	// operator signs for (DKIM signing domains, relay domains), lower
	// case. None: no OOPS is sent (store.OOPSNoSigningDomain).
	OOPSDomains []string
	// OOPSFrom is the OOPS sender when the message's first recipient is
	// not at one of OOPSDomains (default postmaster@ the first of them);
	// it must be at one of them.
	OOPSFrom string
	// OOPSLimits are the store's OOPS rate limits (zero: the defaults).
	OOPSLimits store.OOPSLimits
	// PaymentChains reports whether a rail serves a chain (normalised
	// name): an accepted message's payment on it is then pending, checked
	// after commit by the payments runner; otherwise unverified. nil:
	// none.
	PaymentChains func(chain string) bool
	// HandoffVerified holds the hand-off of a message carrying a payment
	// until the payment is verified (store.Incoming.HandoffVerified).
	HandoffVerified bool
	// AuthServID names this host in Authentication-Results headers.
	AuthServID string
	// Sender, when set, computes each message's sender verdict (SPF,
	// DMARC, ARC and authenticated_as); nil: DKIM alone.
	Sender *senderauth.Checker
	// DMARCEnforce applies the From domain's DMARC policy to mail that
	// fails DMARC: p=reject → 550 5.7.1 over SMTP (polled mail, which
	// cannot be refused, is quarantined), p=quarantine → quarantined;
	// a DMARC temperror where the policy may reject → 451 4.7.1. Off:
	// the result is recorded only.
	DMARCEnforce bool
	Now          func() time.Time
	Logger       *slog.Logger
	Metrics      Metrics // nil records nothing; mailin/metrics has the Prometheus one
}

// Handler is what an agent embedding envelopd implements: Pipeline calls
// HandleMessage after the message is durably stored, for every new message
// (not redeliveries), whatever its status — check Outcome.Status. It runs
// before the transport acknowledges; an error is logged, the message stays
// stored. For at-least-once delivery that survives restarts, use the
// store's delivery log (Handoff) instead or as well.
type Handler interface {
	HandleMessage(ctx context.Context, a *Analysis, out store.Outcome) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, a *Analysis, out store.Outcome) error

// HandleMessage calls f.
func (f HandlerFunc) HandleMessage(ctx context.Context, a *Analysis, out store.Outcome) error {
	return f(ctx, a, out)
}

// ErrStore wraps store failures: the transport must answer "try again
// later" (SMTP 451), never acknowledge.
var ErrStore = errors.New("mailin: store failed")

// Ingest processes raw and returns only after the message is durably
// stored. The error is non-nil only when nothing was stored (ErrStore, or
// the context ended).
func (p *Pipeline) Ingest(ctx context.Context, raw []byte, meta Meta) (store.Outcome, error) {
	start := time.Now()
	a, in := p.Prepare(ctx, raw, meta)
	if err := p.enforceDMARC(a, in, meta); err != nil {
		p.log().Info("refused by DMARC policy", "err", err, "message_id", in.MessageID, "source", meta.Source, "remote", meta.Remote)
		return store.Outcome{}, err
	}
	out, err := p.Store.Ingest(ctx, in)
	if err != nil {
		p.log().Error("store failed", "err", err, "message_id", in.MessageID, "source", meta.Source)
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		return out, errors.Join(ErrStore, err)
	}
	if p.Metrics != nil {
		p.Metrics.Observe(in, a, out, time.Since(start))
	}
	if p.Handler != nil && !out.Redelivery {
		if err := p.Handler.HandleMessage(ctx, a, out); err != nil {
			p.log().Warn("handler failed", "id", out.ID, "err", err)
		}
	}
	p.log().Debug("stored", "id", out.ID, "status", out.Status, "type", in.Type,
		"message_id", in.MessageID, "redelivery", out.Redelivery, "source", meta.Source)
	return out, nil
}

// Prepare is Ingest up to the store: the stateless stages over raw and
// the store record they yield (its mailbox, receipt time, hand-off
// targets, Authentication-Results and courtesy OOPS). It touches no
// store; envelopd-load's budget measures it alone.
func (p *Pipeline) Prepare(ctx context.Context, raw []byte, meta Meta) (*Analysis, *store.Incoming) {
	now := time.Now()
	if p.Now != nil {
		now = p.Now()
	}
	var keys map[string][]byte
	if p.Keys != nil {
		keys = p.Keys(ctx)
	}
	a := Analyze(ctx, raw, AnalyzeOptions{Verifier: p.Verifier, Lenient: p.Lenient, AICPKeys: keys, Now: now, Limits: p.Limits,
		Sender: p.Sender, SPF: meta.SPF})
	if a.Withhold != "" {
		raw = Withheld(raw, a.Withhold)
	}
	in := Incoming(a, raw, store.DirIn)
	in.Mailbox = meta.Mailbox
	in.ReceivedAt = now.UTC()
	in.Handoff = p.Handoff
	switch {
	case a.Sender != nil:
		in.AuthResults = senderauth.AuthResults(p.AuthServID, a.DKIM, a.Sender)
	case p.Verifier != nil:
		in.AuthResults = dkim.AuthResults(p.AuthServID, a.DKIM)
	}
	if in.Proof != nil {
		in.Proof.Check = p.PaymentChains != nil && in.Proof.Tx != "" && p.PaymentChains(in.Proof.Chain)
		from := ""
		if len(a.Result.From) > 0 {
			from = strings.ToLower(a.Result.From[0])
		}
		in.Proof.Authenticated = senderVerified(a.Sender, a.DKIM, from, meta.User) != ""
		in.HandoffVerified = p.HandoffVerified
	}
	if p.OOPS != nil {
		in.OOPS = p.oopsFunc(a, meta, now, isAutomated(raw, meta, a.Result))
		in.OOPSLimits = p.OOPSLimits
	}
	return a, in
}

func (p *Pipeline) log() *slog.Logger {
	if p.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return p.Logger
}

// Incoming turns an analysis into the store's input: addresses, ids, refs,
// the proof fingerprint and the OFFER/ACCEPT assets. a.Result must be as
// Analyze left it (its JSON is taken from Analyze).
func Incoming(a *Analysis, raw []byte, dir string) *store.Incoming {
	r := a.Result
	in := &store.Incoming{
		Direction:   dir,
		Raw:         raw,
		MessageID:   r.MessageID,
		InReplyTo:   r.InReplyTo,
		References:  r.References,
		Subject:     r.Subject,
		Type:        r.Type,
		EnvelopayID: r.ID,
		Errors:      r.Errors,
		Warnings:    r.Warnings,
		Claims:      a.Claims,
		Links:       a.Links,
		Checks:      a.Checks,
		Sets:        a.Sets,
	}
	if len(r.From) > 0 {
		in.Sender = strings.ToLower(r.From[0])
	}
	for _, l := range [][]string{r.To, r.Cc} {
		for _, addr := range l {
			in.Recipients = append(in.Recipients, strings.ToLower(addr))
		}
	}
	in.Status = store.StatusAccepted
	if len(r.Errors) > 0 {
		in.Status = store.StatusQuarantined
	}
	// MarshalJSON itself, not json.Marshal: that re-validates and
	// compacts the method's output, which more than doubled the cost
	// (≈ 5.5 vs 2.7 µs for a PAY in isolation, more under load).
	if a.resultJSON != nil {
		in.Result = a.resultJSON // Analyze's marshal, when it kept the result whole
	} else if b, err := r.MarshalJSON(); err == nil {
		in.Result = b
	}
	if a.Sender != nil {
		// MarshalJSON itself: json.Marshal would compact its output again.
		if b, err := a.Sender.MarshalJSON(); err == nil {
			in.Result = withKey(in.Result, senderauth.ResultKey, b)
		}
	}
	if b, err := json.Marshal(a.DKIM); err == nil {
		in.DKIM = b
	}
	in.BodyFingerprint = BodyFingerprint(r.Body)
	f := r.Fields
	if f == nil {
		return in
	}
	for _, name := range envelopay.RefFields {
		if v := str(f[name]); v != "" {
			if in.Refs == nil {
				in.Refs = map[string]string{}
			}
			in.Refs[name] = v
		}
	}
	switch r.Type {
	case "pay", "order", "accept":
		setProof(in, str(f["chain"]), str(f["token"]), str(f["amount"]), f["proof"])
		if r.Type == "accept" {
			in.AcceptPaid = &store.Asset{Amount: str(f["amount"]), Token: str(f["token"]), Chain: str(f["chain"])}
		}
	case "offer":
		var give struct {
			Chain  string          `json:"chain"`
			Token  string          `json:"token"`
			Amount string          `json:"amount"`
			Proof  json.RawMessage `json:"proof"`
		}
		if json.Unmarshal(f["give"], &give) == nil {
			setProof(in, give.Chain, give.Token, give.Amount, give.Proof)
		}
		var want store.Asset
		if json.Unmarshal(f["want"], &want) == nil {
			in.OfferWant = &want
		}
	}
	return in
}

// withKey returns the JSON object obj with "key": val added at its end
// (obj must not have key already; Analyze's result never has "sender").
// It copies obj: Analyze's buffer may be shared.
func withKey(obj []byte, key string, val []byte) []byte {
	obj = bytes.TrimRight(obj, " \r\n\t")
	if len(obj) < 2 || obj[len(obj)-1] != '}' {
		return obj
	}
	out := make([]byte, 0, len(obj)+len(key)+len(val)+4)
	out = append(out, obj[:len(obj)-1]...)
	if len(bytes.TrimSpace(obj[1:len(obj)-1])) > 0 {
		out = append(out, ',')
	}
	out = append(out, '"')
	out = append(out, key...)
	out = append(out, '"', ':')
	out = append(out, val...)
	return append(out, '}')
}

// Withheld is what is stored instead of a mail that must not be persisted:
// its header section and a line saying why the body was withheld. The
// parse result (errors, attachment summaries) is kept; the attachment
// contents are not.
func Withheld(raw []byte, why string) []byte {
	head := raw
	if i := bytes.Index(raw, []byte("\r\n\r\n")); i >= 0 {
		head = raw[:i+2]
	} else if i := bytes.Index(raw, []byte("\n\n")); i >= 0 {
		head = raw[:i+1]
	}
	var b bytes.Buffer
	skipping := false
	for _, line := range bytes.SplitAfter(head, []byte("\n")) {
		// The body is gone, so its MIME description (and the folded
		// lines of those fields) is dropped too.
		if len(line) > 0 && (line[0] == ' ' || line[0] == '\t') {
			if !skipping {
				b.Write(line)
			}
			continue
		}
		skipping = bytes.HasPrefix(bytes.ToLower(line), []byte("content-"))
		if !skipping {
			b.Write(line)
		}
	}
	b.WriteString("X-Envelopd-Withheld: " + why + "\r\n\r\n")
	b.WriteString("[envelopd: the body of this message was not stored: " + why + "]\r\n")
	return b.Bytes()
}

// setProof gives in the identity of its payment proof (package
// payments/proof: the on-chain transaction it names, normalised per chain
// kind), so that one transaction however written is one proof (Envelopay
// v0.2.0, "Verification": "proof deduplication"). A proof naming no
// recognisable transaction, or a malformed one, adds the proof's warning.
func setProof(in *store.Incoming, chain, token, amount string, raw json.RawMessage) {
	id := proof.Identify(chain, raw)
	if id.Fingerprint == "" {
		return
	}
	in.ProofFingerprint = id.Fingerprint
	in.Proof = &store.ProofFacts{Chain: id.Chain, Tx: id.Tx, Token: token, Amount: amount}
	if id.Warning != "" {
		in.Warnings = append(in.Warnings[:len(in.Warnings):len(in.Warnings)], protocols.New(protocols.Code(id.Warning), "proof", "%s", id.Detail))
	}
}

// BodyFingerprint identifies a message's content for retry detection
// (store.Incoming.BodyFingerprint): the hex SHA-256 of its Envelopay JSON
// body in canonical form, so that the same body re-serialised (another
// client, another line wrapping) is still the same. No body → "".
func BodyFingerprint(body json.RawMessage) string {
	if len(body) == 0 {
		return ""
	}
	v, err := canonjson.Parse(body)
	if err != nil {
		return ""
	}
	c, err := canonjson.JS(v)
	if err != nil {
		return ""
	}
	h := sha256.Sum256(c)
	return hex.EncodeToString(h[:])
}

func str(raw json.RawMessage) string {
	var s string
	if len(raw) == 0 || json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}
