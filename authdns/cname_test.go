package authdns_test

import (
	"context"
	"testing"

	"github.com/envelopd/envelopd/authdns"
)

// TestLookupCNAME: the CNAME record itself (one hop), and not found for
// a name with other records only.
func TestLookupCNAME(t *testing.T) {
	t.Parallel()
	s := start(t)
	s.CNAME("mta-sts.a.test", "mx.b.test")
	s.CNAME("mx.b.test", "host.c.test")
	s.A("plain.a.test", "192.0.2.1")
	c := client(t, s, authdns.Config{})
	ctx := context.Background()
	if got, err := c.LookupCNAME(ctx, "mta-sts.a.test"); err != nil || got != "mx.b.test." {
		t.Errorf("LookupCNAME = %q, %v", got, err)
	}
	if _, err := c.LookupCNAME(ctx, "plain.a.test"); !dnsErr(t, err).IsNotFound {
		t.Errorf("no CNAME: %v", err)
	}
	// A lookups still follow the chain inside an answer.
	s.A("host.c.test", "192.0.2.7")
	if ips, err := c.LookupIPAddr(ctx, "mta-sts.a.test"); err != nil || len(ips) != 1 || ips[0].IP.String() != "192.0.2.7" {
		t.Errorf("LookupIPAddr through CNAMEs = %v, %v", ips, err)
	}
}
