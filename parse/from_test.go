package parse

import (
	"slices"
	"strings"
	"testing"
)

func TestFromAddresses(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		raw  string
		want []string
	}{
		{"From: Bob <bob@Agents.Test>\r\nTo: a@b.test\r\n\r\nFrom: x@y.test\r\n", []string{"bob@agents.test"}},
		{"To: a@b.test\r\nfrom:\r\n bob@agents.test\r\n\r\n", []string{"bob@agents.test"}},
		{"From: a@x.test\r\nFROM: bob@agents.test\r\n\r\n", []string{"a@x.test", "bob@agents.test"}},
		{"From: a@x.test, \"B\" <bob@agents.test>\r\n\r\n", []string{"a@x.test", "bob@agents.test"}},
		{"From: broken <<bob@agents.test\r\n\r\n", []string{"bob@agents.test"}},
		{"To: a@b.test\r\n\r\n", nil},
	} {
		if got := FromAddresses([]byte(c.raw)); !slices.Equal(got, c.want) {
			t.Errorf("FromAddresses(%q) = %q, want %q", c.raw, got, c.want)
		}
	}
}

// FuzzFromAddresses: never panics, and every address it returns has an @
// (what relay mode's local-author check relies on) and is one Parse would
// see: the first From field's addresses are Parse's From.
func FuzzFromAddresses(f *testing.F) {
	f.Add([]byte("From: Bob <bob@agents.test>\r\nFrom: eve@x.test\r\n\r\nbody"))
	f.Add([]byte("From: =?utf-8?q?B=C3=B6b?= <bob@agents.test>, (c) x@y.test\r\n\r\n"))
	f.Add([]byte("From bob@agents.test Mon\nfrom:\n bob@agents.test\n\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		got := FromAddresses(raw)
		for _, a := range got {
			if !strings.Contains(a, "@") {
				t.Fatalf("address %q without @", a)
			}
		}
		r := Parse(raw, Options{})
		if len(r.From) > len(got) || !slices.Equal(got[:len(r.From)], r.From) {
			t.Fatalf("FromAddresses %q, Parse's From %q", got, r.From)
		}
	})
}
