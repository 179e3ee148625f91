package senderauth_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/envelopd/envelopd/dkim"
	"github.com/envelopd/envelopd/senderauth"
)

// dmarcZone is the policy records of the DMARC matrix.
var dmarcZone = map[string]string{
	"_dmarc.example.com":      "v=DMARC1; p=reject; sp=quarantine; rua=mailto:d@example.com",
	"_dmarc.strict.test":      "v=DMARC1; p=reject; adkim=s; aspf=s",
	"_dmarc.sampled.test":     "v=DMARC1; p=reject; pct=0",
	"_dmarc.bank.co.uk":       "v=DMARC1; p=reject",
	"_dmarc.quarantine.test":  "v=DMARC1; p=quarantine",
	"_dmarc.monitor.test":     "v=DMARC1; p=none",
	"_dmarc.ruaonly.test":     "v=DMARC1; rua=mailto:r@ruaonly.test",
	"_dmarc.bad.test":         "v=DMARC1; p=bogus",
	"_dmarc.notfirst.test":    "p=reject; v=DMARC1",
	"_dmarc.own.example.com":  "v=DMARC1; p=none",
	"_dmarc.unknowntags.test": "v=DMARC1; p=reject; foo=bar; pct=abc",
}

func dkimRes(d, res string) dkim.Result { return dkim.Result{Domain: d, Selector: "s", Result: res} }

// TestDMARCMatrix checks DMARC evaluation over policies, strict and
// relaxed alignment, subdomain policies and public-suffix subdomains
// against the results RFC 7489 prescribes (§3.1 alignment, §6.3 record
// syntax, §6.6.3 policy discovery, §6.6.4 pct).
func TestDMARCMatrix(t *testing.T) {
	t.Parallel()
	s, r := dns(t)
	for n, v := range dmarcZone {
		s.TXT(n, v)
	}
	s.TXT("_dmarc.two.test", "v=DMARC1; p=reject")
	s.TXT("_dmarc.two.test", "v=DMARC1; p=none")
	s.ServFail("_dmarc.broken.test")
	dmarcMatrix(t, r)
}

// dmarcMatrix runs the matrix over r, which serves dmarcZone, two
// records at _dmarc.two.test and SERVFAIL at _dmarc.broken.test.
func dmarcMatrix(t *testing.T, r senderauth.Resolver) int {
	n := 0
	spf := func(res, d string) *senderauth.SPF { return &senderauth.SPF{Result: res, Domain: d} }
	for i, c := range []struct {
		from     string
		spf      *senderauth.SPF
		dkim     []dkim.Result
		result   string
		policy   string
		disp     string
		alignedD []string
		alignedS string
	}{
		// RFC 7489 §3.1.1's examples, relaxed: d= equal or a subdomain.
		{"example.com", nil, []dkim.Result{dkimRes("example.com", "pass")}, "pass", "reject", "none", []string{"example.com"}, ""},
		{"example.com", nil, []dkim.Result{dkimRes("news.example.com", "pass")}, "pass", "reject", "none", []string{"news.example.com"}, ""},
		{"news.example.com", nil, []dkim.Result{dkimRes("example.com", "pass")}, "pass", "quarantine", "none", []string{"example.com"}, ""},
		// §3.1.2: SPF's MAIL FROM domain.
		{"example.com", spf("pass", "bounce.example.com"), nil, "pass", "reject", "none", []string{}, "bounce.example.com"},
		{"example.com", spf("fail", "example.com"), []dkim.Result{dkimRes("example.com", "fail")}, "fail", "reject", "reject", []string{}, ""},
		{"example.com", spf("pass", "other.test"), []dkim.Result{dkimRes("other.test", "pass")}, "fail", "reject", "reject", []string{}, ""},
		// sp= for a subdomain without its own record.
		{"sub.example.com", nil, nil, "fail", "quarantine", "quarantine", []string{}, ""},
		// A subdomain with its own record uses it.
		{"own.example.com", nil, nil, "fail", "none", "none", []string{}, ""},
		// Strict: only the exact domain aligns.
		{"strict.test", spf("pass", "mail.strict.test"), []dkim.Result{dkimRes("mail.strict.test", "pass")}, "fail", "reject", "reject", []string{}, ""},
		{"strict.test", spf("pass", "strict.test"), nil, "pass", "reject", "none", []string{}, "strict.test"},
		// pct=0: reject becomes quarantine (§6.6.4).
		{"sampled.test", nil, nil, "fail", "reject", "quarantine", []string{}, ""},
		// Public suffix: bank.co.uk and evil.co.uk are different
		// organizations; a subdomain of bank.co.uk is bank.co.uk's.
		{"bank.co.uk", nil, []dkim.Result{dkimRes("evil.co.uk", "pass")}, "fail", "reject", "reject", []string{}, ""},
		{"bank.co.uk", spf("pass", "evil.co.uk"), nil, "fail", "reject", "reject", []string{}, ""},
		{"pay.bank.co.uk", nil, []dkim.Result{dkimRes("bank.co.uk", "pass")}, "pass", "reject", "none", []string{"bank.co.uk"}, ""},
		{"co.uk", nil, []dkim.Result{dkimRes("bank.co.uk", "pass")}, "none", "", "none", []string{}, ""},
		// No record: none, alignment still reported.
		{"norecord.test", nil, []dkim.Result{dkimRes("norecord.test", "pass")}, "none", "", "none", []string{"norecord.test"}, ""},
		{"quarantine.test", nil, nil, "fail", "quarantine", "quarantine", []string{}, ""},
		{"monitor.test", nil, nil, "fail", "none", "none", []string{}, ""},
		// §6.6.3 step 6: no valid p= but rua=: p=none.
		{"ruaonly.test", nil, nil, "fail", "none", "none", []string{}, ""},
		{"bad.test", nil, nil, "permerror", "", "none", []string{}, ""},
		{"notfirst.test", nil, nil, "none", "", "none", []string{}, ""},
		{"unknowntags.test", nil, nil, "fail", "reject", "reject", []string{}, ""},
		{"two.test", nil, nil, "none", "", "none", []string{}, ""},
		// Temporary failures: the record, or an identifier that could align.
		{"broken.test", nil, []dkim.Result{dkimRes("broken.test", "pass")}, "temperror", "", "none", []string{"broken.test"}, ""},
		{"example.com", spf("temperror", "example.com"), nil, "temperror", "reject", "none", []string{}, ""},
		{"example.com", nil, []dkim.Result{dkimRes("example.com", "temperror")}, "temperror", "reject", "none", []string{}, ""},
		{"", nil, nil, "none", "", "none", []string{}, ""},
	} {
		n++
		t.Run(fmt.Sprint(i, "_", c.from), func(t *testing.T) {
			got := senderauth.CheckDMARC(context.Background(), r, c.from, c.spf, c.dkim, "<m@x>")
			if got.Result != c.result || got.Policy != c.policy || got.Disposition != c.disp ||
				!slices.Equal(got.Aligned.DKIM, c.alignedD) || got.Aligned.SPF != c.alignedS {
				t.Fatalf("got %s policy %q disposition %q aligned %v/%q (%s); want %s %q %q %v/%q",
					got.Result, got.Policy, got.Disposition, got.Aligned.DKIM, got.Aligned.SPF, got.Reason,
					c.result, c.policy, c.disp, c.alignedD, c.alignedS)
			}
		})
	}
	return n
}

