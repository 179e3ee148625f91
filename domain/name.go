package domain

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/net/idna"
	"golang.org/x/net/publicsuffix"
)

// Errors, each with a stable code (Code).
var (
	ErrInvalid      = errors.New("invalid_domain")
	ErrWildcard     = errors.New("wildcard_domain")
	ErrPublicSuffix = errors.New("public_suffix")
	ErrExists       = errors.New("domain_exists")
	ErrNotFound     = errors.New("domain_not_found")
	ErrNoHostname   = errors.New("no_hostname")
)

// Error is a refused input: Code is one of the Err values' strings.
type Error struct {
	Name   string // the input as given
	Err    error  // one of the Err values
	Reason string
}

func (e *Error) Error() string {
	if e.Name == "" {
		return fmt.Sprintf("%v: %s", e.Err, e.Reason)
	}
	return fmt.Sprintf("%v: %q: %s", e.Err, e.Name, e.Reason)
}

func (e *Error) Unwrap() error { return e.Err }

// Code is the stable error code.
func (e *Error) Code() string { return e.Err.Error() }

// profile converts a Unicode name to A-labels and checks the A-labels it
// is given (RFC 5891 §5, RFC 5890 §2.3.2.1), with the hostname rules
// (letters, digits, hyphen).
var profile = idna.New(idna.MapForLookup(), idna.BidiRule(), idna.ValidateLabels(true), idna.StrictDomainName(true), idna.VerifyDNSLength(true))

// Normalize returns the canonical form of a domain name: lower case,
// A-labels, no trailing dot. A trailing dot (the absolute form) and upper
// case are accepted as the same name; a Unicode name (IDN) becomes its
// A-label form; a malformed A-label ("xn--" that is not valid
// punycode), a wildcard, an address, a name of one label or a public
// suffix (where nobody can register mail, e.g. "co.uk", "github.io") is
// refused with an *Error.
func Normalize(name string) (string, error) {
	bad := func(err error, format string, args ...any) (string, error) {
		return "", &Error{Name: name, Err: err, Reason: fmt.Sprintf(format, args...)}
	}
	n := strings.TrimSpace(name)
	if n != name || n == "" {
		return bad(ErrInvalid, "want a domain name without spaces")
	}
	n = strings.TrimSuffix(n, ".")
	if n == "" || strings.HasSuffix(n, ".") || strings.HasPrefix(n, ".") || strings.Contains(n, "..") {
		return bad(ErrInvalid, "empty label")
	}
	if strings.HasPrefix(n, "*.") || n == "*" {
		return bad(ErrWildcard, "a wildcard cannot be managed: add the domain itself")
	}
	if strings.ContainsAny(n, "*@/:[] ") {
		return bad(ErrInvalid, "want a domain name (letters, digits, '-', '.')")
	}
	a, err := toASCII(n)
	if err != nil {
		return bad(ErrInvalid, "%v", err)
	}
	// A name given in A-labels must round-trip: "xn--" garbage is refused.
	for _, l := range strings.Split(a, ".") {
		if strings.HasPrefix(l, "xn--") {
			if _, err := profile.ToUnicode(l); err != nil {
				return bad(ErrInvalid, "label %q is not valid punycode: %v", l, err)
			}
		}
	}
	if allDigits(a) {
		return bad(ErrInvalid, "an address is not a domain name")
	}
	if ps, icann := publicsuffix.PublicSuffix(a); ps == a && (icann || strings.Contains(a, ".")) {
		return bad(ErrPublicSuffix, "%s is a public suffix: only a name registered under it can be managed", a)
	}
	if !strings.Contains(a, ".") {
		return bad(ErrInvalid, "a name of one label cannot receive mail from the internet")
	}
	return a, nil
}

// toASCII is name in lower-case A-labels, without the absolute form's
// trailing dot. The lookup mapping (UTS #46, section 4) turns the
// ideographic and full-width full stops into '.', so that dot can appear
// only after it: "example.com\u3002" is example.com, "com\u3002" is com.
func toASCII(name string) (string, error) {
	a, err := profile.ToASCII(name)
	if err != nil {
		return "", err
	}
	a = strings.TrimSuffix(strings.ToLower(a), ".")
	if a == "" || strings.HasSuffix(a, ".") {
		return "", errors.New("empty label")
	}
	return a, nil
}

func allDigits(s string) bool {
	for _, c := range s {
		if c != '.' && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}
