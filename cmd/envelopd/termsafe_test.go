package main

import "testing"

func TestTermSafe(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"PAY | Dinner split", "PAY | Dinner split"},
		{"Grüße, 東京", "Grüße, 東京"},
		{"\x1b]0;pwned\x07\x1b[31mRED", `\x1b]0;pwned\x07\x1b[31mRED`},
		{"a\tb\r\nc", `a\x09b\x0d\x0ac`},
		{"del\x7f", `del\x7f`},
		{"c1 \u009b31m", `c1 \u009b31m`},
		{"bidi \u202egnp.exe", `bidi \u202egnp.exe`},
		{"bad \xff\xfe utf-8", `bad \xff\xfe utf-8`},
		{"", ""},
	} {
		if got := termSafe(tc.in); got != tc.want {
			t.Errorf("termSafe(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
