package mailin

import (
	"context"
	"fmt"
	"time"

	"github.com/envelopd/envelopd/dkim"
	"github.com/envelopd/envelopd/parse"
	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/protocols/tunnel"
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
}

// Analysis is what the stateless stages found in one raw message.
type Analysis struct {
	Result *parse.Result
	DKIM   []dkim.Result
	// Claims and Links are the tunnelled protocols' stateful facts, for the
	// store to check.
	Claims []protocols.Claim
	Links  []protocols.Link
}

// Analyze runs DKIM verification, the Envelopay parse and the
// tunnelled-protocol validators over raw. It never fails: every problem is
// recorded in the result's errors. ctx bounds DNS lookups.
func Analyze(ctx context.Context, raw []byte, opts AnalyzeOptions) *Analysis {
	a := &Analysis{DKIM: []dkim.Result{}}
	r := parse.Parse(raw, parse.Options{Lenient: opts.Lenient})
	a.Result = r
	if opts.Verifier != nil {
		res, err := opts.Verifier.Verify(ctx, raw)
		if err != nil {
			r.Errors = append(r.Errors, protocols.New(protocols.CodeDKIMFailed, "", "DKIM verification could not run: %v", err))
		} else {
			a.DKIM = res
			if dkim.Failed(res) {
				r.Errors = append(r.Errors, protocols.New(protocols.CodeDKIMFailed, "", "%s", dkimFailure(res)))
			}
		}
	}
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	topts := tunnel.Options{AICPKeys: opts.AICPKeys, Now: now}
	for i := range r.Attachments {
		att := &r.Attachments[i]
		if !tunnel.IsJSONPart(att.ContentType, att.Filename) {
			continue
		}
		rep := tunnel.Inspect(att.Data, att.ContentType, att.Filename, topts)
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
		// A tunnelled message that fails its own protocol's checks makes the
		// mail invalid as a whole: an agent must not act on it.
		for _, p := range rep.Errors {
			field := fmt.Sprintf("attachments[%d]", i)
			if p.Field != "" {
				field += "." + p.Field
			}
			r.Errors = append(r.Errors, protocols.Problem{Code: p.Code, Field: field, Message: p.Message})
		}
		if rep.Valid {
			a.Claims = append(a.Claims, rep.Claims...)
			a.Links = append(a.Links, rep.Links...)
		}
	}
	r.Valid = len(r.Errors) == 0
	return a
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
