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
