package domain

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"strings"
)

// Resolver is the lookups a check needs (authdns.Client has them).
type Resolver interface {
	LookupTXT(ctx context.Context, name string) ([]string, error)
	LookupMX(ctx context.Context, name string) ([]*net.MX, error)
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
	LookupCNAME(ctx context.Context, name string) (string, error)
}

// Check states.
const (
	StateOK          = "ok"
	StateMissing     = "missing"
	StateDifferent   = "different"
	StatePropagating = "propagating"
	StateError       = "error"
)

// Result is one record's check.
type Result struct {
	Kind     string `json:"kind"`
	Type     string `json:"type"`
	Name     string `json:"name"`
	Priority int    `json:"priority,omitempty"`
	Want     string `json:"want"`
	Got      string `json:"got"` // what the resolver answered ("" when nothing); several records joined by " | "
	State    string `json:"state"`
	Detail   string `json:"detail,omitempty"`
}

// Checker looks records up.
type Checker struct {
	// Resolver is the resolver mail senders would use (authdns over
	// --dns). Give it no cache, or a check repeats a stale answer.
	Resolver Resolver
	// Authoritative, when set, asks the domain's authoritative server: a
	// record wrong through Resolver but right there is propagating.
	Authoritative Resolver
}

// Check checks every record; ok reports that all are right.
func (c Checker) Check(ctx context.Context, rs []Record) (out []Result, ok bool) {
	ok = true
	for _, r := range rs {
		res := check(ctx, c.Resolver, r)
		if (res.State == StateMissing || res.State == StateDifferent) && c.Authoritative != nil {
			if a := check(ctx, c.Authoritative, r); a.State == StateOK {
				res.State = StatePropagating
				res.Detail = "right at the authoritative server; the resolver still answers the old data"
			}
		}
		if res.State != StateOK {
			ok = false
		}
		out = append(out, res)
	}
	return out, ok
}

func want(r Record) string {
	if r.Type == TypeMX {
		return strconv.Itoa(r.Priority) + " " + r.Value
	}
	return r.Value
}

func fqdn(h string) string { return strings.ToLower(strings.TrimSuffix(h, ".")) + "." }

// txtPrefix selects the TXT records of a kind at a name shared with
// others (the apex holds site verifications too): RFC 7208 §4.5, RFC
// 7489 §6.6.3, RFC 8461 §3.1, RFC 8460 §3.
var txtPrefix = map[string]string{"spf": "v=spf1", "dmarc": "v=DMARC1", "mta-sts": "v=STSv1", "tls-rpt": "v=TLSRPTv1"}

