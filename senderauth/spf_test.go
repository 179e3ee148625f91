package senderauth_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/envelopd/envelopd/authdns"
	"github.com/envelopd/envelopd/authdns/dnstest"
	"github.com/envelopd/envelopd/senderauth"
)

// rfcSuite is the RFC 7208 test suite (openspf.org, release 2014.04), as
// shipped in blitiri.com.ar/go/spf's testdata with its "skip" marks,
// converted from YAML to JSON (testdata/spf/rfc7208-tests.json).
type rfcSuite struct {
	Description string                       `json:"description"`
	Tests       map[string]rfcTest           `json:"tests"`
	ZoneData    map[string][]json.RawMessage `json:"zonedata"`
}

type rfcTest struct {
	Helo     string          `json:"helo"`
	Host     string          `json:"host"`
	MailFrom string          `json:"mailfrom"`
	Result   json.RawMessage `json:"result"` // a word or a list of acceptable words
	Skip     string          `json:"skip"`
}

func (t rfcTest) results() []string {
	var one string
	if json.Unmarshal(t.Result, &one) == nil {
		return []string{one}
	}
	var many []string
	json.Unmarshal(t.Result, &many)
	return many
}

func loadRFCSuite(t testing.TB) []rfcSuite {
	b, err := os.ReadFile("testdata/spf/rfc7208-tests.json")
	if err != nil {
		t.Fatal(err)
	}
	var suites []rfcSuite
	if err := json.Unmarshal(b, &suites); err != nil {
		t.Fatal(err)
	}
	return suites
}

// suiteName is one name of a suite section's zone data, read the way the
// suite's own drivers read it: SPF (type 99) records stand in for TXT
// where the name has none; a list value is one record of several strings.
type suiteName struct {
	txt       [][]string
	addrs     []string // A and AAAA
	ptrs      []string
	mxs       []suiteMX
	cname     string
	cnameLoop bool
	timeout   bool
}

type suiteMX struct {
	pref uint16
	host string
}

func suiteNames(zone map[string][]json.RawMessage) map[string]*suiteName {
	out := map[string]*suiteName{}
	for name, rrs := range zone {
		n := &suiteName{}
		out[name] = n
		var spfs [][]string
		for _, raw := range rrs {
			var rr map[string]json.RawMessage
			if json.Unmarshal(raw, &rr) != nil {
				n.timeout = true // the bare word TIMEOUT
				continue
			}
			for typ, v := range rr {
				strs := stringsOf(v)
				switch typ {
				case "TXT":
					n.txt = append(n.txt, strs)
				case "SPF":
					if len(strs) > 0 {
						spfs = append(spfs, strs)
					}
				case "A", "AAAA":
					n.addrs = append(n.addrs, strs...)
				case "PTR":
					n.ptrs = append(n.ptrs, strs...)
				case "CNAME":
					n.cname = strs[0]
				case "CNAMELOOP":
					n.cnameLoop = true
				case "TIMEOUT":
					n.timeout = true
				case "MX":
					var mx []json.RawMessage
					var m suiteMX
					if json.Unmarshal(v, &mx) == nil && len(mx) == 2 && json.Unmarshal(mx[0], &m.pref) == nil && json.Unmarshal(mx[1], &m.host) == nil {
						n.mxs = append(n.mxs, m)
					}
				}
			}
		}
		if len(n.txt) == 0 {
			n.txt = spfs
		}
	}
	return out
}

// serveZone loads a suite's zone data into s: TIMEOUT makes the name
// silent, CNAMELOOP a CNAME to itself.
func serveZone(s *dnstest.Server, zone map[string][]json.RawMessage) {
	for name, n := range suiteNames(zone) {
		if n.timeout {
			s.Silent(name)
		}
		for _, strs := range n.txt {
			safe(func() { s.TXT(name, strs...) })
		}
		for _, ip := range n.addrs {
			safe(func() { s.A(name, ip) })
		}
		for _, p := range n.ptrs {
			safe(func() { s.PTR(name, p) })
		}
		for _, m := range n.mxs {
			safe(func() { s.MX(name, m.pref, m.host) })
		}
		if n.cname != "" {
			safe(func() { s.CNAME(name, n.cname) })
		}
		if n.cnameLoop {
			safe(func() { s.CNAME(name, name) })
		}
	}
}

