// Package senderauth decides who really sent a message: SPF (RFC 7208) on
// the SMTP transaction, DMARC (RFC 7489) over the From domain, ARC (RFC
// 8617) over forwarded mail, next to the DKIM results package dkim gives,
// and one Verdict per message that says which domain, if any, the message
// is authenticated as.
//
// All DNS goes through one Resolver (package authdns in production).
// SPF is evaluated with internal/spf (blitiri.com.ar/go/spf, patched to
// follow RFC 7208 where upstream does not); DMARC records are parsed here
// (ParseRecord) and organizational domains come from the public suffix
// list (golang.org/x/net/publicsuffix); ARC chains are verified here
// (VerifyARC).
package senderauth

import (
	"context"
	"encoding/json"
	"net/mail"
	"strings"

	"github.com/envelopd/envelopd/authdns"
	"github.com/envelopd/envelopd/dkim"
)

// Resolver is the DNS the checks use.
type Resolver = authdns.Resolver

// Verdict is envelopd's one sender verdict for a message. Its JSON form
// (without DKIM, which is stored and shown as its own "dkim" array) is
// part of envelopd's output contract.
type Verdict struct {
	SPF   SPF   `json:"spf"`
	DMARC DMARC `json:"dmarc"`
	ARC   ARC   `json:"arc"`
	// AuthenticatedAs is the From domain when DMARC passes, when the
	// domain publishes no usable DMARC record (none, permerror) but a DKIM
	// signature aligned with it passes, or when a trusted ARC sealer vouches for it; "" (JSON
	// null) otherwise.
	AuthenticatedAs string `json:"-"`
	// AuthenticatedBy says how: "dmarc", "dkim" (aligned, no record) or
	// "arc"; "" when not authenticated.
	AuthenticatedBy string `json:"authenticated_by,omitempty"`
}

// plainVerdict is Verdict without its methods.
type plainVerdict Verdict

// MarshalJSON writes authenticated_as as null when it is empty.
func (v Verdict) MarshalJSON() ([]byte, error) {
	var as *string
	if v.AuthenticatedAs != "" {
		as = &v.AuthenticatedAs
	}
	return json.Marshal(struct {
		plainVerdict
		AuthenticatedAs *string `json:"authenticated_as"`
	}{plainVerdict(v), as})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (v *Verdict) UnmarshalJSON(b []byte) error {
	var j struct {
		*plainVerdict
		AuthenticatedAs *string `json:"authenticated_as"`
	}
	j.plainVerdict = (*plainVerdict)(v)
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	if j.AuthenticatedAs != nil {
		v.AuthenticatedAs = *j.AuthenticatedAs
	}
	return nil
}

// Authenticated reports whether the message is authenticated as the
// domain of the address from (an address or a bare domain): what the
// courtesy OOPS, payment verification and any "act on this" decision
// should ask instead of looking at DKIM alone.
func (v *Verdict) Authenticated(from string) bool {
	if v == nil || v.AuthenticatedAs == "" {
		return false
	}
	d := from
	if i := strings.LastIndexByte(from, '@'); i >= 0 {
		d = from[i+1:]
	}
	return normDomain(d) == v.AuthenticatedAs
}

// ResultKey is the key under which the verdict is kept in a message's
// stored result JSON (store.Message.Result).
const ResultKey = "sender"

// FromResult returns the verdict stored in a message's result JSON
// (store.Message.Result), or nil when it has none (sent copies, mail
// stored before sender authentication, serve without a verifier).
func FromResult(result json.RawMessage) *Verdict {
	if len(result) == 0 {
		return nil
	}
	var holder struct {
		Sender *Verdict `json:"sender"`
	}
	if json.Unmarshal(result, &holder) != nil {
		return nil
	}
	return holder.Sender
}

// Checker computes verdicts. It is safe for concurrent use.
type Checker struct {
	Resolver Resolver
	// TrustedSealers are the ARC sealers (AS d= domains, lower case)
	// whose passing chain may stand in for DKIM broken by forwarding
	// (--arc-trust).
	TrustedSealers []string
}

// Input is what the verdict of one message is computed from.
type Input struct {
	// From is the RFC5322.From field's addresses (the first is the
	// author evaluated; a message with several From domains is
	// evaluated for the first).
	From []string
	// SPF is the transaction's SPF outcome; nil when the message did not
	// come over SMTP (polled mail): SPF is then none.
	SPF  *SPF
	DKIM []dkim.Result
	// Raw is the message as received, for ARC.
	Raw []byte
	// Sample is what DMARC pct= sampling hashes (the Message-ID).
	Sample string
}

// Verdict computes the sender verdict of one message.
func (c *Checker) Verdict(ctx context.Context, in Input) *Verdict {
	ctx, cancel := context.WithTimeout(ctx, CheckTimeout)
	defer cancel()
	v := &Verdict{}
	if in.SPF != nil {
		v.SPF = *in.SPF
	} else {
		v.SPF = SPF{Result: None, HELO: None, Reason: "not received over SMTP"}
	}
	from := ""
	if len(in.From) > 0 {
		from = domainOf(in.From[0])
	}
	v.DMARC = CheckDMARC(ctx, c.Resolver, from, in.SPF, in.DKIM, in.Sample)
	v.ARC = VerifyARC(ctx, c.Resolver, in.Raw)
	switch {
	case v.DMARC.Result == Pass:
		v.AuthenticatedAs, v.AuthenticatedBy = v.DMARC.Domain, "dmarc"
	case (v.DMARC.Result == None || v.DMARC.Result == PermError) && v.DMARC.Domain != "" && len(v.DMARC.Aligned.DKIM) > 0:
		// No usable policy published, but the domain signed the message
		// itself: DMARC's identifier alignment (§3.1) without a policy.
		v.AuthenticatedAs, v.AuthenticatedBy = v.DMARC.Domain, "dkim"
	case v.DMARC.Result != TempError && from != "":
		if s := c.trustedVouch(v.ARC, in.Raw, from); s != "" {
			v.ARC.TrustedSealer = s
			v.AuthenticatedAs, v.AuthenticatedBy = normDomain(from), "arc"
		}
	}
	return v
}

func domainOf(addr string) string {
	if a, err := mail.ParseAddress(addr); err == nil {
		addr = a.Address
	}
	i := strings.LastIndexByte(addr, '@')
	if i < 0 {
		return ""
	}
	return normDomain(addr[i+1:])
}
