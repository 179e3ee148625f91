package dkim

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
)

const testdata = "../testdata/dkim/"

func testResolver(t testing.TB) *StaticResolver {
	t.Helper()
	r, err := LoadStaticResolver(testdata + "keys.txt")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestVerifyCorpus verifies every testdata/dkim/verify/NAME.eml against
// testdata/dkim/keys.txt and compares with NAME.json. A new case is a new
// pair of files.
func TestVerifyCorpus(t *testing.T) {
	v := &Verifier{Resolver: testResolver(t)}
	files, err := filepath.Glob(testdata + "verify/*.eml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no cases: %v", err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".eml")
		t.Run(name, func(t *testing.T) {
			var want []Result
			if err := json.Unmarshal(readFile(t, strings.TrimSuffix(f, ".eml")+".json"), &want); err != nil {
				t.Fatal(err)
			}
			got, err := v.Verify(context.Background(), readFile(t, f))
			if err != nil {
				t.Fatal(err)
			}
			if got == nil {
				t.Fatal("nil results, want a non-nil slice")
			}
			if !reflect.DeepEqual(got, want) {
				g, _ := json.MarshalIndent(got, "", "  ")
				t.Errorf("got\n%s", g)
			}
		})
	}
}

// countingResolver counts lookups.
type countingResolver struct {
	Resolver
	n atomic.Int32
}

func (c *countingResolver) LookupTXT(ctx context.Context, name string) ([]string, error) {
	c.n.Add(1)
	return c.Resolver.LookupTXT(ctx, name)
}

func TestVerifyLimit(t *testing.T) {
	raw := readFile(t, testdata+"verify/too-many.eml") // six signatures
	for _, tc := range []struct {
		max, lookups int
		results      string
	}{
		{0, 5, "pass pass pass pass pass neutral"},
		{5, 5, "pass pass pass pass pass neutral"},
		{2, 2, "pass pass neutral neutral neutral neutral"},
		{6, 6, "pass pass pass pass pass pass"},
	} {
		cr := &countingResolver{Resolver: testResolver(t)}
		v := &Verifier{Resolver: cr, MaxSignatures: tc.max}
		res, err := v.Verify(context.Background(), raw)
		if err != nil {
			t.Fatal(err)
		}
		var words []string
		for _, r := range res {
			words = append(words, r.Result)
		}
		if got := strings.Join(words, " "); got != tc.results {
			t.Errorf("max %d: results %q, want %q", tc.max, got, tc.results)
		}
		if got := int(cr.n.Load()); got != tc.lookups {
			t.Errorf("max %d: %d key lookups, want %d", tc.max, got, tc.lookups)
		}
	}
}

// errResolver fails every lookup with err.
type errResolver struct{ err error }

func (r errResolver) LookupTXT(context.Context, string) ([]string, error) { return nil, r.err }

func TestVerifyLookupErrors(t *testing.T) {
	raw := readFile(t, testdata+"verify/rfc6376-c.eml")
	for _, tc := range []struct {
		name   string
		err    error
		result string
		reason string
	}{
		{"timeout", &net.DNSError{Err: "i/o timeout", Name: "x", IsTimeout: true}, TempError,
			"key unavailable: lookup brisbane._domainkey.example.com: lookup x: i/o timeout"},
		{"servfail", &net.DNSError{Err: "server misbehaving", Name: "x", IsTemporary: true}, TempError,
			"key unavailable: lookup brisbane._domainkey.example.com: lookup x: server misbehaving"},
		{"deadline", context.DeadlineExceeded, TempError,
			"key unavailable: lookup brisbane._domainkey.example.com: context deadline exceeded"},
		{"unknown", errors.New("boom"), TempError,
			"key unavailable: lookup brisbane._domainkey.example.com: boom"},
		{"nxdomain", &net.DNSError{Err: "no such host", Name: "x", IsNotFound: true}, PermError,
			"no key for signature: lookup brisbane._domainkey.example.com: key not found (no TXT record): lookup x: no such host"},
		{"no record", ErrNoRecord, PermError,
			"no key for signature: lookup brisbane._domainkey.example.com: key not found (no TXT record)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := &Verifier{Resolver: errResolver{tc.err}}
			res, err := v.Verify(context.Background(), raw)
			if err != nil {
				t.Fatal(err)
			}
			want := []Result{{"example.com", "brisbane", "rsa-sha256", tc.result, tc.reason}}
			if !reflect.DeepEqual(res, want) {
				t.Errorf("got %+v, want %+v", res, want)
			}
		})
	}
}

func TestVerifyCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	v := &Verifier{Resolver: testResolver(t)}
	res, err := v.Verify(ctx, readFile(t, testdata+"verify/rfc6376-c.eml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Result != TempError {
		t.Errorf("got %+v, want one temperror", res)
	}
}

func TestFailedAllPass(t *testing.T) {
	for _, tc := range []struct {
		results      string
		failed, pass bool
	}{
		{"", false, true},
		{"pass", false, true},
		{"pass pass", false, true},
		{"fail", true, false},
		{"pass fail", true, false},
		{"permerror", true, false},
		{"pass permerror", true, false},
		{"temperror", false, false},
		{"pass neutral", false, false},
		{"temperror neutral fail", true, false},
	} {
		var rs []Result
		for _, w := range strings.Fields(tc.results) {
			rs = append(rs, Result{Result: w})
		}
		if got := Failed(rs); got != tc.failed {
			t.Errorf("Failed(%s) = %v", tc.results, got)
		}
		if got := AllPass(rs); got != tc.pass {
			t.Errorf("AllPass(%s) = %v", tc.results, got)
		}
	}
}

func TestAuthResults(t *testing.T) {
	for _, tc := range []struct {
		results []Result
		want    string
	}{
		{nil, "mx.lab.test; dkim=none"},
		{[]Result{}, "mx.lab.test; dkim=none"},
		{[]Result{{"lab.test", "ed1", "ed25519-sha256", Pass, ""}},
			"mx.lab.test; dkim=pass header.a=ed25519-sha256 header.d=lab.test header.s=ed1"},
		{[]Result{
			{"lab.test", "ed1", "ed25519-sha256", Pass, ""},
			{"example.com", "brisbane", "rsa-sha256", Fail, "body hash did not verify"},
		}, "mx.lab.test; dkim=pass header.a=ed25519-sha256 header.d=lab.test header.s=ed1" +
			`; dkim=fail reason="body hash did not verify" header.a=rsa-sha256 header.d=example.com header.s=brisbane`},
		{[]Result{{"", "", "", PermError, "signature missing required tag"}},
			`mx.lab.test; dkim=permerror reason="signature missing required tag"`},
	} {
		if got := AuthResults("mx.lab.test", tc.results); got != tc.want {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
	}
}