func check(ctx context.Context, res Resolver, r Record) Result {
	out := Result{Kind: r.Kind, Type: r.Type, Name: r.Name, Priority: r.Priority, Want: want(r)}
	fail := func(err error) Result {
		var de *net.DNSError
		if errors.As(err, &de) && de.IsNotFound {
			out.State = StateMissing
			return out
		}
		out.State, out.Detail = StateError, err.Error()
		return out
	}
	switch r.Type {
	case TypeMX:
		mxs, err := res.LookupMX(ctx, r.Name)
		if err != nil {
			return fail(err)
		}
		var got []string
		ours := false
		for _, mx := range mxs {
			got = append(got, strconv.Itoa(int(mx.Pref))+" "+fqdn(mx.Host))
			ours = ours || fqdn(mx.Host) == fqdn(r.Value)
		}
		slices.Sort(got)
		out.Got = strings.Join(got, " | ")
		switch {
		case len(mxs) == 0:
			out.State = StateMissing
		case !ours:
			out.State, out.Detail = StateDifferent, "the mail of the domain goes to another host"
		case len(mxs) > 1:
			out.State, out.Detail = StateDifferent, "other MX hosts receive the domain's mail too"
		default:
			out.State = StateOK
		}
	case TypeCNAME:
		// The mta-sts host must reach the MX host, which serves the
		// policy: a CNAME to it (what the zone file says), or A/AAAA
		// records with its addresses.
		target, err := res.LookupCNAME(ctx, r.Name)
		if err == nil {
			out.Got = fqdn(target)
			if out.Got == fqdn(r.Value) {
				out.State = StateOK
			} else {
				out.State = StateDifferent
			}
			return out
		}
		var de *net.DNSError
		if !errors.As(err, &de) || !de.IsNotFound {
			return fail(err)
		}
		got, err := addrs(ctx, res, r.Name)
		if err != nil {
			return fail(err)
		}
		out.Got = strings.Join(got, ", ")
		wantAddrs, err := addrs(ctx, res, r.Value)
		if err != nil {
			out.State, out.Detail = StateDifferent, "not a CNAME, and the MX host "+r.Value+" has no address to compare with: "+err.Error()
			return out
		}
		if slices.Equal(got, wantAddrs) {
			out.State = StateOK
		} else {
			out.State, out.Detail = StateDifferent, "neither a CNAME to the MX host nor its addresses ("+strings.Join(wantAddrs, ", ")+")"
		}
	case TypeTXT:
		txts, err := res.LookupTXT(ctx, r.Name)
		if err != nil {
			return fail(err)
		}
		if p, ok := txtPrefix[r.Kind]; ok {
			var mine []string
			for _, t := range txts {
				if strings.EqualFold(firstTerm(t), p) {
					mine = append(mine, t)
				}
			}
			txts = mine
		}
		out.Got = strings.Join(txts, " | ")
		switch {
		case len(txts) == 0:
			out.State = StateMissing
		case len(txts) > 1:
			out.State, out.Detail = StateDifferent, "several records where one is allowed"
		case sameTXT(r.Kind, r.Value, txts[0]):
			out.State = StateOK
		default:
			out.State = StateDifferent
		}
	}
	return out
}

func addrs(ctx context.Context, res Resolver, host string) ([]string, error) {
	ips, err := res.LookupIPAddr(ctx, strings.TrimSuffix(host, "."))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, ip := range ips {
		out = append(out, ip.IP.String())
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// sameTXT compares a TXT record with the wanted one by meaning: SPF term
// by term (RFC 7208 §4.6.1, case-insensitive), tag lists (DKIM RFC 6376
// §3.2, DMARC, MTA-STS, TLS-RPT) tag by tag — every wanted tag present
// with the same value (white space ignored; only DKIM's p= is
// case-sensitive), other tags allowed.
func sameTXT(kind, want, got string) bool {
	if kind == "spf" {
		return slices.Equal(strings.Fields(strings.ToLower(want)), strings.Fields(strings.ToLower(got)))
	}
	w, g := tags(want), tags(got)
	if w == nil || g == nil {
		return false
	}
	for k, v := range w {
		gv, ok := g[k]
		if !ok {
			return false
		}
		if kind == "dkim" && k == "p" {
			if v != gv {
				return false
			}
		} else if !strings.EqualFold(v, gv) {
			return false
		}
	}
	return true
}

// tags parses a tag=value list; nil when malformed or a tag repeats.
func tags(s string) map[string]string {
	out := map[string]string{}
	for _, part := range strings.Split(s, ";") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		k = strings.ToLower(strings.TrimSpace(k))
		if !ok || k == "" {
			return nil
		}
		if _, dup := out[k]; dup {
			return nil
		}
		out[k] = strings.Join(strings.Fields(v), "")
	}
	return out
}

// firstTerm is a TXT record's first term: "v=spf1" of "v=spf1 mx ~all",
// "v=DMARC1" of "v=DMARC1; p=none".
func firstTerm(t string) string {
	tag, _, _ := strings.Cut(t, ";")
	if f := strings.Fields(tag); len(f) > 0 {
		return strings.ReplaceAll(f[0], " ", "")
	}
	return ""
}
