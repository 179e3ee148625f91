package mailin

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/envelopd/envelopd/dkim"
	"github.com/envelopd/envelopd/parse"
	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/senderauth"
	"github.com/envelopd/envelopd/store"
)

// oopsFunc returns the store callback that decides, inside the ingest
// transaction and with the final outcome, whether a courtesy OOPS is owed
// and to whom, and composes it when the store's limits allow. The OOPS is
// queued atomically with the message: a crash cannot store the one without
// the other.
//
// Courtesy OOPS without backscatter: an OOPS goes only to a
// verified sender (senderVerified) and only from an address at a domain
// the operator signs for (oopsFrom); otherwise the plan is recorded as
// suppressed, with its reason, on the stored message. automated is the
// RFC 3834 loop check of Prepare.
func (p *Pipeline) oopsFunc(a *Analysis, meta Meta, now time.Time, automated bool) func(store.Outcome) *store.OOPSPlan {
	r := a.Result
	return func(out store.Outcome) *store.OOPSPlan {
		if out.Redelivery {
			return nil
		}
		prob, ok := parse.OOPSOwed(r.Type, out.Errors)
		if !ok {
			return nil
		}
		to := ""
		if len(r.From) > 0 {
			to = strings.ToLower(r.From[0])
		}
		plan := &store.OOPSPlan{Code: prob.Code, To: to}
		from := p.oopsFrom(meta, r)
		switch how := senderVerified(a.Sender, a.DKIM, to, meta.User); {
		case automated:
			plan.Suppressed, plan.Detail = store.OOPSAutomated, "the message is automated (RFC 3834: Auto-Submitted, List-*, Precedence, multipart/report or an empty MAIL FROM)"
		case meta.NoOOPS != "":
			plan.Suppressed, plan.Detail = meta.NoOOPS, "another copy of this mail was answered"
		case how == "":
			plan.Suppressed = store.OOPSSenderUnverified
			plan.Detail = "the sender is not authenticated: no DMARC pass, no passing DKIM signature aligned with the From domain, no trusted ARC chain, no authenticated submission"
			if to == "" {
				plan.Detail = "the message has no From address to answer"
			}
		case from == "":
			plan.Suppressed, plan.Detail = store.OOPSNoSigningDomain, "no domain to send it from: configure a DKIM signing domain (--dkim-domain, --dkim-config) or relay --domain"
		}
		if plan.Suppressed != "" {
			return plan
		}
		plan.Compose = func() (*store.Outgoing, json.RawMessage, error) {
			return p.composeOOPS(r, prob, from, to, meta.Mailbox, now)
		}
		return plan
	}
}

// composeOOPS builds and signs the courtesy OOPS answering r's problem
// prob, from from to to, with its stored copy (mailbox's Sent view).
func (p *Pipeline) composeOOPS(r *parse.Result, prob protocols.Problem, from, to, mailbox string, now time.Time) (*store.Outgoing, json.RawMessage, error) {
	raw, err := p.OOPS(r, prob, from)
	if err != nil {
		p.log().Warn("courtesy OOPS not composed", "err", err, "message_id", r.MessageID)
		return nil, nil, err
	}
	oa := Analyze(context.Background(), raw, AnalyzeOptions{Now: now})
	cp := Incoming(oa, raw, store.DirOut)
	cp.Mailbox = mailbox
	cp.ReceivedAt = now.UTC()
	return &store.Outgoing{
		From:       from,
		Recipients: []string{to},
		Raw:        raw,
		MessageID:  oa.Result.MessageID,
		Kind:       "oops",
		Copy:       cp,
		Expires:    now.Add(24 * time.Hour),
	}, oa.Result.Body, nil
}

// OwedOOPSStore is what the owed-OOPS worker needs of the store.
type OwedOOPSStore interface {
	Message(ctx context.Context, id int64) (*store.Message, error)
	OwedOOPSList(ctx context.Context, olderThan time.Time, limit int) ([]store.OwedOOPS, error)
	ResolveOOPS(ctx context.Context, owed store.OwedOOPS, msg *store.Outgoing, body json.RawMessage, reason string) (*store.OOPSRecord, error)
}

// owedGrace is how old an owed OOPS must be before the worker takes it
// over: the ingest that decided it composes it right after its commit.
const owedGrace = time.Minute

