package message

import (
	"context"
	"fmt"
	"time"

	"github.com/envelopd/envelopd/dkim"
	"github.com/envelopd/envelopd/parse"
	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/protocols/tunnel"
	"github.com/envelopd/envelopd/senderauth"
)

// AnalyzeOptions configures the stateless stages.
type AnalyzeOptions struct {
	// Verifier verifies DKIM; nil skips verification (dkim is then empty).
	Verifier *dkim.Verifier
	// Lenient selects the reference implementation's looser subject rules.
	Lenient bool
	// AICPKeys maps AICP handles to raw Ed25519 public keys.
	AICPKeys map[string][]byte
	// Now is the receipt time for timestamp windows.
	Now time.Time
	// Limits bound the analysis of one message (zero fields: the
	// defaults, parse.Default*).
	Limits parse.Limits
	// Sender, when set, computes the sender verdict (SPF, DMARC, ARC);
	// SPF is the transaction's SPF outcome (nil: not received over SMTP).
	Sender *senderauth.Checker
	SPF    *senderauth.SPF
}

// Analysis is what the stateless stages found in one raw message.
type Analysis struct {
	Result *parse.Result
	DKIM   []dkim.Result
	// Claims and Links are the tunnelled protocols' stateful facts, for the
	// store to check.
	Claims []protocols.Claim
	Links  []protocols.Link
	Checks []protocols.StateCheck
	Sets   []protocols.StateSet
	// Withhold, when not "", says why the mail's body must not be stored
	// (a tunnelled document that must never be persisted).
	Withhold string
	// Sender is the sender verdict; nil when it was not computed.
	Sender *senderauth.Verdict

	// resultJSON is Result's JSON as Analyze left it (Incoming stores it
	// rather than marshalling the result again); nil: marshal Result.
	resultJSON []byte
}

// Analyze runs DKIM verification, the Envelopay parse and the
// tunnelled-protocol validators over raw. It never fails: every problem is
// recorded in the result's errors. ctx bounds DNS lookups.
func Analyze(ctx context.Context, raw []byte, opts AnalyzeOptions) *Analysis {
	a := &Analysis{Result: parse.Parse(raw, parse.Options{Lenient: opts.Lenient, Limits: opts.Limits}), DKIM: []dkim.Result{}}
	if opts.Verifier != nil {
		a.DKIM = VerifyDKIM(ctx, opts.Verifier, raw, a.Result)
	}
	if opts.Sender != nil {
		r := a.Result
		a.Sender = opts.Sender.Verdict(ctx, senderauth.Input{From: r.From, SPF: opts.SPF, DKIM: a.DKIM, Raw: raw, Sample: r.MessageID})
		if a.Sender.AuthenticatedBy == "arc" {
			forgiveForwardedDKIM(r, a.Sender.ARC.TrustedSealer)
		}
	}
	st := InspectAttachmentsWithin(a.Result, tunnel.Options{AICPKeys: opts.AICPKeys, Now: opts.Now}, opts.Limits)
	a.Claims, a.Links, a.Checks, a.Sets, a.Withhold = st.Claims, st.Links, st.Checks, st.Sets, st.Withhold
	// Valid and the oops preview reflect the DKIM and attachment problems
	// too (the preview is the body serve sends, parse.OOPSBody).
	a.Result.Revalidate(opts.Lenient)
	// What is stored about the message is O(its size).
	js, cut := a.Result.BoundJSON(opts.Limits.OutputLimit(len(raw)))
	if cut {
		a.Result.Valid = len(a.Result.Errors) == 0
	} else {
		a.resultJSON = js
	}
	return a
}

