package authguard

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestKeyThrottle: failed API keys from one IP lock it out at
// LockoutAfter (the failure that reaches it is refused already, with the
// lockout's length); nothing ever waits; another IP is not affected;
// failures are counted.
func TestKeyThrottle(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	th := NewThrottle(Policy{LockoutAfter: 3, Lockout: time.Hour})
	th.Now = func() time.Time { return now }
	m := &countingMetrics{}
	g := &Guard{Throttle: th, Metrics: m, Sleep: func(_ context.Context, d time.Duration) error {
		t.Errorf("waited %v", d)
		return nil
	}}
	k := KeyThrottle{Guard: g, Service: "http", Mechanism: "bearer"}
	for i := range 3 {
		if wait, ok := k.Allow("192.0.2.1", true); !ok || wait != 0 {
			t.Fatalf("attempt %d: refused (%v)", i+1, wait)
		}
		wait, refused := k.Fail("192.0.2.1", "ek_abc")
		if refused != (i == 2) || (refused && wait != time.Hour) {
			t.Errorf("failure %d: refused=%v wait=%v", i+1, refused, wait)
		}
	}
	now = now.Add(10 * time.Minute)
	if wait, ok := k.Allow("192.0.2.1", true); ok || wait != 50*time.Minute {
		t.Errorf("locked-out IP: allowed=%v wait=%v, want refused for the 50 min left", ok, wait)
	}
	if wait, refused := k.Fail("192.0.2.1", "ek_abc"); !refused || wait != 50*time.Minute {
		t.Errorf("failure in flight during the lockout: refused=%v wait=%v", refused, wait)
	}
	if wait, ok := k.Allow("198.51.100.7", false); !ok || wait != 0 {
		t.Errorf("another IP: allowed=%v wait=%v", ok, wait)
	}
	if m.failed["http/bearer"] != 4 || m.refused["http/locked_out"] != 1 {
		t.Errorf("metrics: failed %v refused %v", m.failed, m.refused)
	}
}

// TestKeyThrottleForgives: after a mistyped key, a valid one clears the
// IP's failures; a lockout stays.
func TestKeyThrottleForgives(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	th := NewThrottle(Policy{LockoutAfter: 2, Lockout: time.Hour})
	th.Now = func() time.Time { return now }
	k := KeyThrottle{Guard: &Guard{Throttle: th}, Service: "http", Mechanism: "bearer"}
	k.Fail("192.0.2.1", "ek_typo")
	k.Succeed("192.0.2.1", "ek_good")
	if _, refused := k.Fail("192.0.2.1", "ek_typo"); refused {
		t.Error("a failure after a success locked the IP out")
	}
	k.Fail("192.0.2.9", "a")
	k.Fail("192.0.2.9", "b") // locked out
	k.Succeed("192.0.2.9", "ek_good")
	if _, ok := k.Allow("192.0.2.9", true); ok {
		t.Error("a success lifted a lockout")
	}
}

// TestKeyThrottleGlobalBudget: past the global budget, requests without
// a key are refused until the minute ends; requests with one are not.
func TestKeyThrottleGlobalBudget(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	th := NewThrottle(Policy{GlobalFailures: 3})
	th.Now = func() time.Time { return now }
	k := KeyThrottle{Guard: &Guard{Throttle: th}, Service: "http", Mechanism: "bearer"}
	for i, ip := range []string{"192.0.2.1", "192.0.2.2", "192.0.2.3"} {
		if _, refused := k.Fail(ip, ""); refused != (i == 2) {
			t.Errorf("failure %d: refused=%v", i+1, refused)
		}
	}
	now = now.Add(20 * time.Second)
	if wait, ok := k.Allow("192.0.2.50", false); ok || wait != 40*time.Second {
		t.Errorf("keyless over budget: allowed=%v wait=%v", ok, wait)
	}
	if _, ok := k.Allow("192.0.2.50", true); !ok {
		t.Error("keyed request refused over the budget")
	}
	now = now.Add(41 * time.Second)
	if _, ok := k.Allow("192.0.2.50", false); !ok {
		t.Error("keyless refused after the minute")
	}
}

// TestEmptyAccountNotShared: password failures without an account name
// (a malformed SASL exchange) make nobody else's attempts wait.
func TestEmptyAccountNotShared(t *testing.T) {
	t.Parallel()
	th := NewThrottle(Policy{})
	for i := range 20 {
		th.Fail(fmt.Sprintf("198.51.100.%d", i), "")
	}
	if d, err := th.Admit("203.0.113.1", ""); d != 0 || err != nil {
		t.Errorf("a fresh IP without an account: wait %v, %v", d, err)
	}
	if d, err := th.Admit("203.0.113.1", "alice@example.test"); d != 0 || err != nil {
		t.Errorf("a fresh IP with an account: wait %v, %v", d, err)
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
