package senderauth

import (
	"context"
	"errors"
	"hash/fnv"
	"net"
	"strings"

	"golang.org/x/net/publicsuffix"

	"github.com/envelopd/envelopd/dkim"
)

// DMARC is the DMARC evaluation of one message (RFC 7489).
type DMARC struct {
	// Result is pass, fail, none (no policy record, or no From domain),
	// temperror (the record, or an identifier that could align, could
	// not be checked now) or permerror (a record that cannot be used).
	Result string `json:"result"`
	// Domain is the RFC5322.From domain evaluated.
	Domain string `json:"domain"`
	// Policy is the policy that applies to Domain: the record's p=, or
	// its sp= when the record was found at the organizational domain and
	// Domain is below it (§6.6.3). "" without a record.
	Policy string `json:"policy"`
	// Disposition is what the policy asks of this message (RFC 7489
	// §6.6.4 after pct= sampling): none, quarantine or reject when the
	// result is fail; none otherwise.
	Disposition string `json:"disposition"`
	// RecordDomain is where the record was found: Domain or its
	// organizational domain (the public-suffix list's registrable name).
	RecordDomain string `json:"record_domain,omitempty"`
	// Alignment modes of the record: "r" relaxed, "s" strict.
	DKIMAlignment string `json:"adkim,omitempty"`
	SPFAlignment  string `json:"aspf,omitempty"`
	// Aligned are the authenticated identifiers aligned with Domain
	// (§3.1): the d= of passing DKIM signatures and the SPF-authenticated
	// domain. Filled even without a record (alignment needs none).
	Aligned Aligned `json:"aligned"`
	// Reason says why the result is not pass.
	Reason string `json:"reason,omitempty"`
}

// Aligned are the identifiers aligned with the From domain.
type Aligned struct {
	DKIM []string `json:"dkim"`
	SPF  string   `json:"spf"`
}

// OrgDomain returns the organizational domain of a domain name (RFC 7489
// §3.2): the public suffix plus one label, by the public-suffix list
// (golang.org/x/net/publicsuffix); the name itself when it is a public
// suffix or not a valid name.
func OrgDomain(d string) string {
	d = normDomain(d)
	org, err := publicsuffix.EffectiveTLDPlusOne(d)
	if err != nil {
		return d
	}
	return org
}

// IsAligned reports whether an authenticated domain id is aligned with
// the From domain from (RFC 7489 §3.1): equal in strict mode ("s"), the
// same organizational domain in relaxed mode ("r" or anything else).
func IsAligned(id, from, mode string) bool {
	id, from = normDomain(id), normDomain(from)
	if id == "" || from == "" {
		return false
	}
	if id == from {
		return true
	}
	return mode != "s" && OrgDomain(id) == OrgDomain(from)
}

func normDomain(d string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(d)), ".")
}

// LookupRecord fetches and parses the DMARC record of exactly domain
// (_dmarc.domain, no organizational-domain fallback): nil, nil when there
// is none.
func LookupRecord(ctx context.Context, r Resolver, domain string) (*Record, error) {
	return lookupRecord(ctx, r, normDomain(domain))
}

// lookupRecord fetches and parses _dmarc.domain: (nil, nil) when there is
// no DMARC record (none, or more than one: §6.6.3 step 5), an error
// wrapping errTemp when DNS failed for now.
func lookupRecord(ctx context.Context, r Resolver, domain string) (*Record, error) {
	txts, err := r.LookupTXT(ctx, "_dmarc."+domain)
	if err != nil {
		var de *net.DNSError
		if errors.As(err, &de) && de.IsNotFound {
			return nil, nil
		}
		return nil, errors.Join(errTemp, err)
	}
	var recs []string
	for _, t := range txts {
		// §6.6.3 step 3: records not starting with v=DMARC1 are dropped.
		if v, _, _ := strings.Cut(t, ";"); strings.EqualFold(strings.ReplaceAll(v, " ", ""), "v=DMARC1") {
			recs = append(recs, t)
		}
	}
	if len(recs) != 1 {
		return nil, nil
	}
	return ParseRecord(recs[0])
}

var errTemp = errors.New("temporary DNS failure")

// CheckDMARC evaluates DMARC for the From domain from, given the SPF
// outcome (nil when the message came without an SMTP transaction) and the
// DKIM results. sample is what pct= sampling hashes (the Message-ID), so
// that the same message always gets the same disposition.
func CheckDMARC(ctx context.Context, r Resolver, from string, s *SPF, results []dkim.Result, sample string) DMARC {
	from = normDomain(from)
	out := DMARC{Result: None, Disposition: "none", Domain: from, Aligned: Aligned{DKIM: []string{}}}
	if !isDomain(from) {
		out.Reason = "no From domain"
		return out
	}
	// §6.6.3: the From domain's record, else the organizational domain's.
	rec, err := lookupRecord(ctx, r, from)
	where := from
	if err == nil && rec == nil {
		if org := OrgDomain(from); org != from {
			rec, err = lookupRecord(ctx, r, org)
			where = org
		}
	}
	adkim, aspf := "r", "r"
	if rec != nil {
		adkim, aspf = rec.DKIMAlignment, rec.SPFAlignment
	}
	// Alignment (§3.1), with the record's modes (relaxed without one).
	tempAligned := false
	for _, d := range results {
		if !IsAligned(d.Domain, from, adkim) {
			continue
		}
		switch d.Result {
		case dkim.Pass:
			out.Aligned.DKIM = append(out.Aligned.DKIM, normDomain(d.Domain))
		case dkim.TempError:
			tempAligned = true
		}
	}
	if s != nil && IsAligned(s.Domain, from, aspf) {
		switch s.Result {
		case Pass:
			out.Aligned.SPF = normDomain(s.Domain)
		case TempError:
			tempAligned = true
		}
	}
	pass := len(out.Aligned.DKIM) > 0 || out.Aligned.SPF != ""
	switch {
	case errors.Is(err, errTemp):
		out.Result, out.Reason = TempError, "the DMARC record could not be fetched: "+reason(err)
		return out
	case err != nil:
		out.Result, out.Reason = PermError, reason(err)
		return out
	case rec == nil:
		out.Reason = "no DMARC record for " + from + " or its organizational domain"
		return out
	}
	out.RecordDomain, out.DKIMAlignment, out.SPFAlignment = where, adkim, aspf
	out.Policy = rec.Policy
	if where != from && rec.SubdomainPolicy != "" {
		out.Policy = rec.SubdomainPolicy
	}
	switch {
	case pass:
		out.Result = Pass
	case tempAligned:
		out.Result, out.Reason = TempError, "an identifier that could align could not be checked now"
	default:
		out.Result, out.Reason = Fail, "no passing DKIM signature or SPF domain aligned with "+from
		out.Disposition = disposition(out.Policy, rec.Percent, sample)
	}
	return out
}

// disposition applies pct= (§6.6.4): a message outside the sampled
// percentage gets the next less strict policy.
func disposition(policy string, pct int, sample string) string {
	if pct < 100 {
		h := fnv.New32a()
		h.Write([]byte(sample))
		if int(h.Sum32()%100) >= pct {
			switch policy {
			case "reject":
				return "quarantine"
			case "quarantine":
				return "none"
			}
		}
	}
	return policy
}
