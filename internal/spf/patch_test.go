package spf

import (
	"net"
	"testing"
)

// TestSlashInDomainSpec: a domain-spec may hold "/" (RFC 7208 §7.1, the
// suite's a-colon-domain and mx-colon-domain cases); the CIDR lengths are
// the field's trailing "/N" and "//N" only, and a "/" in the last label is
// still a malformed length.
func TestSlashInDomainSpec(t *testing.T) {
	t.Parallel()
	dns := newTestResolver()
	ip := net.ParseIP("1.2.3.4")
	dns.Ip["foo:bar/baz.example.com"] = []net.IP{ip}
	dns.Ip["near.example.com"] = []net.IP{net.ParseIP("1.2.3.99")}
	dns.Mx["m/x.example.com"] = []*net.MX{{Host: "foo:bar/baz.example.com", Pref: 1}}
	dns.Txt["in/c.example.com"] = []string{"v=spf1 ip4:1.2.3.4 -all"}
	dns.Ip["a.example.com"] = []net.IP{ip}
	for _, c := range []struct {
		rec  string
		want Result
		err  error
	}{
		{"v=spf1 a:foo:bar/baz.example.com -all", Pass, ErrMatchedA},
		{"v=spf1 a:foo:bar/baz.example.com/32 -all", Pass, ErrMatchedA},
		{"v=spf1 a:foo:bar/baz.example.com/24//64 -all", Pass, ErrMatchedA},
		{"v=spf1 a:near.example.com/24 -all", Pass, ErrMatchedA},
		{"v=spf1 a:near.example.com/32 -all", Fail, ErrMatchedAll},
		{"v=spf1 mx:m/x.example.com -all", Pass, ErrMatchedMX},
		{"v=spf1 mx:m/x.example.com//128 -all", Pass, ErrMatchedMX},
		{"v=spf1 include:in/c.example.com -all", Pass, ErrMatchedIP},
		{"v=spf1 exists:foo:bar/baz.example.com -all", Pass, ErrMatchedExists},
		{"v=spf1 a:a.example.com/montoto -all", PermError, ErrInvalidMask},
		{"v=spf1 a:a.example.com/24/100 -all", PermError, ErrInvalidMask},
		{"v=spf1 a:x/ -all", PermError, ErrInvalidMask},
		{"v=spf1 a:/24 -all", PermError, ErrInvalidMask},
		{"v=spf1 a: -all", PermError, ErrInvalidDomain},
		{"v=spf1 a/ -all", PermError, ErrInvalidMask},
		{"v=spf1 a/x -all", PermError, ErrInvalidMask},
		{"v=spf1 a:a.example.com/33 -all", PermError, ErrInvalidMask},
		{"v=spf1 include:a.example.com/24 -all", PermError, ErrInvalidMacro},
	} {
		dns.Txt["domain.example.com"] = []string{c.rec}
		res, err := CheckHostWithSender(ip, "helo.example.com", "x@domain.example.com", WithResolver(dns))
		if res != c.want || err != c.err {
			t.Errorf("%q: %s [%v], want %s [%v]", c.rec, res, err, c.want, c.err)
		}
	}
}

// TestPMacro: %{p} is a validated name of the client IP (RFC 7208 §7.3,
// §5.5): the domain itself first, then a subdomain of it, then any; a
// name whose addresses do not include the IP is not validated; none, or a
// DNS error, gives "unknown".
func TestPMacro(t *testing.T) {
	t.Parallel()
	ip := net.ParseIP("192.0.2.42")
	for _, c := range []struct {
		name   string
		ptr    []string
		ptrErr error
		want   string
	}{
		{"subdomain preferred", []string{"mx.other.test.", "mx.d.test."}, nil, "mx.d.test"},
		{"the domain itself preferred", []string{"mx.d.test.", "d.test.", "mx.other.test."}, nil, "d.test"},
		{"any validated name", []string{"unvalidated.test.", "mx.other.test."}, nil, "mx.other.test"},
		{"no validated name", []string{"unvalidated.test."}, nil, "unknown"},
		{"no PTR", nil, nil, "unknown"},
		{"DNS error", nil, &net.DNSError{Err: "timeout", IsTemporary: true}, "unknown"},
	} {
		dns := newTestResolver()
		for _, n := range []string{"mx.other.test", "mx.d.test", "d.test"} {
			dns.Ip[n] = []net.IP{ip}
		}
		dns.Ip["unvalidated.test"] = []net.IP{net.ParseIP("192.0.2.1")}
		dns.Addr[ip.String()] = c.ptr
		if c.ptrErr != nil {
			dns.Errors[ip.String()] = c.ptrErr
		}
		dns.Txt["d.test"] = []string{"v=spf1 exists:%{p}.ok.test -all"}
		dns.Ip[c.want+".ok.test"] = []net.IP{net.ParseIP("127.0.0.2")}
		res, err := CheckHostWithSender(ip, "helo.test", "x@d.test", WithResolver(dns))
		if res != Pass || err != ErrMatchedExists {
			t.Errorf("%s: %s [%v], want pass from exists:%s.ok.test", c.name, res, err, c.want)
		}
	}
}
