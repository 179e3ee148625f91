// Package domain is envelopd's managed domains: the DNS records a domain
// needs for envelopd to receive and sign its mail, their BIND zone-file
// form, and a check that looks each one up and says whether it is right.
//
// The records (records.go):
//
//   - MX (RFC 5321 §5.1) to the host envelopd answers SMTP on;
//   - SPF (RFC 7208) at the domain;
//   - the DKIM key TXT (RFC 6376 §3.6.1) of each key envelopd signs with
//     for the domain;
//   - DMARC (RFC 7489 §6.1) with an aggregate-report address;
//   - MTA-STS (RFC 8461 §3.1): the _mta-sts TXT and the mta-sts host
//     that serves the policy (§3.3), an alias of the MX host;
//   - TLS-RPT (RFC 8460 §3) with a report address.
//
// A check (check.go) asks the resolver envelopd uses (package authdns)
// for each record and says ok, missing, different (with what it found),
// propagating (wrong through the resolver, right at the authoritative
// server when one is given: an old answer still cached) or error (the
// lookup failed: SERVFAIL, timeout). TXT records are compared as what
// they mean — tag lists as sets of tags, SPF by its terms — not byte for
// byte.
//
// Names are validated by Normalize (name.go): lower case, A-labels
// (RFC 5891; a Unicode name is converted), no trailing dot; a wildcard or
// a public suffix (golang.org/x/net/publicsuffix) is refused.
//
// Service (service.go) is the one implementation behind the CLI
// (`envelopd domain`) and the HTTP API's /v0/domains: domains live in the
// store (store.DomainStore), whose trigger writes domain.verified when a
// check first finds every record right.
package domain