// safe runs add, ignoring the names dnstest cannot encode (the suite has
// deliberately malformed ones: they are then simply absent).
func safe(add func()) {
	defer func() { recover() }()
	add()
}

func stringsOf(v json.RawMessage) []string {
	var one string
	if json.Unmarshal(v, &one) == nil {
		return []string{one}
	}
	var many []string
	json.Unmarshal(v, &many)
	return many
}

// knownSuiteDeviations are the suite cases where envelopd's result is not
// one the suite allows, with the reason (docs/authentication.md).
var knownSuiteDeviations = map[string]string{
	// The suite's zone has TXT data and a timeout for type SPF only; the
	// in-process server's timeout covers every type (TestInteropSPF runs
	// it against Knot, where it agrees with pyspf).
	"spftimeout": "harness: a silent name is silent for every type",
}

// TestSPFRFC7208Suite runs the RFC 7208 test suite through the real
// resolver (authdns) against an in-process DNS server serving each
// section's zone. Every case must give one of the suite's results —
// those upstream's library marks "skip" too, which internal/spf's patch
// makes right — but for the harness's own knownSuiteDeviations.
func TestSPFRFC7208Suite(t *testing.T) {
	t.Parallel()
	ran, skipped := 0, 0
	for _, suite := range loadRFCSuite(t) {
		s, err := dnstest.Start()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		serveZone(s, suite.ZoneData)
		r, err := authdns.New(authdns.Config{Server: s.Addr(), Timeout: 500 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		for name, tc := range suite.Tests {
			ran++
			got := senderauth.CheckSPF(context.Background(), r, net.ParseIP(tc.Host), tc.Helo, tc.MailFrom)
			want := tc.results()
			if why, known := knownSuiteDeviations[name]; known {
				skipped++
				if slices.Contains(want, got.Result) {
					t.Errorf("%s / %s now gives %s as the suite wants: drop it from knownSuiteDeviations (%s)", suite.Description, name, got.Result, why)
				}
				continue
			}
			if !slices.Contains(want, got.Result) {
				t.Errorf("%s / %s: %s (%s), want %s", suite.Description, name, got.Result, got.Reason, strings.Join(want, " or "))
			}
		}
	}
	if ran < 200 {
		t.Fatalf("only %d cases ran", ran)
	}
	t.Logf("%d cases ran, %d known deviations", ran, skipped)
}

// hostileZone serves the hostile SPF shapes: an include loop
// (loop.test), 21 chained includes (c0.test), 1,000 MX (mx.test), a 56 KB
// record (huge.test), and an ordinary record (plain.test).
func hostileZone(s *dnstest.Server) {
	s.TXT("loop.test", "v=spf1 include:loop2.test -all")
	s.TXT("loop2.test", "v=spf1 include:loop.test -all")
	for i := range 20 {
		s.TXT(fmt.Sprintf("c%d.test", i), fmt.Sprintf("v=spf1 include:c%d.test -all", i+1))
	}
	s.TXT("mx.test", "v=spf1 mx -all")
	for i := range 1000 {
		s.MX("mx.test", uint16(i), fmt.Sprintf("m%d.mx.test", i))
	}
	s.TXT("huge.test", "v=spf1 "+strings.Repeat("ip4:192.0.2.1 ", 4000)+"-all")
	s.TXT("plain.test", "v=spf1 ip4:198.51.100.0/24 -all")
}

// TestSPFHostileDNS: hostile zones end in permerror within the RFC 7208
// §4.6.4 limits, with a bounded number of DNS questions: an include
// loop, a chain of includes past 10, 1,000 MX, a huge TXT record, void
// lookups past 2, the %{p} macro over 100 PTR names; a silent server
// gives temperror.
func TestSPFHostileDNS(t *testing.T) {
	t.Parallel()
	s, err := dnstest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	hostileZone(s)
	s.TXT("void.test", "v=spf1 a:n1.void.test a:n2.void.test a:n3.void.test -all")
	// %{p} in every term, and 100 PTR names for the client: the
	// validated names are looked up once, for the first 10 names only.
	s.TXT("pmacro.test", "v=spf1 exists:%{p}.a.pmacro.test exists:%{p}.b.pmacro.test -all")
	s.A("h0.pmacro.test.b.pmacro.test", "127.0.0.2")
	for i := range 100 {
		s.PTR("7.100.51.198.in-addr.arpa", fmt.Sprintf("h%d.pmacro.test", i))
		s.A(fmt.Sprintf("h%d.pmacro.test", i), "198.51.100.7")
	}
	s.TXT("silent.test", "v=spf1 include:hang.test -all")
	s.Silent("hang.test")
	r, err := authdns.New(authdns.Config{Server: s.Addr(), Timeout: 500 * time.Millisecond, MaxEntries: -1})
	if err != nil {
		t.Fatal(err)
	}
	ip := net.ParseIP("198.51.100.7")
	for _, c := range []struct {
		domain, want string
		maxQueries   int64
	}{
		{"loop.test", "permerror", 20},
		{"c0.test", "permerror", 20},
		{"mx.test", "permerror", 5},
		{"huge.test", "fail", 5}, // read whole over TCP, evaluated, no match
		{"void.test", "permerror", 10},
		{"pmacro.test", "pass", 30}, // 1 PTR, 10 names' A and AAAA, 2 exists, the record
		{"silent.test", "temperror", 10},
	} {
		before := s.Queries.Load()
		got := senderauth.CheckSPF(context.Background(), r, ip, "", "x@"+c.domain)
		if n := s.Queries.Load() - before; got.Result != c.want || n > c.maxQueries {
			t.Errorf("%s: %s (%s) after %d questions; want %s within %d", c.domain, got.Result, got.Reason, n, c.want, c.maxQueries)
		}
	}
}

func TestValidateSPF(t *testing.T) {
	t.Parallel()
	for rec, ok := range map[string]bool{
		"v=spf1":        true,
		"v=spf1  -all ": true,
		"V=SPF1 +MX/24//64 ?ptr ~a:mail.example.com -all":           true,
		"v=spf1 exists:%{ir}.%{l1r+-}._spf.%{d} -all":               true,
		"v=spf1 redirect=_spf.example.com":                          true,
		"v=spf1 foo=%{d} -all":                                      true, // unknown modifier
		"v=spf1 -all redirect=a.example.com redirect=b.example.com": false,
		"v=spf1 ip4:1.2.3.4/032 -all":                               false,
		"v=spf1 ip4:1.2.3.4/33":                                     false,
		"v=spf1 ip6:1.2.3.4":                                        false,
		"v=spf1 a:example.123 -all":                                 false, // numeric top label
		"v=spf1 a:example.com- -all":                                false,
		"v=spf1 -all foo:bar":                                       false, // unknown mechanism after the match
		"v=spf1 exists:%{x}.example.com":                            false,
		"v=spf1 exists:%{c}.example.com":                            false, // exp-only letter
		"v=spf1 include":                                            false,
		"v=spf1 -all\x01":                                           false,
		"v=spf10 -all":                                              false,
	} {
		if err := senderauth.ValidateSPF(rec); (err == nil) != ok {
			t.Errorf("ValidateSPF(%q) = %v, want ok=%v", rec, err, ok)
		}
	}
}
