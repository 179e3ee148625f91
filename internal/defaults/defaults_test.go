package defaults

import (
	"testing"
	"time"
)

func TestPositive(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want time.Duration }{
		{0, time.Second},
		{-time.Minute, time.Second},
		{time.Millisecond, time.Millisecond},
	} {
		v := tc.in
		Positive(&v, time.Second)
		if v != tc.want {
			t.Errorf("Positive(%v, 1s) = %v, want %v", tc.in, v, tc.want)
		}
	}
	n := 3
	Positive(&n, 10)
	if n != 3 {
		t.Errorf("Positive(3, 10) = %d, want 3", n)
	}
}

func TestUnset(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want int }{
		{0, 100},
		{-1, -1}, // a negative number is kept
		{3, 3},
	} {
		v := tc.in
		Unset(&v, 100)
		if v != tc.want {
			t.Errorf("Unset(%d, 100) = %d, want %d", tc.in, v, tc.want)
		}
	}
	s := ""
	Unset(&s, "smtp")
	if s != "smtp" {
		t.Errorf(`Unset("", "smtp") = %q`, s)
	}
	s = "imap"
	Unset(&s, "smtp")
	if s != "imap" {
		t.Errorf(`Unset("imap", "smtp") = %q`, s)
	}
	f := 0.5
	Unset(&f, 0.25)
	if f != 0.5 {
		t.Errorf("Unset(0.5, 0.25) = %v", f)
	}
}
