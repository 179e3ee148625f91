package authguard

import (
	"context"
	"testing"
	"time"
)

// TestKeyThrottle: failed API keys from one IP make its next attempts
// wait the growing delay, then lock it out (refused with the lockout's
// length); another IP is not affected; failures are counted.
func TestKeyThrottle(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	th := NewThrottle(Policy{LockoutAfter: 3, Lockout: time.Hour})
	th.Now = func() time.Time { return now }
	var slept []time.Duration
	m := &countingMetrics{}
	g := &Guard{Throttle: th, Metrics: m, Sleep: func(_ context.Context, d time.Duration) error {
		slept = append(slept, d)
		return nil
	}}
	k := KeyThrottle{Guard: g, Service: "http", Mechanism: "bearer"}
	for i := range 3 {
		if wait, ok := k.Allow("192.0.2.1"); !ok || wait != 0 {
			t.Fatalf("attempt %d: refused (%v)", i+1, wait)
		}
		k.Fail("192.0.2.1", "ek_abc")
	}
	if want := []time.Duration{250 * time.Millisecond, 500 * time.Millisecond}; len(slept) != 2 || slept[0] != want[0] || slept[1] != want[1] {
		t.Errorf("waited %v, want %v", slept, want)
	}
	if wait, ok := k.Allow("192.0.2.1"); ok || wait != time.Hour {
		t.Errorf("locked-out IP: allowed=%v wait=%v, want refused for 1h", ok, wait)
	}
	if wait, ok := k.Allow("198.51.100.7"); !ok || wait != 0 {
		t.Errorf("another IP: allowed=%v wait=%v", ok, wait)
	}
	if m.failed["http/bearer"] != 3 || m.refused["http/locked_out"] != 1 {
		t.Errorf("metrics: failed %v refused %v", m.failed, m.refused)
	}
}

// TestKeyThrottleForgives: after a mistyped key, a valid one clears the
// IP's delay (the web inbox makes many requests); a lockout stays.
func TestKeyThrottleForgives(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	th := NewThrottle(Policy{LockoutAfter: 2, Lockout: time.Hour})
	th.Now = func() time.Time { return now }
	slept := 0
	g := &Guard{Throttle: th, Sleep: func(context.Context, time.Duration) error { slept++; return nil }}
	k := KeyThrottle{Guard: g, Service: "http", Mechanism: "bearer"}
	k.Fail("192.0.2.1", "ek_typo")
	k.Succeed("192.0.2.1", "ek_good")
	for range 3 {
		if _, ok := k.Allow("192.0.2.1"); !ok {
			t.Fatal("refused after a success")
		}
	}
	if slept != 0 {
		t.Errorf("waited %d times after a success, want 0", slept)
	}
	k.Fail("192.0.2.9", "a")
	k.Fail("192.0.2.9", "b") // locked out
	k.Succeed("192.0.2.9", "ek_good")
	if _, ok := k.Allow("192.0.2.9"); ok {
		t.Error("a success lifted a lockout")
	}
}

type countingMetrics struct{ failed, refused map[string]int }

func (m *countingMetrics) Failed(s, mech string) {
	if m.failed == nil {
		m.failed = map[string]int{}
	}
	m.failed[s+"/"+mech]++
}

func (m *countingMetrics) Refused(s, reason string) {
	if m.refused == nil {
		m.refused = map[string]int{}
	}
	m.refused[s+"/"+reason]++
}
