package mailin

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/envelopd/envelopd/parse"
	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/store"
)

// PaymentOOPSStore is what PaymentOOPS needs of the store.
type PaymentOOPSStore interface {
	Message(ctx context.Context, id int64) (*store.Message, error)
	OwePaymentOOPS(ctx context.Context, id int64, plan *store.OOPSPlan, lim store.OOPSLimits, now time.Time) (*store.OOPSRecord, error)
}

// paymentProblem is the Envelopay error a rejected payment is answered
// with (Envelopay v0.2.0, OOPS error codes): tx_not_found for a
// transaction not found or reverted, amount_mismatch for one that does
// not pay what was wanted. false for a payment that is not rejected.
func paymentProblem(pay *store.Payment) (protocols.Problem, bool) {
	var code protocols.Code
	switch pay.State {
	case store.PaymentNotFound, store.PaymentFailed:
		code = protocols.CodeTxNotFound
	case store.PaymentMismatch:
		code = protocols.CodeAmountMismatch
	default:
		return protocols.Problem{}, false
	}
	return protocols.New(code, "proof", "payment %s on %s: %s", pay.State, pay.Chain, pay.Reason), true
}

// PaymentOOPS decides the courtesy OOPS a payment rejected after the mail
// was stored (mismatch, failed, not_found) is owed, by the rules of the
// ingest's OOPS: only to an authenticated sender (the payment's
// authenticated, decided at ingest), never for automated mail, only from
// a signing domain, within the store's rate limits, one per message. It
// returns the decision (nil when none was made: OOPS off, the payment not
// rejected, or the message decided already).
func (p *Pipeline) PaymentOOPS(ctx context.Context, st PaymentOOPSStore, pay store.Payment) (*store.OOPSRecord, error) {
	prob, ok := paymentProblem(&pay)
	if p.OOPS == nil || !ok {
		return nil, nil
	}
	m, err := st.Message(ctx, pay.ID)
	if err != nil {
		return nil, err
	}
	r := &parse.Result{}
	if len(m.Result) == 0 || json.Unmarshal(m.Result, r) != nil {
		return nil, nil // nothing to answer from
	}
	if r.MessageID == "" {
		r.MessageID = m.MessageID
	}
	to := ""
	if len(r.From) > 0 {
		to = strings.ToLower(r.From[0])
	}
	now := time.Now()
	if p.Now != nil {
		now = p.Now()
	}
	plan := &store.OOPSPlan{Code: prob.Code, To: to}
	from := p.oopsFrom(Meta{Mailbox: m.Mailbox, Rcpts: m.Recipients}, r)
	switch {
	case isAutomated(m.Raw, Meta{Source: "store"}, r):
		plan.Suppressed, plan.Detail = store.OOPSAutomated, "the message is automated (RFC 3834: Auto-Submitted, List-*, Precedence, multipart/report)"
	case !pay.Authenticated || to == "":
		plan.Suppressed = store.OOPSSenderUnverified
		plan.Detail = "the sender is not verified: no passing DKIM signature aligned with the From domain, no authenticated submission"
	case from == "":
		plan.Suppressed, plan.Detail = store.OOPSNoSigningDomain, "no domain to send it from: configure a DKIM signing domain (--dkim-domain, --dkim-config) or relay --domain"
	default:
		// Owed: the owed-OOPS worker composes and queues it.
		plan.From = from
	}
	return st.OwePaymentOOPS(ctx, pay.ID, plan, p.OOPSLimits, now)
}
