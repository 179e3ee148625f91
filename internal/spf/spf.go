// Package spf implements SPF (Sender Policy Framework) lookup and validation.
//
// Sender Policy Framework (SPF) is a simple email-validation system designed
// to detect email spoofing by providing a mechanism to allow receiving mail
// exchangers to check that incoming mail from a domain comes from a host
// authorized by that domain's administrators [Wikipedia].
//
// This package is intended to be used by SMTP servers to implement SPF
// validation.
//
// All SPF mechanisms, modifiers, and macros are supported.
//
// References:
//
//	https://tools.ietf.org/html/rfc7208
//	https://en.wikipedia.org/wiki/Sender_Policy_Framework
package spf

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The Result of an SPF check. Note the values have meaning, we use them in
// headers.  https://tools.ietf.org/html/rfc7208#section-8
type Result string

// Valid results.
const (
	// https://tools.ietf.org/html/rfc7208#section-8.1
	// Not able to reach any conclusion.
	None = Result("none")

	// https://tools.ietf.org/html/rfc7208#section-8.2
	// No definite assertion (positive or negative).
	Neutral = Result("neutral")

	// https://tools.ietf.org/html/rfc7208#section-8.3
	// Client is authorized to inject mail.
	Pass = Result("pass")

	// https://tools.ietf.org/html/rfc7208#section-8.4
	// Client is *not* authorized to use the domain.
	Fail = Result("fail")

	// https://tools.ietf.org/html/rfc7208#section-8.5
	// Not authorized, but unwilling to make a strong policy statement.
	SoftFail = Result("softfail")

	// https://tools.ietf.org/html/rfc7208#section-8.6
	// Transient error while performing the check.
	TempError = Result("temperror")

	// https://tools.ietf.org/html/rfc7208#section-8.7
	// Records could not be correctly interpreted.
	PermError = Result("permerror")
)

var qualToResult = map[byte]Result{
	'+': Pass,
	'-': Fail,
	'~': SoftFail,
	'?': Neutral,
}

// Errors returned by the library. Note that the errors returned in different
// situations may change over time, and new ones may be added. Be careful
// about over-relying on these.
var (
	// Errors related to the arguments given to the check functions.
	ErrInvalidIPAddress = errors.New("invalid IP address")

	// Errors related to an invalid SPF record.
	ErrUnknownField  = errors.New("unknown field")
	ErrInvalidIP     = errors.New("invalid ipX value")
	ErrInvalidMask   = errors.New("invalid mask")
	ErrInvalidMacro  = errors.New("invalid macro")
	ErrInvalidDomain = errors.New("invalid domain")

	// Errors related to DNS lookups.
	// Note that the library functions may also return net.DNSError.
	ErrNoResult               = errors.New("no DNS record found")
	ErrLookupLimitReached     = errors.New("lookup limit reached")
	ErrVoidLookupLimitReached = errors.New("void lookup limit reached")
	ErrTooManyMXRecords       = errors.New("too many MX records")
	ErrMultipleRecords        = errors.New("multiple matching DNS records")

	// Errors returned on a successful match.
	ErrMatchedAll    = errors.New("matched all")
	ErrMatchedA      = errors.New("matched a")
	ErrMatchedIP     = errors.New("matched ip")
	ErrMatchedMX     = errors.New("matched mx")
	ErrMatchedPTR    = errors.New("matched ptr")
	ErrMatchedExists = errors.New("matched exists")
)

const (
	// Default value for the maximum number of DNS lookups while resolving SPF.
	// RFC is quite clear 10 must be the maximum allowed.
	// https://tools.ietf.org/html/rfc7208#section-4.6.4
	defaultMaxLookups = 10

	// Default value for the maximum number of DNS void lookups while
	// resolving SPF.  RFC suggests that implementations SHOULD limit these
	// with a configurable default of 2.
	// https://tools.ietf.org/html/rfc7208#section-4.6.4
	defaultMaxVoidLookups = 2
)

// TraceFunc is the type of tracing functions.
type TraceFunc func(f string, a ...any)

var (
	nullTrace    = func(f string, a ...any) {}
	defaultTrace = nullTrace
)

// Option type, for setting options. Users are expected to treat this as an
// opaque type and not rely on the implementation, which is subject to change.
type Option func(*resolution)

// CheckHost fetches SPF records for `domain`, parses them, and evaluates them
// to determine if `ip` is permitted to send mail for it.
// Because it doesn't receive enough information to handle macros well, its
// usage is not recommended, but remains supported for backwards
// compatibility.
//
// The function returns a Result, which corresponds with the SPF result for
// the check as per RFC, as well as an error for debugging purposes. Note that
// the error may be non-nil even on successful checks.
//
// If `ip` is not a valid IP address, the result is PermError.
//
// Reference: https://tools.ietf.org/html/rfc7208#section-4
//
// Deprecated: use CheckHostWithSender instead.
func CheckHost(ip net.IP, domain string) (Result, error) {
	r := &resolution{
		ip:           ip,
		maxcount:     defaultMaxLookups,
		maxvoidcount: defaultMaxVoidLookups,
		helo:         domain,
		sender:       "@" + domain,
		ctx:          context.Background(),
		resolver:     defaultResolver,
		trace:        defaultTrace,
	}

	if !validIP(ip) {
		r.trace("invalid ip %v", ip)
		return PermError, ErrInvalidIPAddress
	}

	return r.Check(domain)
}