// RunOwedOOPS composes and queues the courtesy OOPS whose ingest died
// between committing the mail and queueing its OOPS (store.OwedOOPS),
// every interval until ctx ends. The OOPS is rebuilt from the stored
// message (its parse result and errors); ResolveOOPS settles each once,
// even with several nodes running this worker.
func (p *Pipeline) RunOwedOOPS(ctx context.Context, st OwedOOPSStore, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if n, err := p.ComposeOwedOOPS(ctx, st, time.Now().Add(-owedGrace)); err != nil && ctx.Err() == nil {
			p.log().Error("owed courtesy OOPS", "err", err)
		} else if n > 0 {
			p.log().Info("owed courtesy OOPS composed", "count", n)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// ComposeOwedOOPS settles the OOPS owed since before olderThan and
// returns how many it settled.
func (p *Pipeline) ComposeOwedOOPS(ctx context.Context, st OwedOOPSStore, olderThan time.Time) (int, error) {
	owed, err := st.OwedOOPSList(ctx, olderThan, 100)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, o := range owed {
		m, err := st.Message(ctx, o.MessageID)
		if err != nil {
			return n, err
		}
		msg, body, why := p.recompose(m, o)
		if _, err := st.ResolveOOPS(ctx, o, msg, body, why); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// recompose rebuilds the OOPS owed to stored message m, or says why it
// cannot.
func (p *Pipeline) recompose(m *store.Message, o store.OwedOOPS) (*store.Outgoing, json.RawMessage, string) {
	r := &parse.Result{}
	if len(m.Result) == 0 || json.Unmarshal(m.Result, r) != nil {
		return nil, nil, "the stored message has no parse result"
	}
	if r.MessageID == "" {
		r.MessageID = m.MessageID
	}
	var prob protocols.Problem
	found := false
	for _, e := range m.Errors {
		if e.Code == o.Code {
			prob, found = e, true
			break
		}
	}
	if !found && m.Payment != nil {
		// An OOPS for a payment rejected after the mail was stored
		// (PaymentOOPS) answers the payment, not an error of the mail.
		if pp, ok := paymentProblem(m.Payment); ok && pp.Code == o.Code {
			prob, found = pp, true
		}
	}
	if !found {
		return nil, nil, "the stored message no longer carries " + string(o.Code)
	}
	from := p.oopsFrom(Meta{Mailbox: m.Mailbox}, r)
	if from == "" {
		return nil, nil, "no domain to send it from"
	}
	msg, body, err := p.composeOOPS(r, prob, from, o.To, m.Mailbox, o.At)
	if err != nil {
		return nil, nil, err.Error()
	}
	return msg, body, ""
}

// senderVerified says how the From address from is verified, or "" when it
// is not: "auth" when the authenticated submission user is that
// address; otherwise how the sender verdict v authenticated from's domain
// ("dmarc", "dkim" or "arc", senderauth.Verdict.AuthenticatedBy). Without
// a verdict (no sender checks configured) a passing DKIM signature whose
// d= is aligned with from's domain (RFC 7489 §3.1.1 relaxed alignment, by
// the public-suffix list) verifies it as "dkim".
func senderVerified(v *senderauth.Verdict, results []dkim.Result, from, user string) string {
	if from == "" {
		return ""
	}
	if user != "" && strings.EqualFold(user, from) {
		return "auth"
	}
	if v != nil {
		if v.Authenticated(from) {
			return v.AuthenticatedBy
		}
		return ""
	}
	fd := domainOf(from)
	for _, r := range results {
		if r.Result == dkim.Pass && senderauth.IsAligned(r.Domain, fd, "r") {
			return "dkim"
		}
	}
	return ""
}

// oopsFrom is the address a courtesy OOPS is sent from: the first envelope
// recipient (or, without one, the first To) when it is at a domain the
// operator signs for (OOPSDomains), else OOPSFrom, else postmaster at the
// first of OOPSDomains; "" when there is none — an OOPS is never sent
// from an arbitrary recipient's domain.
func (p *Pipeline) oopsFrom(meta Meta, r *parse.Result) string {
	first := ""
	if len(meta.Rcpts) > 0 {
		first = meta.Rcpts[0]
	} else if len(r.To) > 0 {
		first = r.To[0]
	}
	first = strings.ToLower(first)
	if first != "" && slices.Contains(p.OOPSDomains, domainOf(first)) {
		return first
	}
	if p.OOPSFrom != "" {
		return strings.ToLower(p.OOPSFrom)
	}
	if len(p.OOPSDomains) > 0 {
		return "postmaster@" + p.OOPSDomains[0]
	}
	return ""
}

// isAutomated reports whether a message must never get an automatic reply
// (RFC 3834 §2 and §3.1.1; RFC 2369 List-* headers; RFC 6522
// multipart/report; an OOPS itself, so two envelopd instances cannot loop).
func isAutomated(raw []byte, meta Meta, r *parse.Result) bool {
	if r.Type == "oops" {
		return true
	}
	if meta.Source == "smtp" && meta.MailFrom == "" {
		return true
	}
	automated := false
	eachHeader(raw, func(name, value string) bool {
		v := strings.ToLower(strings.TrimSpace(value))
		switch {
		case strings.EqualFold(name, "Auto-Submitted"):
			if i := strings.IndexByte(v, ';'); i >= 0 {
				v = strings.TrimSpace(v[:i])
			}
			automated = v != "no"
		case len(name) > 5 && strings.EqualFold(name[:5], "List-"):
			automated = true
		case strings.EqualFold(name, "Precedence"):
			automated = v == "bulk" || v == "list" || v == "junk"
		case strings.EqualFold(name, "Content-Type"):
			automated = strings.HasPrefix(v, "multipart/report")
		case strings.EqualFold(name, "Return-Path"):
			automated = v == "<>"
		}
		return !automated
	})
	return automated
}

// eachHeader calls fn for each top-level header field of raw (unfolded),
// until fn returns false or the header section ends.
func eachHeader(raw []byte, fn func(name, value string) bool) {
	var name string
	var value []byte
	flush := func() bool {
		if name == "" {
			return true
		}
		ok := fn(name, string(value))
		name, value = "", value[:0]
		return ok
	}
	for len(raw) > 0 {
		line := raw
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			line, raw = raw[:i], raw[i+1:]
		} else {
			raw = nil
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) == 0 {
			break
		}
		if line[0] == ' ' || line[0] == '\t' {
			value = append(value, ' ')
			value = append(value, bytes.TrimSpace(line)...)
			continue
		}
		if !flush() {
			return
		}
		if i := bytes.IndexByte(line, ':'); i > 0 {
			name = string(bytes.TrimSpace(line[:i]))
			value = append(value[:0], bytes.TrimSpace(line[i+1:])...)
		}
	}
	flush()
}
