package senderauth

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// SPFSyntaxError is an SPF record that does not follow RFC 7208 §12's
// grammar.
type SPFSyntaxError struct {
	Term string // the offending term ("" for the record as a whole)
	Msg  string
}

func (e *SPFSyntaxError) Error() string {
	if e.Term == "" {
		return "SPF record syntax: " + e.Msg
	}
	return fmt.Sprintf("SPF record syntax: %q: %s", e.Term, e.Msg)
}

// ValidateSPF checks a whole SPF record against RFC 7208 §12's ABNF:
// version, then directives (qualifier, one of the eight mechanisms with
// its arguments) and modifiers (redirect and exp at most once, §6),
// domain-specs made of macro-strings (§7.1) ending in a top label or a
// macro, CIDR lengths without leading zeros within 32 and 128. §4.6:
// "If there are any syntax errors anywhere in the record, check_host()
// returns immediately with the result permerror" — whatever a term
// before the error would have matched.
func ValidateSPF(record string) error {
	if len(record) > 64*1024 {
		return &SPFSyntaxError{Msg: "record longer than 64 KiB"}
	}
	for i := 0; i < len(record); i++ {
		if c := record[i]; c != ' ' && (c < 0x21 || c > 0x7e) {
			return &SPFSyntaxError{Msg: fmt.Sprintf("byte 0x%02x is not printable ASCII", c)}
		}
	}
	terms := strings.Split(record, " ")
	if !strings.EqualFold(terms[0], "v=spf1") {
		return &SPFSyntaxError{Term: terms[0], Msg: "not v=spf1"}
	}
	seen := map[string]bool{}
	for _, t := range terms[1:] {
		if t == "" {
			continue // 1*SP between terms, *SP at the end
		}
		if err := validateTerm(t, seen); err != nil {
			return err
		}
	}
	return nil
}

// modifierName returns the name of a modifier term (name "=" …; name =
// ALPHA *( ALPHA / DIGIT / "-" / "_" / "." )), "" when t is not one.
func modifierName(t string) string {
	for i := 0; i < len(t); i++ {
		c := t[i]
		switch {
		case c|0x20 >= 'a' && c|0x20 <= 'z':
		case i > 0 && (c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'):
		case i > 0 && c == '=':
			return t[:i]
		default:
			return ""
		}
	}
	return ""
}

// dualCIDR splits a trailing dual-cidr-length ("/n", "//n", "/n//n")
// off arg: the rest, the IPv4 and the IPv6 length digits ("" when absent).
func dualCIDR(arg string) (rest, v4, v6 string) {
	digits := func(s string) (string, string) { // s's trailing digits, the rest
		i := len(s)
		for i > 0 && s[i-1] >= '0' && s[i-1] <= '9' {
			i--
		}
		return s[:i], s[i:]
	}
	rest = arg
	if r, d := digits(rest); d != "" && strings.HasSuffix(r, "//") {
		rest, v6 = r[:len(r)-2], d
	}
	if r, d := digits(rest); d != "" && strings.HasSuffix(r, "/") {
		rest, v4 = r[:len(r)-1], d
	}
	return rest, v4, v6
}

func validateTerm(t string, seen map[string]bool) error {
	bad := func(msg string) error { return &SPFSyntaxError{Term: t, Msg: msg} }
	if m := modifierName(t); m != "" {
		name, val := strings.ToLower(m), t[len(m)+1:]
		switch name {
		case "redirect", "exp":
			if seen[name] {
				return bad(name + "= given twice (RFC 7208 §6)")
			}
			seen[name] = true
			if err := validateDomainSpec(val); err != nil {
				return bad(err.Error())
			}
		default:
			if err := validateMacroString(val, false); err != nil {
				return bad(err.Error())
			}
		}
		return nil
	}
	d := t
	if d[0] == '+' || d[0] == '-' || d[0] == '?' || d[0] == '~' {
		d = d[1:]
	}
	name, arg, hasArg := strings.Cut(d, ":")
	if !hasArg {
		if i := strings.IndexByte(d, '/'); i >= 0 {
			name, arg = d[:i], d[i:]
		}
	}
	if err := validateMechanism(name, arg, hasArg); err != nil {
		return bad(err.Error())
	}
	return nil
}

// validateMechanism checks a mechanism (RFC 7208 §5) by its name: arg is
// what follows ":" when hasArg, else what follows the name ("/24", "").
func validateMechanism(name, arg string, hasArg bool) error {
	switch lname := strings.ToLower(name); lname {
	case "all":
		if hasArg || arg != "" {
			return errors.New("all takes no argument")
		}
	case "include", "exists":
		if !hasArg {
			return errors.New(name + " needs a domain")
		}
		return validateDomainSpec(arg)
	case "a", "mx":
		spec, v4, v6 := dualCIDR(arg)
		for _, l := range []struct {
			s   string
			max int
		}{{v4, 32}, {v6, 128}} {
			if l.s == "" {
				continue
			}
			if err := validateCIDR(l.s, l.max); err != nil {
				return err
			}
		}
		return optionalDomainSpec(hasArg, spec, "unknown mechanism")
	case "ptr":
		return optionalDomainSpec(hasArg, arg, "ptr takes no CIDR length")
	case "ip4", "ip6":
		if !hasArg {
			return errors.New(lname + " needs an address")
		}
		addr, l, hasL := strings.Cut(arg, "/")
		ok, max := isIP4(addr), 32
		if lname == "ip6" {
			ok, max = net.ParseIP(addr) != nil && strings.Contains(addr, ":"), 128
		}
		if !ok {
			return fmt.Errorf("not an IPv%s network", lname[2:])
		}
		if hasL {
			return validateCIDR(l, max)
		}
	default:
		return errors.New("unknown mechanism")
	}
	return nil
}

// optionalDomainSpec checks the domain-spec of a mechanism that may go
// without one ("a", "mx", "ptr"): with no ":" (hasArg false), anything
// left after the name (rest) is the error notAlone.
func optionalDomainSpec(hasArg bool, spec, notAlone string) error {
	if hasArg {
		return validateDomainSpec(spec)
	}
	if spec != "" {
		return errors.New(notAlone)
	}
	return nil
}

// validateCIDR checks a CIDR length: "0" or digits without a leading
// zero, at most max.
func validateCIDR(s string, max int) error {
	n, err := strconv.Atoi(s)
	if err != nil || s == "" || (len(s) > 1 && s[0] == '0') || n < 0 || n > max {
		return fmt.Errorf("bad CIDR length /%s (0–%d)", s, max)
	}
	return nil
}

// isIP4 checks qnum "." qnum "." qnum "." qnum (no leading zeros).
func isIP4(s string) bool {
	parts := strings.Split(s, ".")
	if len(parts) != 4 {
		return false
	}
	for _, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || p == "" || (len(p) > 1 && p[0] == '0') || n > 255 || p[0] == '+' || p[0] == '-' {
			return false
		}
	}
	return true
}