// validIP checks that the given IP address is valid. Because net.IP is a byte
// slice, it can hold values that are not valid addresses, including nil
// (which is what net.ParseIP returns on error).
func validIP(ip net.IP) bool {
	// To16 returns nil unless the address is a valid IP address (4 or 16
	// bytes long).
	return ip.To16() != nil
}

// CheckHostWithSender fetches SPF records for `sender`'s domain, parses them,
// and evaluates them to determine if `ip` is permitted to send mail for it.
// The `helo` domain is used if the sender has no domain part.
//
// The `opts` optional parameter can be used to adjust some specific
// behaviours, such as the maximum number of DNS lookups allowed.
//
// The function returns a Result, which corresponds with the SPF result for
// the check as per RFC, as well as an error for debugging purposes. Note that
// the error may be non-nil even on successful checks.
//
// If `ip` is not a valid IP address, the result is PermError.
//
// Reference: https://tools.ietf.org/html/rfc7208#section-4
func CheckHostWithSender(ip net.IP, helo, sender string, opts ...Option) (Result, error) {
	_, domain := split(sender)
	if domain == "" {
		domain = helo
	}

	r := &resolution{
		ip:           ip,
		maxcount:     defaultMaxLookups,
		maxvoidcount: defaultMaxVoidLookups,
		helo:         helo,
		sender:       sender,
		ctx:          context.Background(),
		resolver:     defaultResolver,
		trace:        defaultTrace,
	}

	for _, opt := range opts {
		opt(r)
	}

	if !validIP(ip) {
		r.trace("invalid ip %v", ip)
		return PermError, ErrInvalidIPAddress
	}

	return r.Check(domain)
}

// OverrideLookupLimit overrides the maximum number of DNS lookups allowed
// during SPF evaluation. Note that using this violates the RFC, which is
// quite explicit that the maximum allowed MUST be 10 (the default). Please
// use with care.
//
// This is EXPERIMENTAL for now, and the API is subject to change.
func OverrideLookupLimit(limit uint) Option {
	return func(r *resolution) {
		r.maxcount = limit
	}
}

// OverrideVoidLookupLimit overrides the maximum number of void DNS lookups allowed
// during SPF evaluation. A void DNS lookup is one that returns an empty
// answer, or a NXDOMAIN.  Note that as per RFC, the default value of 2 SHOULD
// be used. Please use with care.
//
// This is EXPERIMENTAL for now, and the API is subject to change.
func OverrideVoidLookupLimit(limit uint) Option {
	return func(r *resolution) {
		r.maxvoidcount = limit
	}
}

// WithContext is an option to set the context for this operation, which will
// be passed along to the resolver functions and other external calls if
// needed.
//
// This is EXPERIMENTAL for now, and the API is subject to change.
func WithContext(ctx context.Context) Option {
	return func(r *resolution) {
		r.ctx = ctx
	}
}

// DNSResolver implements the methods we use to resolve DNS queries.
// It is intentionally compatible with *net.Resolver.
type DNSResolver interface {
	LookupTXT(ctx context.Context, name string) ([]string, error)
	LookupMX(ctx context.Context, name string) ([]*net.MX, error)
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
	LookupAddr(ctx context.Context, addr string) (names []string, err error)
}

var defaultResolver DNSResolver = net.DefaultResolver

// WithResolver sets the resolver to use for DNS lookups. It can be useful for
// testing, and for customize DNS resolution specifically for this library.
//
// The default is to use net.DefaultResolver, which should be appropriate for
// most users.
//
// This is EXPERIMENTAL for now, and the API is subject to change.
func WithResolver(resolver DNSResolver) Option {
	return func(r *resolution) {
		r.resolver = resolver
	}
}

// WithTraceFunc sets the resolver's trace function.
//
// This can be used for debugging. The trace messages are NOT machine
// parseable, and are NOT stable. They should also NOT be included in
// user-visible output, as they may include sensitive details.
//
// This is EXPERIMENTAL for now, and the API is subject to change.
func WithTraceFunc(trace TraceFunc) Option {
	return func(r *resolution) {
		r.trace = trace
	}
}

// split an user@domain address into user and domain.
func split(addr string) (string, string) {
	ps := strings.SplitN(addr, "@", 2)
	if len(ps) != 2 {
		return addr, ""
	}

	return ps[0], ps[1]
}

type resolution struct {
	ip           net.IP
	count        uint
	maxcount     uint
	voidcount    uint
	maxvoidcount uint

	helo   string
	sender string

	// Result of doing a reverse lookup for ip (so we only do it once).
	ipNames []string

	// The validated names of ip for the %{p} macro (nil until needed).
	pNames []string

	// Context for this resolution.
	ctx context.Context

	// DNS resolver to use.
	resolver DNSResolver

	// Trace function, used for debugging.
	trace TraceFunc
}

