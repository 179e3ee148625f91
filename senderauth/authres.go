package senderauth

import (
	"strings"

	"github.com/emersion/go-msgauth/authres"

	"github.com/envelopd/envelopd/dkim"
)

// AuthResults returns the value of the Authentication-Results header field
// (RFC 8601) for a message's verdict and DKIM results, built with
// go-msgauth/authres, e.g.
//
//	mx.example.org; spf=pass smtp.mailfrom=example.com smtp.helo=mx.example.com;
//	 dkim=pass header.a=rsa-sha256 header.d=example.com header.s=s1;
//	 dmarc=pass header.from=example.com policy.dmarc=reject; arc=none
//
// (one line; RFC 7489 §11.2 registers policy.dmarc; RFC 8617 §10.1 the
// arc method). A result other than pass carries its reason.
func AuthResults(authServID string, results []dkim.Result, v *Verdict) string {
	var rs []authres.Result
	if v != nil {
		rs = append(rs, &authres.SPFResult{Value: authres.ResultValue(v.SPF.Result), Reason: v.SPF.Reason,
			From: v.SPF.Domain, Helo: v.SPF.HELODomain})
	}
	if len(results) == 0 {
		rs = append(rs, &authres.DKIMResult{Value: authres.ResultNone})
	}
	for _, r := range results {
		rs = append(rs, &authres.GenericResult{Method: "dkim", Value: authres.ResultValue(r.Result), Params: map[string]string{
			"reason": r.Error, "header.d": r.Domain, "header.s": r.Selector, "header.a": r.Algorithm}})
	}
	if v != nil {
		rs = append(rs, &authres.GenericResult{Method: "dmarc", Value: authres.ResultValue(v.DMARC.Result), Params: map[string]string{
			"reason": v.DMARC.Reason, "header.from": v.DMARC.Domain, "policy.dmarc": v.DMARC.Policy}})
		rs = append(rs, &authres.GenericResult{Method: "arc", Value: authres.ResultValue(v.ARC.Result), Params: map[string]string{
			"reason": v.ARC.Reason}})
	}
	var b strings.Builder
	b.WriteString(authServID)
	for _, r := range rs {
		// Format with an empty identity gives "; method=... params" and a
		// trailing space when there are no params.
		b.WriteString(strings.TrimRight(authres.Format("", []authres.Result{r}), " "))
	}
	return b.String()
}
