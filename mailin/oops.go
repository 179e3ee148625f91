package mailin

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/envelopd/envelopd/dkim"
	"github.com/envelopd/envelopd/message"
	"github.com/envelopd/envelopd/parse"
	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/runner"
	"github.com/envelopd/envelopd/senderauth"
	"github.com/envelopd/envelopd/store"
)

// oopsTerms returns what the store needs, as data, to decide with the
// final outcome whether the message is owed a courtesy OOPS and to record
// it (store.OOPSTerms): the codes answered (OOPSCodes), to whom and from
// where, or why none is sent whatever the outcome. The store records an
// allowed OOPS as owed, a row in the message's own transaction; the
// owed-OOPS worker (OOPSWorker) composes, signs and queues it after the
// commit, so a crash between the two loses nothing.
//
// No backscatter: an OOPS goes only to a verified sender (senderVerified)
// and only from an address at a domain the operator signs for (oopsFrom);
// otherwise the terms say suppressed, with the reason recorded on the
// stored message. automated is the RFC 3834 loop check of Prepare.
func (p *Pipeline) oopsTerms(a *message.Analysis, meta Meta, automated bool) *store.OOPSTerms {
	r := a.Result
	to := ""
	if len(r.From) > 0 {
		to = strings.ToLower(r.From[0])
	}
	t := &store.OOPSTerms{Codes: OOPSCodes, To: to}
	from := p.oopsFrom(meta, r)
	switch how := senderVerified(a.Sender, a.DKIM, to, meta.User); {
	case automated:
		t.Suppressed, t.Detail = store.OOPSAutomated, "the message is automated (RFC 3834: Auto-Submitted, List-*, Precedence, multipart/report or an empty MAIL FROM)"
	case meta.NoOOPS != "":
		t.Suppressed, t.Detail = meta.NoOOPS, "another copy of this mail was answered"
	case how == "":
		t.Suppressed = store.OOPSSenderUnverified
		t.Detail = "the sender is not authenticated: no DMARC pass, no passing DKIM signature aligned with the From domain, no trusted ARC chain, no authenticated submission"
		if to == "" {
			t.Detail = "the message has no From address to answer"
		}
	case from == "":
		t.Suppressed, t.Detail = store.OOPSNoSigningDomain, "no domain to send it from: configure a DKIM signing domain (--dkim-domain, --dkim-config) or relay --domain"
	default:
		t.From = from
	}
	return t
}

// composeOOPS builds and signs the courtesy OOPS answering r's problem
// prob, from from to to, with its stored copy (mailbox's Sent view).
func (p *Pipeline) composeOOPS(r *parse.Result, prob protocols.Problem, from, to, mailbox string, now time.Time) (*store.Outgoing, json.RawMessage, error) {
	raw, err := p.OOPS(r, prob, from)
	if err != nil {
		p.log().Warn("courtesy OOPS not composed", "err", err, "message_id", r.MessageID)
		return nil, nil, err
	}
	oa := message.Analyze(context.Background(), raw, message.AnalyzeOptions{Now: now})
	cp := message.Incoming(oa, raw, store.DirOut)
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
	// MessagesChanged wakes the worker at each commit that may have
	// recorded an owed OOPS.
	MessagesChanged() <-chan struct{}
	store.OOPSLog
}

// OOPSWorker composes, signs and queues the courtesy OOPS the store
// recorded as owed (store.OwedOOPS: rows written in the transaction that
// decided them, the message's ingest or its payment's rejection). It runs
// on runner.Loop: it claims owed rows with a lease (ClaimOwedOOPS), at
// start, when woken by a commit (the store's MessagesChanged, when it has
// one) and every Interval; rebuilds each OOPS from the stored message
// (its parse result and errors) with the Pipeline's composer; and settles
// it with ResolveOOPS, which queues it and marks the row in one
// transaction, so each OOPS is queued exactly once, even with several
// nodes running this worker. A worker stopped between the claim and the
// compose gives the row back (due at once); one killed leaves it to be
// claimed again when its lease ends.
type OOPSWorker struct {
	Pipeline *Pipeline
	Store    OwedOOPSStore
	// Interval is how long an idle worker waits before it looks again
	// (default 1 min; a commit wakes it at once). Lease is how long a
	// claimed row is hidden from other workers, the wait before a retry
	// when settling failed (default 2 min).
	Interval, Lease time.Duration
	// Metrics, when set, counts claims and outcomes as "oops".
	Metrics *runner.Metrics
	// Now is the clock of claims (default time.Now).
	Now func() time.Time
}