// VerifyDKIM verifies raw's DKIM signatures and records a failure on r as
// dkim_failed (Envelopay v0.2.0 "DKIM": receivers should verify; it is not
// a prerequisite, so the message is still parsed and kept).
func VerifyDKIM(ctx context.Context, v *dkim.Verifier, raw []byte, r *parse.Result) []dkim.Result {
	res, err := v.Verify(ctx, raw)
	if err != nil {
		r.Errors = append(r.Errors, protocols.New(protocols.CodeDKIMFailed, "", "DKIM verification could not run: %v", err))
		return []dkim.Result{}
	}
	if dkim.Failed(res) {
		r.Errors = append(r.Errors, protocols.New(protocols.CodeDKIMFailed, "", "%s", dkimFailure(res)))
	}
	return res
}

// forgiveForwardedDKIM turns dkim_failed into a warning: a trusted ARC
// sealer vouches that the From domain's signature passed when the mail
// reached it (RFC 8617 §7.2), so the failure is the forwarding's doing.
func forgiveForwardedDKIM(r *parse.Result, sealer string) {
	kept := r.Errors[:0]
	for _, e := range r.Errors {
		if e.Code == protocols.CodeDKIMFailed {
			e.Message += " (forwarded: the trusted ARC sealer " + sealer + " vouches for the From domain)"
			r.Warnings = append(r.Warnings, e)
			continue
		}
		kept = append(kept, e)
	}
	r.Errors = kept
}

// InspectAttachments runs the tunnelled-protocol validators over r's JSON
// attachments, fills their protocol, valid, errors and summary, and copies
// their problems onto r (field "attachments[N]…"): a tunnelled message that
// fails its own protocol's checks makes the mail invalid as a whole, so an
// agent never acts on it. It returns the valid ones' stateful facts
// (claims, links, state checks and sets) merged into one Report.
func InspectAttachments(r *parse.Result, opts tunnel.Options) protocols.Report {
	return InspectAttachmentsWithin(r, opts, parse.Limits{})
}

// InspectAttachmentsWithin is InspectAttachments under lim's JSON limits: a
// JSON part larger than MaxJSONBytes or nested deeper than MaxJSONDepth is
// not parsed; it gets json_too_large or json_too_deep instead.
func InspectAttachmentsWithin(r *parse.Result, opts tunnel.Options, lim parse.Limits) protocols.Report {
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	var all protocols.Report
	for i := range r.Attachments {
		att := &r.Attachments[i]
		if !tunnel.IsJSONPart(att.ContentType, att.Filename) {
			continue
		}
		var rep protocols.Report
		if p := lim.CheckJSON(att.Data, ""); p != nil {
			rep = protocols.Report{Errors: protocols.Problems{*p}}
		} else {
			rep = tunnel.Inspect(att.Data, att.ContentType, att.Filename, opts)
		}
		if rep.Withhold != "" && all.Withhold == "" {
			all.Withhold = rep.Withhold
		}
		var proto *string
		if rep.Protocol != "" {
			p := rep.Protocol
			proto = &p
		}
		valid := rep.Valid
		att.Protocol, att.Valid, att.Errors, att.Summary = proto, &valid, rep.Errors, rep.Summary
		if att.Errors == nil {
			att.Errors = protocols.Problems{}
		}
		for _, p := range rep.Errors {
			field := fmt.Sprintf("attachments[%d]", i)
			if p.Field != "" {
				field += "." + p.Field
			}
			r.Errors = append(r.Errors, protocols.Problem{Code: p.Code, Field: field, Message: p.Message})
		}
		if rep.Valid {
			all.Claims = append(all.Claims, rep.Claims...)
			all.Links = append(all.Links, rep.Links...)
			all.Checks = append(all.Checks, rep.Checks...)
			all.Sets = append(all.Sets, rep.Sets...)
		}
	}
	return all
}

func dkimFailure(res []dkim.Result) string {
	for _, d := range res {
		if d.Result != "pass" {
			msg := fmt.Sprintf("DKIM signature of %s (selector %s) did not verify: %s", d.Domain, d.Selector, d.Result)
			if d.Error != "" {
				msg += ": " + d.Error
			}
			return msg
		}
	}
	return "DKIM verification failed"
}
