package mailin

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/envelopd/envelopd/dkim"
	"github.com/envelopd/envelopd/message"
	"github.com/envelopd/envelopd/parse"
	"github.com/envelopd/envelopd/protocols"
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
// stages (message.Analyze), then one store transaction. It is safe for concurrent
// use.
type Pipeline struct {
	Store    store.Ingester
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
	HandleMessage(ctx context.Context, a *message.Analysis, out store.Outcome) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, a *message.Analysis, out store.Outcome) error

// HandleMessage calls f.
func (f HandlerFunc) HandleMessage(ctx context.Context, a *message.Analysis, out store.Outcome) error {
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
func (p *Pipeline) Prepare(ctx context.Context, raw []byte, meta Meta) (*message.Analysis, *store.Incoming) {
	now := time.Now()
	if p.Now != nil {
		now = p.Now()
	}
	var keys map[string][]byte
	if p.Keys != nil {
		keys = p.Keys(ctx)
	}
	a := message.Analyze(ctx, raw, message.AnalyzeOptions{Verifier: p.Verifier, Lenient: p.Lenient, AICPKeys: keys, Now: now, Limits: p.Limits,
		Sender: p.Sender, SPF: meta.SPF})
	if a.Withhold != "" {
		raw = message.Withheld(raw, a.Withhold)
	}
	in := message.Incoming(a, raw, store.DirIn)
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
		in.OOPS = p.oopsTerms(a, meta, isAutomated(raw, meta, a.Result))
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
