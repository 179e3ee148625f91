package senderauth

import (
	"context"
	"net"
	"strings"
	"time"

	"github.com/envelopd/envelopd/internal/spf"

	"github.com/envelopd/envelopd/dkim"
)

// Result words (RFC 7208 §2.6, RFC 8601 §2.7): SPF's, DMARC's and ARC's;
// those DKIM shares are package dkim's.
const (
	None      = "none"
	SoftFail  = "softfail"
	Neutral   = dkim.Neutral
	Pass      = dkim.Pass
	Fail      = dkim.Fail
	TempError = dkim.TempError
	PermError = dkim.PermError
)

// CheckTimeout bounds one SPF evaluation (both identities) and one
// verdict's DMARC and ARC lookups, whatever each lookup's own timeout.
const CheckTimeout = 20 * time.Second

// SPF is the outcome of the SPF checks of one SMTP transaction (RFC 7208):
// the MAIL FROM identity (§2.4; postmaster@ the HELO name for the null
// reverse-path) and the HELO identity (§2.3).
type SPF struct {
	// Result is the RFC 7208 result word for the MAIL FROM identity.
	Result string `json:"result"`
	// Domain is the domain the MAIL FROM identity was checked for: the
	// reverse-path's domain, or the HELO name when it is null. It is the
	// SPF identifier DMARC aligns (RFC 7489 §3.1.2).
	Domain string `json:"domain"`
	// HELO is the result word for the HELO identity ("none" when the HELO
	// name is not a domain, e.g. an address literal).
	HELO string `json:"helo"`
	// HELODomain is the HELO name checked.
	HELODomain string `json:"helo_domain,omitempty"`
	// Reason says why the result is not pass (the library's words), "" on
	// pass.
	Reason string `json:"reason,omitempty"`
}

// CheckSPF evaluates SPF for a client at ip that said HELO/EHLO helo and
// MAIL FROM mailFrom ("" for the null reverse-path), with internal/spf's
// check_host() (blitiri.com.ar/go/spf, patched) over r: 10 DNS-querying
// terms and 2 void lookups at most per check (RFC 7208 §4.6.4), macros
// (§7) included; every record is first checked whole against §12's
// grammar (ValidateSPF), so that a syntax error anywhere gives permerror
// (§4.6). ctx bounds every lookup.
func CheckSPF(ctx context.Context, r Resolver, ip net.IP, helo, mailFrom string) SPF {
	// RFC 7208 §4.6.4: a time limit on the whole evaluation (both
	// identities), at least 20 s; past it lookups fail, giving temperror.
	ctx, cancel := context.WithTimeout(ctx, CheckTimeout)
	defer cancel()
	helo = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(helo)), ".")
	out := SPF{Result: None, HELO: None}
	hr, mr := &strictSPF{Resolver: r}, &strictSPF{Resolver: r}
	heloIsDomain := isDomain(helo)
	if heloIsDomain {
		out.HELODomain = helo
		res, _ := spf.CheckHostWithSender(ip, helo, "postmaster@"+helo, spf.WithContext(ctx), spf.WithResolver(hr))
		out.HELO = string(res)
	}
	sender := mailFrom
	if sender == "" {
		// RFC 7208 §2.4: the null reverse-path is checked as
		// postmaster@ the HELO name — the HELO check just made.
		if !heloIsDomain {
			out.Reason = "null reverse-path and no HELO domain to check"
			return out
		}
		out.Result, out.Domain = out.HELO, helo
		if out.Result != Pass {
			out.Reason = "the null reverse-path is checked as the HELO identity"
			if hr.err != nil && out.Result == PermError {
				out.Reason = reason(hr.err)
			}
		}
		return out
	}
	at := strings.LastIndexByte(sender, '@')
	domain := strings.TrimSuffix(strings.ToLower(sender[at+1:]), ".")
	if at < 0 || !isDomain(domain) {
		// §4.3: a malformed or non-FQDN domain gives none.
		out.Reason = "MAIL FROM has no domain to check"
		return out
	}
	if at == 0 {
		sender = "postmaster" + sender // §4.3: an empty local-part is postmaster
	}
	out.Domain = domain
	res, err := spf.CheckHostWithSender(ip, helo, sender, spf.WithContext(ctx), spf.WithResolver(mr))
	out.Result = string(res)
	switch {
	case res == spf.PermError && mr.err != nil:
		out.Reason = reason(mr.err)
	case res != spf.Pass && err != nil:
		out.Reason = reason(err)
	}
	return out
}

// reason is err's text without the library's "spf: " prefix, bounded.
func reason(err error) string {
	s := strings.TrimPrefix(err.Error(), "spf: ")
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

// isDomain reports whether s looks like a fully qualified domain name:
// at least two labels of letters, digits, '-' and '_', none empty and
// none over 63 bytes, at most 253 bytes (RFC 7208 §4.3).
func isDomain(s string) bool {
	if s == "" || len(s) > 253 || !strings.Contains(s, ".") {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if l == "" || len(l) > 63 {
			return false
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c >= 0x80) {
				return false
			}
		}
	}
	return true
}
