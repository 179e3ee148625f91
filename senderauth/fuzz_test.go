package senderauth_test

import (
	"context"
	"errors"
	"net"
	"os"
	"testing"

	"github.com/envelopd/envelopd/senderauth"
)

// FuzzParseRecord: any TXT value gives a record with valid values or an
// error, never a panic.
func FuzzParseRecord(f *testing.F) {
	for _, s := range []string{"v=DMARC1; p=reject", "v=DMARC1;p=none;sp=quarantine;pct=50;adkim=s", "v=DMARC1; rua=mailto:a@b", "", ";;", "v=DMARC1; p="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := senderauth.ParseRecord(s)
		if err != nil {
			return
		}
		ok := func(p string) bool { return p == "none" || p == "quarantine" || p == "reject" }
		if !ok(r.Policy) || (r.SubdomainPolicy != "" && !ok(r.SubdomainPolicy)) || r.Percent < 0 || r.Percent > 100 ||
			(r.DKIMAlignment != "r" && r.DKIMAlignment != "s") || (r.SPFAlignment != "r" && r.SPFAlignment != "s") {
			t.Fatalf("%q gave %+v", s, r)
		}
	})
}

// noDNS answers every lookup "not found".
type noDNS struct{}

func (noDNS) LookupTXT(context.Context, string) ([]string, error) {
	return nil, &net.DNSError{Err: "no such host", IsNotFound: true}
}
func (noDNS) LookupMX(context.Context, string) ([]*net.MX, error) {
	return nil, &net.DNSError{Err: "no such host", IsNotFound: true}
}
func (noDNS) LookupIPAddr(context.Context, string) ([]net.IPAddr, error) {
	return nil, &net.DNSError{Err: "no such host", IsNotFound: true}
}
func (noDNS) LookupAddr(context.Context, string) ([]string, error) {
	return nil, &net.DNSError{Err: "no such host", IsNotFound: true}
}

// FuzzVerifyARC: any message gives pass, fail or none, never a panic;
// without keys nothing passes.
func FuzzVerifyARC(f *testing.F) {
	for _, name := range []string{"forwarded.eml", "two_hop.eml", "broken.eml"} {
		b, err := os.ReadFile("testdata/arc/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("ARC-Seal: i=1\r\n\r\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		a := senderauth.VerifyARC(context.Background(), noDNS{}, raw)
		if a.Result != "none" && a.Result != "fail" {
			t.Fatalf("result %q without any key", a.Result)
		}
	})
}

// FuzzValidateSPF: any record is accepted or refused with an
// *SPFSyntaxError, never a panic; a record refused stays refused with
// anything appended after a space (an error anywhere is an error).
func FuzzValidateSPF(f *testing.F) {
	for _, s := range []string{"v=spf1 -all", "v=spf1 ip4:192.0.2.0/24 include:_spf.example.com ~all", "v=spf1 exists:%{ir}.%{l1r+-}._spf.%{d} -all",
		"v=spf1 a:foo.example.com/24//64 mx redirect=x.example.com", "v=spf1 ip6:2001:db8::/32 exp=%{d}.x.example", "v=spf1 a:1.2.3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := senderauth.ValidateSPF(s)
		if err == nil {
			return
		}
		var se *senderauth.SPFSyntaxError
		if !errors.As(err, &se) {
			t.Fatalf("%q: error %T", s, err)
		}
		if senderauth.ValidateSPF(s+" -all") == nil {
			t.Fatalf("%q refused, %q accepted", s, s+" -all")
		}
	})
}
