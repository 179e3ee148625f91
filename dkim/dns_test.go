package dkim

import (
	"context"
	"errors"
	"net"
	"reflect"
	"testing"
	"time"
)

// fakeDNS answers from a table and counts queries; names absent from the
// table are NXDOMAIN, names in temp fail temporarily.
type fakeDNS struct {
	txt   map[string][]string
	temp  map[string]bool
	block bool // wait for the context instead of answering
	calls map[string]int
}

func (f *fakeDNS) lookup(ctx context.Context, name string) ([]string, error) {
	f.calls[name]++
	switch {
	case f.block:
		<-ctx.Done()
		return nil, &net.DNSError{Err: "i/o timeout", Name: name, IsTimeout: true}
	case f.temp[name]:
		return nil, &net.DNSError{Err: "server misbehaving", Name: name, IsTemporary: true}
	}
	if txt, ok := f.txt[name]; ok {
		return txt, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: name, IsNotFound: true}
}

func newFakeResolver(ttl time.Duration) (*DNSResolver, *fakeDNS, *time.Time) {
	f := &fakeDNS{
		txt:   map[string][]string{"ed1._domainkey.lab.test": {"v=DKIM1; k=ed25519; p=AAAA"}},
		temp:  map[string]bool{"flaky._domainkey.lab.test": true},
		calls: map[string]int{},
	}
	now := time.Unix(1_700_000_000, 0)
	r := NewDNSResolver(50*time.Millisecond, ttl)
	r.lookup = f.lookup
	r.now = func() time.Time { return now }
	return r, f, &now
}

func TestDNSResolverCache(t *testing.T) {
	r, f, now := newFakeResolver(time.Minute)
	ctx := context.Background()
	for range 3 {
		got, err := r.LookupTXT(ctx, "ED1._domainkey.lab.test.")
		if err != nil || !reflect.DeepEqual(got, []string{"v=DKIM1; k=ed25519; p=AAAA"}) {
			t.Fatalf("got %q, %v", got, err)
		}
		_, err = r.LookupTXT(ctx, "none._domainkey.lab.test")
		var le *LookupError
		if !errors.Is(err, ErrNoRecord) || !errors.As(err, &le) || le.Temporary() {
			t.Fatalf("not found: %v", err)
		}
		_, err = r.LookupTXT(ctx, "flaky._domainkey.lab.test")
		if !errors.As(err, &le) || !le.Temporary() {
			t.Fatalf("temporary: %v", err)
		}
	}
	want := map[string]int{"ed1._domainkey.lab.test": 1, "none._domainkey.lab.test": 1, "flaky._domainkey.lab.test": 3}
	if !reflect.DeepEqual(f.calls, want) {
		t.Errorf("queries %v, want %v (answers and NXDOMAIN cached, temporary failures not)", f.calls, want)
	}

	*now = now.Add(time.Minute)
	r.LookupTXT(ctx, "ed1._domainkey.lab.test")
	r.LookupTXT(ctx, "none._domainkey.lab.test")
	if f.calls["ed1._domainkey.lab.test"] != 2 || f.calls["none._domainkey.lab.test"] != 2 {
		t.Errorf("after the TTL: queries %v, want a second query each", f.calls)
	}
}

func TestDNSResolverNoCache(t *testing.T) {
	r, f, _ := newFakeResolver(0)
	for range 2 {
		r.LookupTXT(context.Background(), "ed1._domainkey.lab.test")
	}
	if f.calls["ed1._domainkey.lab.test"] != 2 {
		t.Errorf("ttl 0: %d queries, want 2", f.calls["ed1._domainkey.lab.test"])
	}
}

func TestDNSResolverTimeout(t *testing.T) {
	r, f, _ := newFakeResolver(time.Minute)
	f.block = true
	start := time.Now()
	_, err := r.LookupTXT(context.Background(), "ed1._domainkey.lab.test")
	var le *LookupError
	if !errors.As(err, &le) || !le.Temporary() || !le.Timeout() {
		t.Fatalf("err = %v, want a temporary timeout", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("lookup did not honour the resolver timeout")
	}
	// Through the verifier, a timeout is temperror.
	v := &Verifier{Resolver: r}
	res, err := v.Verify(context.Background(), readFile(t, testdata+"verify/rfc6376-c.eml"))
	if err != nil || len(res) != 1 || res[0].Result != TempError {
		t.Errorf("verify: %+v, %v; want one temperror", res, err)
	}
}

func TestDNSResolverCacheBound(t *testing.T) {
	r, _, now := newFakeResolver(time.Minute)
	for i := range maxCacheEntries + 10 {
		r.store(string(rune('a'+i%26))+time.Duration(i).String(), nil, nil)
		if i == maxCacheEntries/2 {
			*now = now.Add(2 * time.Minute)
		}
	}
	if n := len(r.cache); n > maxCacheEntries {
		t.Errorf("cache holds %d entries, bound is %d", n, maxCacheEntries)
	}
}