func TestIsAligned(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		id, from, mode string
		want           bool
	}{
		{"example.com", "example.com", "s", true},
		{"mail.example.com", "example.com", "s", false},
		{"mail.example.com", "example.com", "r", true},
		{"a.example.com", "b.example.com", "r", true},
		{"evil.co.uk", "bank.co.uk", "r", false},
		{"bank.co.uk", "www.bank.co.uk", "r", true},
		{"co.uk", "bank.co.uk", "r", false},
		{"", "example.com", "r", false},
		{"EXAMPLE.com.", "example.COM", "s", true},
	} {
		if got := senderauth.IsAligned(c.id, c.from, c.mode); got != c.want {
			t.Errorf("IsAligned(%q, %q, %q) = %v", c.id, c.from, c.mode, got)
		}
	}
}

func TestParseRecord(t *testing.T) {
	t.Parallel()
	r, err := senderauth.ParseRecord("v=DMARC1;p=Quarantine; sp=none; adkim=s; aspf=s; pct=25")
	if err != nil || *r != (senderauth.Record{Policy: "quarantine", SubdomainPolicy: "none", DKIMAlignment: "s", SPFAlignment: "s", Percent: 25}) {
		t.Fatalf("%+v %v", r, err)
	}
	for _, bad := range []string{"", "v=DMARC2; p=none", "p=none", "v=DMARC1", "v=DMARC1; p=bogus"} {
		if _, err := senderauth.ParseRecord(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestVerdictAuthenticatedAs: how each DMARC outcome and the DKIM results
// decide authenticated_as (the ARC cases are in mailin's
// TestARCTrustedForwarder).
func TestVerdictAuthenticatedAs(t *testing.T) {
	t.Parallel()
	s, r := dns(t)
	for n, v := range dmarcZone {
		s.TXT(n, v)
	}
	s.ServFail("_dmarc.broken.test")
	c := &senderauth.Checker{Resolver: r}
	for _, tc := range []struct {
		from   string
		spf    *senderauth.SPF
		dkim   []dkim.Result
		as, by string
	}{
		{"a@example.com", nil, []dkim.Result{dkimRes("example.com", "pass")}, "example.com", "dmarc"},
		{"a@example.com", &senderauth.SPF{Result: "pass", Domain: "example.com"}, nil, "example.com", "dmarc"},
		{"a@norecord.test", nil, []dkim.Result{dkimRes("norecord.test", "pass")}, "norecord.test", "dkim"},
		{"a@norecord.test", &senderauth.SPF{Result: "pass", Domain: "norecord.test"}, nil, "", ""}, // SPF alone without a policy
		{"a@bad.test", nil, []dkim.Result{dkimRes("bad.test", "pass")}, "bad.test", "dkim"},        // permerror record
		{"a@example.com", nil, []dkim.Result{dkimRes("evil.test", "pass")}, "", ""},
		{"a@broken.test", nil, []dkim.Result{dkimRes("broken.test", "pass")}, "", ""}, // temperror: not decided
		{"Alice <A@Example.COM>", nil, []dkim.Result{dkimRes("example.com", "pass")}, "example.com", "dmarc"},
		{"", nil, []dkim.Result{dkimRes("example.com", "pass")}, "", ""},
	} {
		var from []string
		if tc.from != "" {
			from = []string{tc.from}
		}
		v := c.Verdict(context.Background(), senderauth.Input{From: from, SPF: tc.spf, DKIM: tc.dkim})
		if v.AuthenticatedAs != tc.as || v.AuthenticatedBy != tc.by {
			t.Errorf("From %q: authenticated_as %q by %q (dmarc %s), want %q by %q", tc.from, v.AuthenticatedAs, v.AuthenticatedBy, v.DMARC.Result, tc.as, tc.by)
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var back senderauth.Verdict
		if err := json.Unmarshal(b, &back); err != nil || back.AuthenticatedAs != v.AuthenticatedAs || (v.AuthenticatedAs == "" && !strings.Contains(string(b), `"authenticated_as":null`)) {
			t.Errorf("JSON round trip: %s → %+v, %v", b, back, err)
		}
	}
}
