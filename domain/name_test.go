package domain

import (
	"errors"
	"testing"
	"time"
)

func TestNormalize(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, want string
		err      error
	}{
		{"agents.example.com", "agents.example.com", nil},
		{"agents.example.com.", "agents.example.com", nil}, // absolute form: the same name
		{"Agents.Example.COM", "agents.example.com", nil},
		{"bücher.example", "xn--bcher-kva.example", nil}, // IDN to A-labels
		{"XN--BCHER-KVA.example", "xn--bcher-kva.example", nil},
		{"example.co.uk", "example.co.uk", nil},
		{"xn--zz.example", "", ErrInvalid}, // not punycode
		{"*.example.com", "", ErrWildcard},
		{"*", "", ErrWildcard},
		{"com", "", ErrPublicSuffix},
		{"co.uk", "", ErrPublicSuffix},
		{"github.io", "", ErrPublicSuffix}, // the private part of the list too
		{"localhost", "", ErrInvalid},
		{"", "", ErrInvalid},
		{" example.com", "", ErrInvalid},
		{"a..example.com", "", ErrInvalid},
		{"-a.example.com", "", ErrInvalid},
		{"a_b.example.com", "", ErrInvalid},
		{"user@example.com", "", ErrInvalid},
		{"192.0.2.1", "", ErrInvalid},
		{"a.example.com..", "", ErrInvalid},
		{string(make([]byte, 300)), "", ErrInvalid},
		// Full stops the lookup mapping turns into '.' (UTS #46).
		{"example.com\u3002", "example.com", nil},
		{"Example\uff0ecom\uff0e", "example.com", nil},
		{"a\u3002b.example", "a.b.example", nil},
		{"com\u3002", "", ErrPublicSuffix},
		{"co\u3002uk\uff61", "", ErrPublicSuffix},
		{"example.com\u3002\u3002", "", ErrInvalid},
		{"\u3002", "", ErrInvalid},
	} {
		got, err := Normalize(tc.in)
		if got != tc.want || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Errorf("Normalize(%q) = %q, %v; want %q, %v", tc.in, got, err, tc.want, tc.err)
		}
		var e *Error
		if err != nil && (!errors.As(err, &e) || e.Code() != tc.err.Error()) {
			t.Errorf("Normalize(%q): error %v has no code %s", tc.in, err, tc.err)
		}
	}
}

func FuzzNormalize(f *testing.F) {
	for _, s := range []string{"agents.example.com.", "bücher.example", "*.x.com", "xn--zz.example", "co.uk", "example.com\u3002", "com\uff0e"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := Normalize(s)
		if err != nil {
			return
		}
		// The canonical form is a fixed point.
		if again, err := Normalize(n); err != nil || again != n {
			t.Fatalf("Normalize(%q) = %q, then %q, %v", s, n, again, err)
		}
	})
}

func FuzzTags(f *testing.F) {
	for _, s := range []string{"v=DMARC1; p=none", "v=spf1 mx", ";;", "k=ed25519; p=AB CD", "="} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		for _, k := range []string{"spf", "dkim", "dmarc"} {
			if sameTXT(k, a, b) != sameTXT(k, a, b) {
				t.Fatal("not deterministic")
			}
		}
		if m := tags(a); m != nil && !sameTXT("dmarc", a, a) {
			t.Fatalf("%q is not the same as itself", a)
		}
		_ = firstTerm(a)
	})
}

func TestValidateHostname(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct{ in, want string }{
		{"mx.example.net", "mx.example.net"},
		{"MX.Example.net.", "mx.example.net"},
		{"mx.example.net\u3002", "mx.example.net"},
		{"mx\uff0eexample.net", "mx.example.net"},
		{"mx.example.net\u3002\u3002", ""},
		{"localhost\u3002", ""},
		{"*.example.net", ""},
	} {
		c, err := validate("b.example.org", Config{Hostname: tc.in}, now)
		if tc.want == "" {
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("hostname %q: %v, want %v", tc.in, err, ErrInvalid)
			}
			continue
		}
		if err != nil || c.Hostname != tc.want {
			t.Errorf("hostname %q: %q, %v; want %q", tc.in, c.Hostname, err, tc.want)
		}
	}
}