// A modifier is a name and a value, separated by "=":
//
//	modifier = redirect / explanation / unknown-modifier
//	unknown-modifier = name "=" macro-string
//	name = ALPHA *( ALPHA / DIGIT / "-" / "_" / "." )
//
// Note the "=" comes before any ":" or "/", which is what tells modifiers
// apart from mechanisms.
// https://tools.ietf.org/html/rfc7208#section-4.6.1
var modifierRegexp = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9._-]*=`)

// isNamedModifier returns whether the given term is the modifier with the
// given name, like "redirect" or "exp".
//
// Modifier names are case-insensitive (on ASCII, as per the ABNF), and take
// no qualifier, so this must be given the term before any qualifier has been
// stripped from it.
// https://tools.ietf.org/html/rfc7208#section-4.6.1
func isNamedModifier(field, name string) bool {
	return len(field) > len(name) &&
		field[len(name)] == '=' &&
		asciiEqualFold(field[:len(name)], name)
}

var aField = regexp.MustCompile(`^(a$|a:|a/)`)
var mxField = regexp.MustCompile(`^(mx$|mx:|mx/)`)
var ptrField = regexp.MustCompile(`^(ptr$|ptr:)`)

func (r *resolution) Check(domain string) (Result, error) {
	r.trace("check %q %d %d", domain, r.count, r.voidcount)
	txt, err := r.getDNSRecord(domain)
	if err != nil {
		if isNotFound(err) {
			// NXDOMAIN -> None.
			// https://datatracker.ietf.org/doc/html/rfc7208#section-4.3
			r.trace("dns domain not found: %v", err)
			return None, ErrNoResult
		}
		if isTemporary(err) {
			r.trace("dns temp error: %v", err)
			return TempError, err
		}
		if err == ErrMultipleRecords {
			r.trace("multiple dns records")
			return PermError, err
		}
		// Got another, permanent error.
		// https://datatracker.ietf.org/doc/html/rfc7208#section-2.6.7
		r.trace("dns perm error: %v", err)
		return PermError, err
	}
	r.trace("dns record %q", txt)

	if txt == "" {
		// No record => None.
		// https://tools.ietf.org/html/rfc7208#section-4.5
		return None, ErrNoResult
	}

	fields := strings.Split(txt, " ")

	// Redirects must be handled after the rest; instead of having two loops,
	// we just move them to the end.
	// Note this has to be consistent with how we recognize the modifier
	// below, otherwise a redirect could be evaluated in place, and bypass the
	// check for duplicates.
	var newfields, redirects []string
	for _, field := range fields {
		if isNamedModifier(field, "redirect") {
			redirects = append(redirects, field)
		} else {
			newfields = append(newfields, field)
		}
	}
	if len(redirects) > 1 {
		// At most a single redirect is allowed.
		// https://tools.ietf.org/html/rfc7208#section-6
		r.trace("too many redirects")
		return PermError, ErrInvalidDomain
	}
	fields = append(newfields, redirects...)

	for _, field := range fields {
		if field == "" {
			continue
		}

		// The version check should be case-insensitive (it's a
		// case-insensitive constant in the standard).
		// https://tools.ietf.org/html/rfc7208#section-12
		if strings.HasPrefix(field, "v=") || strings.HasPrefix(field, "V=") {
			continue
		}

		// Is this a modifier? Note we check these before stripping the
		// qualifier below, because modifiers don't take one:
		//   directive = [ qualifier ] mechanism
		//   modifier  = redirect / explanation / unknown-modifier
		// https://tools.ietf.org/html/rfc7208#section-4.6.1
		isExp := isNamedModifier(field, "exp")
		isRedirect := isNamedModifier(field, "redirect")
		isModifier := modifierRegexp.MatchString(field)

		// See if we have a qualifier, defaulting to + (pass).
		// https://tools.ietf.org/html/rfc7208#section-4.6.2
		result, ok := qualToResult[field[0]]
		if ok {
			field = field[1:]
		} else {
			result = Pass
		}

		// Mechanism and modifier names are case-insensitive.
		// https://tools.ietf.org/html/rfc7208#section-4.6.1
		lfield := strings.ToLower(field)

		if lfield == "all" {
			// https://tools.ietf.org/html/rfc7208#section-5.1
			r.trace("all: %v", result)
			return result, ErrMatchedAll
		} else if strings.HasPrefix(lfield, "include:") {
			if ok, res, err := r.includeField(result, field, domain); ok {
				r.trace("%q %v, %v", field, res, err)
				return res, err
			}
		} else if aField.MatchString(lfield) {
			if ok, res, err := r.aField(result, field, domain); ok {
				r.trace("%q %v, %v", field, res, err)
				return res, err
			}
		} else if mxField.MatchString(lfield) {
			if ok, res, err := r.mxField(result, field, domain); ok {
				r.trace("%q %v, %v", field, res, err)
				return res, err
			}
		} else if strings.HasPrefix(lfield, "ip4:") || strings.HasPrefix(lfield, "ip6:") {
			if ok, res, err := r.ipField(result, field); ok {
				r.trace("%q %v, %v", field, res, err)
				return res, err
			}
		} else if ptrField.MatchString(lfield) {
			if ok, res, err := r.ptrField(result, field, domain); ok {
				r.trace("%q %v, %v", field, res, err)
				return res, err
			}
		} else if strings.HasPrefix(lfield, "exists:") {
			if ok, res, err := r.existsField(result, field, domain); ok {
				r.trace("%q %v, %v", field, res, err)
				return res, err
			}
		} else if isExp {
			r.trace("exp= ignored")
			continue
		} else if isRedirect {
			res, err := r.redirectField(field, domain)
			r.trace("%q: %v, %v", field, res, err)
			return res, err
		} else if isModifier {
			// Unrecognized modifiers must be ignored, so that records
			// using modifiers defined elsewhere still work.
			// https://tools.ietf.org/html/rfc7208#section-6
			r.trace("unknown modifier, ignoring")
			continue
		} else {
			r.trace("unknown field, permerror")
			return PermError, ErrUnknownField
		}
	}

	// Got to the end of the evaluation without a result => Neutral.
	// https://tools.ietf.org/html/rfc7208#section-4.7
	r.trace("fallback to neutral")
	return Neutral, nil
}

// getDNSRecord gets TXT records from the given domain, and returns the SPF
// (if any).  Note that at most one SPF is allowed per a given domain:
// https://tools.ietf.org/html/rfc7208#section-3
// https://tools.ietf.org/html/rfc7208#section-3.2
// https://tools.ietf.org/html/rfc7208#section-4.5
func (r *resolution) getDNSRecord(domain string) (string, error) {
	txts, err := r.resolver.LookupTXT(r.ctx, domain)
	if err != nil {
		return "", err
	}

	records := []string{}
	for _, txt := range txts {
		// The version check should be case-insensitive (it's a
		// case-insensitive constant in the standard).
		// https://tools.ietf.org/html/rfc7208#section-12
		if strings.HasPrefix(strings.ToLower(txt), "v=spf1 ") {
			records = append(records, txt)
		}

		// An empty record is explicitly allowed:
		// https://tools.ietf.org/html/rfc7208#section-4.5
		if strings.ToLower(txt) == "v=spf1" {
			records = append(records, txt)
		}
	}

	// 0 records is ok, handled by the parent.
	// 1 record is what we expect, return the record.
	// More than that, it's a permanent error:
	// https://tools.ietf.org/html/rfc7208#section-4.5
	switch len(records) {
	case 0:
		return "", nil
	case 1:
		return records[0], nil
	default:
		return "", ErrMultipleRecords
	}
}

func isTemporary(err error) bool {
	derr, ok := err.(*net.DNSError)
	return ok && derr.Temporary()
}

func isNotFound(err error) bool {
	derr, ok := err.(*net.DNSError)
	return ok && derr.IsNotFound
}

// Account for a DNS lookup, and return an error if the limit was already
// reached. Fields which do a DNS lookup must call this before doing it, so we
// never go over the limit.
// https://tools.ietf.org/html/rfc7208#section-4.6.4
func (r *resolution) countLookup() error {
	if r.count >= r.maxcount {
		r.trace("lookup limit reached")
		return ErrLookupLimitReached
	}
	r.count++
	return nil
}

// Check if the given DNS error is a "void lookup" (0 answers, or nxdomain),
// and return an error if the limit was exceeded.
// Unlike countLookup, we can only tell a lookup was void after doing it, so
// fields must call this right after the lookup, and stop the evaluation if it
// returns an error.
// https://tools.ietf.org/html/rfc7208#section-4.6.4
func (r *resolution) countVoidLookup(nanswers int, err error) error {
	derr, isDNSErr := err.(*net.DNSError)
	if err == nil && nanswers == 0 {
		r.voidcount++
		r.trace("void lookup: no answers")
	} else if isDNSErr && derr.IsNotFound {
		r.voidcount++
		r.trace("void lookup: nxdomain")
	}

	if r.voidcount > r.maxvoidcount {
		r.trace("void lookup limit reached")
		return ErrVoidLookupLimitReached
	}
	return nil
}

// ipField processes an "ip" field.
func (r *resolution) ipField(res Result, field string) (bool, Result, error) {
	fip := field[4:]
	if strings.Contains(fip, "/") {
		_, ipnet, err := net.ParseCIDR(fip)
		if err != nil {
			return true, PermError, ErrInvalidMask
		}
		if ipnet.Contains(r.ip) {
			r.trace("ip match: %v contains %v", ipnet, r.ip)
			return true, res, ErrMatchedIP
		}
	} else {
		ip := net.ParseIP(fip)
		if ip == nil {
			return true, PermError, ErrInvalidIP
		}
		if ip.Equal(r.ip) {
			r.trace("ip match: %v", ip)
			return true, res, ErrMatchedIP
		}
	}

	return false, "", nil
}

// ptrField processes a "ptr" field.
func (r *resolution) ptrField(res Result, field, domain string) (bool, Result, error) {
	// Extract the domain if the field is in the form "ptr:domain".
	ptrDomain := domain
	if len(field) >= 4 {
		ptrDomain = field[4:]

	}
	ptrDomain, err := r.expandMacros(ptrDomain, domain)
	if err != nil {
		return true, PermError, ErrInvalidMacro
	}

	if ptrDomain == "" {
		return true, PermError, ErrInvalidDomain
	}

	// Each "ptr" term counts against the lookup limit, even if we already have
	// the names from a previous one and don't need to query DNS again: the RFC
	// limits the number of terms that cause DNS lookups, not the number of
	// queries we end up making.
	// https://tools.ietf.org/html/rfc7208#section-4.6.4
	if err := r.countLookup(); err != nil {
		return true, PermError, err
	}

	if r.ipNames == nil {
		r.ipNames = []string{}
		ns, err := r.resolver.LookupAddr(r.ctx, r.ip.String())
		if verr := r.countVoidLookup(len(ns), err); verr != nil {
			return true, PermError, verr
		}
		if err != nil {
			// Any DNS error here makes the mechanism fail to match, instead
			// of the temperror that section 5 prescribes for the other
			// mechanisms. The reverse zone is controlled by the operator of
			// the connecting IP, not by the domain publishing the record, so
			// errors in it must not affect the result.
			// https://tools.ietf.org/html/rfc7208#section-5.5
			r.trace("ptr reverse lookup error, no match: %v", err)
			return false, "", err
		}

		// Only take the first 10 names, ignore the rest.
		// Each A/AAAA lookup in this context is NOT included in the overall
		// count. The RFC defines this separate logic and limits.
		// https://datatracker.ietf.org/doc/html/rfc7208#section-4.6.4
		if len(ns) > 10 {
			r.trace("ptr names trimmed %d down to 10", len(ns))
			ns = ns[:10]
		}

		for _, n := range ns {
			// Validate the name by doing a forward resolution: it is only
			// validated if it resolves back to the IP we are checking.
			// https://tools.ietf.org/html/rfc7208#section-5.5
			addrs, err := r.resolver.LookupIPAddr(r.ctx, n)
			if err != nil {
				// RFC explicitly says to skip domains which error here.
				continue
			}
			r.trace("ptr forward resolution %q -> %q", n, addrs)
			for _, addr := range addrs {
				if addr.IP.Equal(r.ip) {
					r.ipNames = append(r.ipNames, n)
					break
				}
			}
		}
	}

	r.trace("ptr evaluating %q in %q", ptrDomain, r.ipNames)
	for _, n := range r.ipNames {
		if isSubdomain(n, ptrDomain) {
			r.trace("ptr match: %q", n)
			return true, res, ErrMatchedPTR
		}
	}

	return false, "", nil
}

// validatedName is the value of the %{p} macro (RFC 7208 §7.3): a
// validated domain name of the client's IP, found as the ptr mechanism
// finds them (§5.5: the first 10 PTR names, each kept only when one of
// its addresses is the IP) — domain itself when it is among them, else
// a subdomain of domain, else the first; "unknown" when there is none or
// a DNS error occurs. Like the ptr mechanism's A/AAAA lookups, these are
// not counted against the 10-term limit (§4.6.4 counts terms; the macro
// is none). The answer is kept for the rest of the evaluation.
//
// envelopd's patch: upstream always expanded "unknown", which §7.3
// allows only when no validated name is found.
func (r *resolution) validatedName(domain string) string {
	if r.pNames == nil {
		r.pNames = []string{}
		ns, err := r.resolver.LookupAddr(r.ctx, r.ip.String())
		if err != nil {
			r.trace("p macro: reverse lookup error: %v", err)
			ns = nil
		}
		if len(ns) > 10 {
			ns = ns[:10]
		}
		for _, n := range ns {
			addrs, err := r.resolver.LookupIPAddr(r.ctx, n)
			if err != nil {
				continue
			}
			for _, addr := range addrs {
				if addr.IP.Equal(r.ip) {
					r.pNames = append(r.pNames, strings.TrimSuffix(n, "."))
					break
				}
			}
		}
	}
	for _, n := range r.pNames {
		if isSubdomain(n, domain) && len(labels(n)) == len(labels(domain)) {
			return n
		}
	}
	for _, n := range r.pNames {
		if isSubdomain(n, domain) {
			return n
		}
	}
	if len(r.pNames) > 0 {
		return r.pNames[0]
	}
	return "unknown"
}

// isSubdomain returns whether the given name is the domain itself, or a
// subdomain of it. A trailing dot on either of them is ignored, so it can be
// used to compare the fully qualified names we get from DNS against the ones
// that appear in a record.
//
// Note the match has to be on a label boundary: "notexample.com" is NOT a
// subdomain of "example.com".
// https://tools.ietf.org/html/rfc7208#section-5.5
func isSubdomain(name, domain string) bool {
	nameLabels := labels(name)
	domainLabels := labels(domain)

	// The name has to have at least as many labels as the domain.
	if len(nameLabels) < len(domainLabels) {
		return false
	}

	// And its trailing labels have to be the domain's.
	nameLabels = nameLabels[len(nameLabels)-len(domainLabels):]
	return slices.EqualFunc(nameLabels, domainLabels, asciiEqualFold)
}

// labels splits a domain name into its labels, ignoring the trailing dot.
func labels(domain string) []string {
	return strings.Split(strings.TrimSuffix(domain, "."), ".")
}

// asciiEqualFold is like strings.EqualFold, but it only considers ASCII
// letters to be case-insensitive.
//
// DNS names are octet strings, compared octet by octet, and only ASCII
// letters are case-insensitive; so comparing bytes is exactly the DNS rule,
// and it holds even if the name is not valid UTF-8.
//
// An Unicode-aware comparison would be incorrect: it can consider equal two
// names that DNS considers different (for example, strings.ToLower turns the
// U+212A KELVIN SIGN into an ASCII "k"). Note we don't enforce that records
// are 7-bit ASCII, so non-ASCII names do reach this.
//
// Folding only ASCII is safe to do byte by byte because no byte of a
// multi-byte UTF-8 sequence is < 0x80, so we can never alter one by mistake.
// https://tools.ietf.org/html/rfc4343
func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range len(a) {
		if asciiToLower(a[i]) != asciiToLower(b[i]) {
			return false
		}
	}
	return true
}

func asciiToLower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + ('a' - 'A')
	}
	return c
}

// existsField processes a "exists" field.
// https://tools.ietf.org/html/rfc7208#section-5.7
func (r *resolution) existsField(res Result, field, domain string) (bool, Result, error) {
	// The field is in the form "exists:<domain>".
	eDomain := field[7:]
	eDomain, err := r.expandMacros(eDomain, domain)
	if err != nil {
		return true, PermError, ErrInvalidMacro
	}

	if eDomain == "" {
		return true, PermError, ErrInvalidDomain
	}

	if err := r.countLookup(); err != nil {
		return true, PermError, err
	}
	ips, err := r.resolver.LookupIPAddr(r.ctx, eDomain)
	if verr := r.countVoidLookup(len(ips), err); verr != nil {
		return true, PermError, verr
	}
	if err != nil {
		// https://tools.ietf.org/html/rfc7208#section-5
		if isNotFound(err) {
			return false, "", err
		}
		return true, TempError, err
	}

	// Exists only counts if there are IPv4 matches.
	for _, ip := range ips {
		if ip.IP.To4() != nil {
			r.trace("exists match: %v", ip.IP)
			return true, res, ErrMatchedExists
		}
	}
	return false, "", nil
}

// includeField processes an "include" field.
func (r *resolution) includeField(res Result, field, domain string) (bool, Result, error) {
	// https://tools.ietf.org/html/rfc7208#section-5.2
	incdomain := field[len("include:"):]
	incdomain, err := r.expandMacros(incdomain, domain)
	if err != nil {
		return true, PermError, ErrInvalidMacro
	}
	if err := r.countLookup(); err != nil {
		return true, PermError, err
	}
	ir, err := r.Check(incdomain)
	switch ir {
	case Pass:
		return true, res, err
	case Fail, SoftFail, Neutral:
		return false, ir, err
	case TempError:
		return true, TempError, err
	case PermError:
		return true, PermError, err
	case None:
		return true, PermError, err
	}

	return false, "", fmt.Errorf("this should never be reached")
}

type dualMasks struct {
	v4 net.IPMask
	v6 net.IPMask
}

func maskToStr(m net.IPMask) string {
	ones, bits := m.Size()
	if ones == 0 && bits == 0 {
		return m.String()
	}
	return fmt.Sprintf("/%d", ones)
}

func (m dualMasks) String() string {
	return fmt.Sprintf("[%v, %v]", maskToStr(m.v4), maskToStr(m.v6))
}

func ipMatch(ip, tomatch net.IP, masks dualMasks) bool {
	mask := net.IPMask(nil)
	if tomatch.To4() != nil && masks.v4 != nil {
		mask = masks.v4
	} else if tomatch.To4() == nil && masks.v6 != nil {
		mask = masks.v6
	}

	if mask != nil {
		ipnet := net.IPNet{IP: tomatch, Mask: mask}
		return ipnet.Contains(ip)
	}

	return ip.Equal(tomatch)
}

// domainAndMask splits an "a" or "mx" field (its mechanism name given)
// into its domain-spec (domain when it has none) and its
// dual-cidr-length (RFC 7208 §5.3, §5.4, §12). The CIDR lengths are cut
// from the end of the field ("//" 1*DIGIT, then "/" 1*DIGIT): a
// domain-spec may itself hold "/", since a macro-literal is any visible
// character but "%" (§7.1), as in "a:foo:bar/baz.example.com".
//
// envelopd's patch: upstream matched the field with a regexp that ends
// the domain-spec at the first "/", giving permerror for such domains.
func domainAndMask(name, field, domain string) (string, dualMasks, error) {
	masks := dualMasks{}
	rest := field[len(name):]
	rest, v6 := cutLength(rest, "//")
	rest, v4 := cutLength(rest, "/")
	switch {
	case strings.HasPrefix(rest, ":"):
		spec := rest[1:]
		// A "/" left in the domain-spec's last label is a malformed CIDR
		// length ("a:x/", "a:d/montoto"): domain-end is a toplabel or a
		// macro-expand (§7.1), never holding "/".
		if spec == "" && strings.Contains(field, "/") || badDomainEnd(spec) {
			return "", masks, ErrInvalidMask
		}
		if spec == "" {
			return "", masks, ErrInvalidDomain
		}
		domain = spec
	case rest != "":
		// "a/", "mx//", "a/x": a "/" not followed by a length.
		return "", masks, ErrInvalidMask
	}
	if v4 != "" {
		i, err := strconv.Atoi(v4)
		mask4 := net.CIDRMask(i, 32)
		if err != nil || mask4 == nil {
			return "", masks, ErrInvalidMask
		}
		masks.v4 = mask4
	}
	if v6 != "" {
		i, err := strconv.Atoi(v6)
		mask6 := net.CIDRMask(i, 128)
		if err != nil || mask6 == nil {
			return "", masks, ErrInvalidMask
		}
		masks.v6 = mask6
	}

	return domain, masks, nil
}

// cutLength cuts a trailing sep 1*DIGIT off s, returning the rest and
// the digits ("" and s unchanged when s does not end so).
func cutLength(s, sep string) (string, string) {
	i := len(s)
	for i > 0 && s[i-1] >= '0' && s[i-1] <= '9' {
		i--
	}
	if i == len(s) || !strings.HasSuffix(s[:i], sep) {
		return s, ""
	}
	return s[:i-len(sep)], s[i:]
}

// badDomainEnd reports whether the domain-spec s (before expansion) has a
// "/" in its last label, which domain-end forbids unless s ends in a
// macro-expand (RFC 7208 §7.1: domain-end = ( "." toplabel [ "." ] ) /
// macro-expand).
func badDomainEnd(s string) bool {
	d := strings.TrimSuffix(s, ".")
	if strings.HasSuffix(d, "}") {
		return false
	}
	return strings.Contains(d[strings.LastIndexByte(d, '.')+1:], "/")
}

// aField processes an "a" field.
func (r *resolution) aField(res Result, field, domain string) (bool, Result, error) {
	// https://tools.ietf.org/html/rfc7208#section-5.3
	aDomain, masks, err := domainAndMask("a", field, domain)
	r.trace("masks on %q, %q: %q %v", field, domain, aDomain, masks)
	if err != nil {
		return true, PermError, err
	}
	aDomain, err = r.expandMacros(aDomain, domain)
	if err != nil {
		return true, PermError, ErrInvalidMacro
	}

	if err := r.countLookup(); err != nil {
		return true, PermError, err
	}
	ips, err := r.resolver.LookupIPAddr(r.ctx, aDomain)
	if verr := r.countVoidLookup(len(ips), err); verr != nil {
		return true, PermError, verr
	}
	if err != nil {
		// https://tools.ietf.org/html/rfc7208#section-5
		if isNotFound(err) {
			return false, "", err
		}
		return true, TempError, err
	}
	for _, ip := range ips {
		if ipMatch(r.ip, ip.IP, masks) {
			r.trace("a match: %v, %v, %v", r.ip, ip.IP, masks)
			return true, res, ErrMatchedA
		}
	}

	return false, "", nil
}

// mxField processes an "mx" field.
func (r *resolution) mxField(res Result, field, domain string) (bool, Result, error) {
	// https://tools.ietf.org/html/rfc7208#section-5.4
	mxDomain, masks, err := domainAndMask("mx", field, domain)
	r.trace("masks on %q, %q: %q %v", field, domain, mxDomain, masks)
	if err != nil {
		return true, PermError, err
	}
	mxDomain, err = r.expandMacros(mxDomain, domain)
	if err != nil {
		return true, PermError, ErrInvalidMacro
	}

	if err := r.countLookup(); err != nil {
		return true, PermError, err
	}
	mxs, err := r.resolver.LookupMX(r.ctx, mxDomain)
	if verr := r.countVoidLookup(len(mxs), err); verr != nil {
		return true, PermError, verr
	}

	// If we get some results, use them even if we get an error alongisde.
	// This happens when one of the records is invalid, because Go library can
	// be quite strict about it. The RFC is not clear about this specific
	// situation, and other SPF libraries and implementations just skip the
	// invalid value, so we match common practice.
	if err != nil && len(mxs) == 0 {
		// https://tools.ietf.org/html/rfc7208#section-5
		if isNotFound(err) {
			return false, "", err
		}
		return true, TempError, err
	}

	// There's an explicit maximum of 10 MX records per match.
	// https://tools.ietf.org/html/rfc7208#section-4.6.4
	if len(mxs) > 10 {
		return true, PermError, ErrTooManyMXRecords
	}

	mxips := []net.IP{}
	for _, mx := range mxs {
		ips, err := r.resolver.LookupIPAddr(r.ctx, mx.Host)
		if err != nil {
			// If the address of the MX record was not found, we just skip it.
			// https://tools.ietf.org/html/rfc7208#section-5
			if isNotFound(err) {
				continue
			}
			return true, TempError, err
		}
		for _, ipaddr := range ips {
			mxips = append(mxips, ipaddr.IP)
		}
	}

	r.trace("mx ips: %v", mxips)
	for _, ip := range mxips {
		if ipMatch(r.ip, ip, masks) {
			r.trace("mx match: %v, %v, %v", r.ip, ip, masks)
			return true, res, ErrMatchedMX
		}
	}

	return false, "", nil
}

// redirectField processes a "redirect=" field.
func (r *resolution) redirectField(field, domain string) (Result, error) {
	rDomain := field[len("redirect="):]
	rDomain, err := r.expandMacros(rDomain, domain)
	if err != nil {
		return PermError, ErrInvalidMacro
	}

	if rDomain == "" {
		return PermError, ErrInvalidDomain
	}

	// https://tools.ietf.org/html/rfc7208#section-6.1
	if err := r.countLookup(); err != nil {
		return PermError, err
	}
	result, err := r.Check(rDomain)
	if result == None {
		result = PermError
	}
	return result, err
}

// Group extraction of macro-string from the formal specification.
// Note this is anchored: the macro body must match it entirely, otherwise we
// would accept invalid characters around a valid macro letter.
// https://tools.ietf.org/html/rfc7208#section-7.1
var macroRegexp = regexp.MustCompile(
	`^([slodiphcrtvSLODIPHCRTV])([0-9]+)?([rR])?([-.+,/_=]+)?$`)

// Expand macros, return the expanded string.
// This expects to be passed the domain-spec within a field, not an entire
// field or larger (that has problematic security implications).
// https://tools.ietf.org/html/rfc7208#section-7
func (r *resolution) expandMacros(s, domain string) (string, error) {
	// A domain-spec may hold "/" (a macro-literal is any visible
	// character but "%", RFC 7208 §7.1), but not in its last label: a
	// CIDR length sneaking in where none is allowed ("include:d/24").
	//
	// envelopd's patch: upstream refused every "/", giving permerror for
	// a valid domain-spec such as "foo:bar/baz.example.com".
	if badDomainEnd(s) {
		r.trace("macro contains / in its last label")
		return "", ErrInvalidDomain
	}

	// Bypass the complex logic if there are no macros present.
	if !strings.Contains(s, "%") {
		return s, nil
	}

	// Are we processing the character right after "%"?
	afterPercent := false

	// Are we inside a macro definition (%{...}) ?
	inMacroDefinition := false

	// Macro string, where we accumulate the values inside the definition.
	macroS := ""

	var err error
	var n strings.Builder
	for _, c := range s {
		if afterPercent {
			afterPercent = false
			switch c {
			case '%':
				n.WriteString("%")
				continue
			case '_':
				n.WriteString(" ")
				continue
			case '-':
				n.WriteString("%20")
				continue
			case '{':
				inMacroDefinition = true
				continue
			}
			return "", ErrInvalidMacro
		}
		if inMacroDefinition {
			if c != '}' {
				macroS += string(c)
				continue
			}
			inMacroDefinition = false

			// Extract letter, digit transformer, reverse transformer, and
			// delimiters.
			groups := macroRegexp.FindStringSubmatch(macroS)
			r.trace("macro %q: %q", macroS, groups)
			macroS = ""
			if groups == nil {
				return "", ErrInvalidMacro
			}
			letter := groups[1]

			digits := 0
			if groups[2] != "" {
				// Use 0 as "no digits given"; an explicit value of 0 is not
				// valid.
				digits, err = strconv.Atoi(groups[2])
				if err != nil || digits <= 0 {
					return "", ErrInvalidMacro
				}
			}
			reverse := groups[3] == "r" || groups[3] == "R"
			delimiters := groups[4]
			if delimiters == "" {
				// By default, split strings by ".".
				delimiters = "."
			}

			// Uppercase letters indicate URL escaping of the results.
			urlEscape := letter == strings.ToUpper(letter)
			letter = strings.ToLower(letter)

			str := ""
			switch letter {
			case "s":
				str = r.sender
			case "l":
				str, _ = split(r.sender)
			case "o":
				_, str = split(r.sender)
			case "d":
				str = domain
			case "i":
				str = ipToMacroStr(r.ip)
			case "p":
				// envelopd's patch: upstream always expanded "unknown".
				str = r.validatedName(domain)
			case "v":
				if r.ip.To4() != nil {
					str = "in-addr"
				} else {
					str = "ip6"
				}
			case "h":
				str = r.helo
			default:
				// c, r, t are allowed in exp only, and we don't expand macros
				// in exp so they are just as invalid as the rest.
				return "", ErrInvalidMacro
			}

			// Split str using the given separators.
			splitFunc := func(r rune) bool {
				return strings.ContainsRune(delimiters, r)
			}
			split := strings.FieldsFunc(str, splitFunc)

			// Reverse if requested.
			if reverse {
				slices.Reverse(split)
			}

			// Leave the last $digits fields, if given.
			if digits > 0 {
				digits = min(digits, len(split))
				split = split[len(split)-digits:]
			}

			// Join back, always with "."
			str = strings.Join(split, ".")

			// Escape if requested. Note this doesn't strictly escape ALL
			// unreserved characters, it's the closest we can get without
			// reimplmenting it ourselves.
			if urlEscape {
				str = url.QueryEscape(str)
			}

			n.WriteString(str)
			continue
		}
		if c == '%' {
			afterPercent = true
			continue
		}
		n.WriteString(string(c))
	}

	// If we got to the end of the string in the middle of a macro, it is
	// unterminated and therefore invalid. Otherwise we would silently return
	// a truncated value.
	if afterPercent || inMacroDefinition {
		r.trace("macro not terminated")
		return "", ErrInvalidMacro
	}

	r.trace("macro expanded %q to %q", s, n.String())
	return n.String(), nil
}

func ipToMacroStr(ip net.IP) string {
	if ip.To4() != nil {
		return ip.String()
	}

	// For IPv6 addresses, the "i" macro expands to a dot-format address.
	// https://datatracker.ietf.org/doc/html/rfc7208#section-7.3
	sb := strings.Builder{}
	sb.Grow(64)
	for _, b := range ip.To16() {
		fmt.Fprintf(&sb, "%x.%x.", b>>4, b&0xf)
	}

	// Return the string without the trailing ".".
	// Note that on an invalid address To16 returns nil, and the loop above
	// writes nothing; the entry points reject those, but we take care not to
	// assume the string is non-empty anyway.
	return strings.TrimSuffix(sb.String(), ".")
}