// validateMacroString checks a macro-string (§7.1); inDomain forbids the
// letters only "exp" text may use (c, r, t; §7.2).
func validateMacroString(s string, inDomain bool) error {
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			continue
		}
		if i+1 >= len(s) {
			return errors.New("'%' at the end of a macro-string")
		}
		switch s[i+1] {
		case '%', '_', '-':
			i++
			continue
		case '{':
		default:
			return fmt.Errorf("bad macro %q", s[i:i+2])
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return errors.New("unterminated macro")
		}
		body := s[i+2 : i+end]
		if body == "" {
			return errors.New("empty macro")
		}
		letter := body[0] | 0x20
		if !strings.ContainsRune("slodiphcrtv", rune(letter)) {
			return fmt.Errorf("unknown macro letter %q", body[:1])
		}
		if inDomain && strings.ContainsRune("crt", rune(letter)) {
			return fmt.Errorf("macro letter %q only allowed in exp text", body[:1])
		}
		rest := body[1:]
		for len(rest) > 0 && rest[0] >= '0' && rest[0] <= '9' {
			rest = rest[1:]
		}
		if len(rest) > 0 && (rest[0] == 'r' || rest[0] == 'R') {
			rest = rest[1:]
		}
		for _, c := range rest {
			if !strings.ContainsRune(".-+,/_=", c) {
				return fmt.Errorf("bad macro transformer or delimiter in %q", body)
			}
		}
		i += end
	}
	return nil
}

// validateDomainSpec checks domain-spec = macro-string domain-end, where
// domain-end is "." toplabel ["."] or a macro-expand.
func validateDomainSpec(s string) error {
	if s == "" {
		return errors.New("empty domain")
	}
	if err := validateMacroString(s, true); err != nil {
		return err
	}
	if strings.HasSuffix(s, "}") || strings.HasSuffix(s, "%%") || strings.HasSuffix(s, "%_") || strings.HasSuffix(s, "%-") {
		return nil // ends in a macro-expand
	}
	d := strings.TrimSuffix(s, ".")
	i := strings.LastIndexByte(d, '.')
	if i < 0 {
		return errors.New("domain has no top label after a dot")
	}
	if !isTopLabel(d[i+1:]) {
		return fmt.Errorf("bad top label %q", d[i+1:])
	}
	return nil
}

// isTopLabel: ( *alphanum ALPHA *alphanum ) / ( 1*alphanum "-"
// *( alphanum / "-" ) alphanum ) — not all digits, no leading or
// trailing hyphen.
func isTopLabel(l string) bool {
	if l == "" || l[0] == '-' || l[len(l)-1] == '-' {
		return false
	}
	alpha, hyphen := false, false
	for i := 0; i < len(l); i++ {
		c := l[i] | 0x20
		switch {
		case c >= 'a' && c <= 'z':
			alpha = true
		case l[i] >= '0' && l[i] <= '9':
		case l[i] == '-':
			hyphen = true
		default:
			return false
		}
	}
	return alpha || hyphen
}

// strictSPF is the Resolver internal/spf evaluates through: every
// SPF record it fetches is first checked whole by ValidateSPF, and one
// with a syntax error is replaced by a record the library evaluates to
// permerror at its first term, so that an error after a matching term
// still gives permerror (§4.6). err keeps the first syntax error seen.
type strictSPF struct {
	Resolver
	err error
}

// permerrorRecord makes internal/spf's check_host() return permerror at once
// (an ip4 CIDR length out of range).
const permerrorRecord = "v=spf1 ip4:0.0.0.0/99"

func (s *strictSPF) LookupTXT(ctx context.Context, name string) ([]string, error) {
	txts, err := s.Resolver.LookupTXT(ctx, name)
	txts = append([]string(nil), txts...) // never change a resolver's slice
	for i, t := range txts {
		lt := strings.ToLower(t)
		if lt != "v=spf1" && !strings.HasPrefix(lt, "v=spf1 ") {
			continue
		}
		if verr := ValidateSPF(t); verr != nil {
			if s.err == nil {
				s.err = fmt.Errorf("%s: %w", strings.TrimSuffix(name, "."), verr)
			}
			txts[i] = permerrorRecord
		}
	}
	return txts, err
}