func (w *OOPSWorker) loop() *runner.Loop[store.OwedOOPS] {
	l := &runner.Loop[store.OwedOOPS]{Name: "oops", Worker: oopsJobs{w}, Batch: 32, Parallel: 4,
		Interval: w.Interval, Now: w.Now, Metrics: w.Metrics, Logger: w.Pipeline.log()}
	if l.Interval <= 0 {
		l.Interval = time.Minute
	}
	l.Wake = w.Store.MessagesChanged
	return l
}

// Run composes owed OOPS until ctx ends.
func (w *OOPSWorker) Run(ctx context.Context) error {
	return w.loop().Run(ctx)
}

// RunOnce settles every OOPS owed now and returns how many it settled
// (or tried to).
func (w *OOPSWorker) RunOnce(ctx context.Context) (int, error) {
	l := w.loop()
	total := 0
	for {
		tried, claimed, err := l.Once(ctx)
		total += tried
		if err != nil || claimed < l.Batch {
			return total, err
		}
	}
}

// oopsJobs is the owed OOPS as a runner.Worker.
type oopsJobs struct{ w *OOPSWorker }

func (j oopsJobs) Claim(ctx context.Context, now time.Time, limit int) ([]store.OwedOOPS, error) {
	lease := j.w.Lease
	if lease <= 0 {
		lease = 2 * time.Minute
	}
	return j.w.Store.ClaimOwedOOPS(ctx, now, lease, limit)
}

// Release gives back claimed OOPS not yet composed when the worker stops,
// due at once for the next start (or another node).
func (j oopsJobs) Release(ctx context.Context, owed []store.OwedOOPS) {
	for _, o := range owed {
		if err := j.w.Store.ReleaseOwedOOPS(ctx, o.ID, time.Time{}); err != nil {
			j.w.Pipeline.log().Warn("owed OOPS release (composed after the lease)", "message", o.MessageID, "err", err)
		}
	}
}

// Attempt composes and queues one owed OOPS: Succeeded when queued (or
// settled already by another worker), Dropped when it cannot be composed
// (recorded as compose_failed), Retried after the lease when the store
// failed.
func (j oopsJobs) Attempt(ctx context.Context, o store.OwedOOPS) (runner.Outcome, error) {
	// The mail is stored: finish its OOPS even when the worker stops.
	return j.w.Pipeline.settleOwed(context.WithoutCancel(ctx), j.w.Store, o)
}

// settleOwed composes the owed OOPS o and settles it (ResolveOOPS).
func (p *Pipeline) settleOwed(ctx context.Context, st OwedOOPSStore, o store.OwedOOPS) (runner.Outcome, error) {
	m, err := st.Message(ctx, o.MessageID)
	if err != nil {
		return runner.Retried, err
	}
	msg, body, why := p.recompose(m, o)
	if _, err := st.ResolveOOPS(ctx, o, msg, body, why); err != nil {
		return runner.Retried, err
	}
	if msg == nil {
		p.log().Warn("courtesy OOPS not composed", "message", o.MessageID, "code", o.Code, "reason", why)
		return runner.Dropped, nil
	}
	return runner.Succeeded, nil
}

// ComposeOwedOOPS settles the OOPS owed since before olderThan, without a
// claim (a command's one pass, tests), and returns how many it settled.
func (p *Pipeline) ComposeOwedOOPS(ctx context.Context, st OwedOOPSStore, olderThan time.Time) (int, error) {
	owed, err := st.OwedOOPSList(ctx, olderThan, 100)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, o := range owed {
		if _, err := p.settleOwed(ctx, st, o); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// recompose builds the OOPS owed to stored message m from what the store
// kept (its parse result, the error answered, the sender decided), or
// says why it cannot.
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
	from := o.From // decided with the OOPS; rows from before say none
	if from == "" {
		from = p.oopsFrom(Meta{Mailbox: m.Mailbox}, r)
	}
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
