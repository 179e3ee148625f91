package authdns_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/envelopd/envelopd/authdns"
	"github.com/envelopd/envelopd/authdns/dnstest"
)

func start(t *testing.T) *dnstest.Server {
	t.Helper()
	s, err := dnstest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func client(t *testing.T, s *dnstest.Server, cfg authdns.Config) *authdns.Client {
	t.Helper()
	cfg.Server = s.Addr()
	c, err := authdns.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func dnsErr(t *testing.T, err error) *net.DNSError {
	t.Helper()
	var de *net.DNSError
	if !errors.As(err, &de) {
		t.Fatalf("error %v (%T) is not a *net.DNSError", err, err)
	}
	return de
}

func TestLookups(t *testing.T) {
	t.Parallel()
	s := start(t)
	s.TXT("a.test", "v=spf1 ", "-all")
	s.TXT("a.test", "other")
	s.MX("a.test", 10, "mx.a.test")
	s.A("mx.a.test", "192.0.2.1")
	s.A("mx.a.test", "2001:db8::1")
	s.CNAME("alias.test", "a.test")
	s.PTR("1.2.0.192.in-addr.arpa", "mx.a.test")
	s.A("only4.test", "192.0.2.9")
	c := client(t, s, authdns.Config{})
	ctx := context.Background()

	txt, err := c.LookupTXT(ctx, "A.test.")
	if err != nil || len(txt) != 2 || txt[0] != "v=spf1 -all" || txt[1] != "other" {
		t.Fatalf("TXT = %q, %v", txt, err)
	}
	if txt, err := c.LookupTXT(ctx, "alias.test"); err != nil || len(txt) != 2 {
		t.Fatalf("TXT through CNAME = %q, %v", txt, err)
	}
	mx, err := c.LookupMX(ctx, "a.test")
	if err != nil || len(mx) != 1 || mx[0].Host != "mx.a.test." || mx[0].Pref != 10 {
		t.Fatalf("MX = %v, %v", mx, err)
	}
	ips, err := c.LookupIPAddr(ctx, "mx.a.test")
	if err != nil || len(ips) != 2 || ips[0].IP.String() != "192.0.2.1" || ips[1].IP.String() != "2001:db8::1" {
		t.Fatalf("IPs = %v, %v", ips, err)
	}
	if ips, err := c.LookupIPAddr(ctx, "only4.test"); err != nil || len(ips) != 1 {
		t.Fatalf("IPs of an A-only name = %v, %v", ips, err)
	}
	names, err := c.LookupAddr(ctx, "192.0.2.1")
	if err != nil || len(names) != 1 || names[0] != "mx.a.test." {
		t.Fatalf("PTR = %v, %v", names, err)
	}
	for _, name := range []string{"nx.test", "mx.a.test"} { // NXDOMAIN, no data
		_, err := c.LookupTXT(ctx, name)
		if de := dnsErr(t, err); !de.IsNotFound || de.IsTemporary {
			t.Errorf("TXT %s: %+v, want not found", name, de)
		}
	}
	if _, err := c.LookupIPAddr(ctx, "nx.test"); !dnsErr(t, err).IsNotFound {
		t.Errorf("IPs of nx.test: %v, want not found", err)
	}
}

// TestCacheHonoursTTL: an answer is reused within its TTL, asked again
// after; a temporary failure is never cached.
func TestCacheHonoursTTL(t *testing.T) {
	t.Parallel()
	s := start(t)
	s.AddTTL("short.test", 1, &dnsmessage.TXTResource{TXT: []string{"x"}})
	c := client(t, s, authdns.Config{})
	ctx := context.Background()
	for range 3 {
		if _, err := c.LookupTXT(ctx, "short.test"); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.Queries.Load(); n != 1 {
		t.Fatalf("3 lookups within the TTL asked the server %d times, want 1", n)
	}
	lookups, hits := c.Stats()
	if lookups != 3 || hits != 2 {
		t.Fatalf("stats %d lookups %d hits, want 3 and 2", lookups, hits)
	}
	time.Sleep(1100 * time.Millisecond) // the TTL itself is what is tested
	if _, err := c.LookupTXT(ctx, "short.test"); err != nil {
		t.Fatal(err)
	}
	if n := s.Queries.Load(); n != 2 {
		t.Fatalf("a lookup after the TTL did not ask again (%d queries)", n)
	}

	s.ServFail("broken.test")
	for range 2 {
		_, err := c.LookupTXT(ctx, "broken.test")
		if de := dnsErr(t, err); !de.IsTemporary || de.IsNotFound {
			t.Fatalf("SERVFAIL gave %+v, want temporary", de)
		}
	}
	if n := s.Queries.Load(); n != 4 {
		t.Fatalf("SERVFAIL was cached: %d queries, want 4", n)
	}
}

// TestTimeout: a server that never answers gives a temporary timeout
// error within the configured time.
func TestTimeout(t *testing.T) {
	t.Parallel()
	s := start(t)
	s.Silent("hang.test")
	c := client(t, s, authdns.Config{Timeout: 300 * time.Millisecond})
	_, err := c.LookupTXT(context.Background(), "hang.test")
	if de := dnsErr(t, err); !de.IsTemporary || !de.IsTimeout {
		t.Fatalf("silent server gave %+v, want a temporary timeout", de)
	}
}

// TestHostileAnswers: a huge TXT (over TCP after truncation) and 1,000 MX
// are read, bounded to MaxRecords.
func TestHostileAnswers(t *testing.T) {
	t.Parallel()
	s := start(t)
	big := strings.Repeat("a", 60000)
	s.TXT("huge.test", big)
	for i := range 1000 {
		s.MX("many.test", uint16(i), "mx"+strings.Repeat("x", i%5)+".many.test")
	}
	c := client(t, s, authdns.Config{MaxRecords: 50})
	ctx := context.Background()
	txt, err := c.LookupTXT(ctx, "huge.test")
	if err != nil || len(txt) != 1 || len(txt[0]) != 60000 {
		t.Fatalf("huge TXT: %d records, %v", len(txt), err)
	}
	mx, err := c.LookupMX(ctx, "many.test")
	if err != nil || len(mx) != 50 {
		t.Fatalf("1,000 MX gave %d records (want the 50 kept), %v", len(mx), err)
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	c, err := authdns.New(authdns.Config{Server: "192.0.2.53"})
	if err != nil || c.Server() != "192.0.2.53:53" {
		t.Fatalf("server %q, %v", c.Server(), err)
	}
	if _, err := authdns.New(authdns.Config{Server: "host:port"}); err == nil {
		t.Fatal("a bad address was accepted")
	}
}
