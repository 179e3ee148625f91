package parse

import (
	"slices"
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
