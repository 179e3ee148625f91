package authguard

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
)

// fakeClock is the injected clock: Sleep advances Now and records delays.
type fakeClock struct {
	mu    sync.Mutex
	now   time.Time
	slept []time.Duration
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(_ context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.slept = append(c.slept, d)
	c.now = c.now.Add(d)
	return nil
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func (c *fakeClock) takeSlept() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.slept
	c.slept = nil
	return s
}

func newTestGuard(p Policy) (*Guard, *fakeClock) {
	clk := newFakeClock()
	th := NewThrottle(p)
	th.Now = clk.Now
	return &Guard{Throttle: th, Gate: NewGate(2, -1, 0), Sleep: clk.Sleep}, clk
}

var errWrong = errors.New("wrong")

// TestThrottleGrowingDelayAndLockout: an IP's failures cost a doubling
// delay before the next check (no hash runs during it), then a lockout
// during which verify is never called; another IP is not affected; the
// lockout ends.
func TestThrottleGrowingDelayAndLockout(t *testing.T) {
	t.Parallel()
	g, clk := newTestGuard(Policy{BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second, LockoutAfter: 6,
		Lockout: time.Minute, AccountFree: 100})
	calls := 0
	verify := func() error { calls++; return errWrong }
	a := Attempt{Service: "smtp", IP: "192.0.2.1:4000", Account: "bob@agents.test", Mechanism: "PLAIN"}
	for i := range 6 {
		if err := g.Check(context.Background(), a, verify); !errors.Is(err, ErrFailed) {
			t.Fatalf("attempt %d: %v, want ErrFailed", i, err)
		}
	}
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, time.Second}
	if got := clk.takeSlept(); !equalDurations(got, want) {
		t.Errorf("delays %v, want %v", got, want)
	}
	if calls != 6 {
		t.Fatalf("verify called %d times, want 6", calls)
	}
	// Locked out: refused without any check, from any port of that IP.
	a.IP = "192.0.2.1:5000"
	if err := g.Check(context.Background(), a, verify); !errors.Is(err, ErrLockedOut) {
		t.Fatalf("after 6 failures: %v, want ErrLockedOut", err)
	}
	if calls != 6 {
		t.Errorf("verify ran during the lockout")
	}
	// Another IP, same account: checked at once (the account is below
	// AccountFree), and succeeds.
	other := a
	other.IP = "198.51.100.7:4000"
	if err := g.Check(context.Background(), other, func() error { return nil }); err != nil {
		t.Errorf("other IP: %v", err)
	}
	if s := clk.takeSlept(); len(s) != 0 {
		t.Errorf("other IP waited %v", s)
	}
	// The lockout ends.
	clk.advance(time.Minute + time.Second)
	if err := g.Check(context.Background(), a, func() error { return nil }); err != nil {
		t.Errorf("after the lockout: %v", err)
	}
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestThrottleAccount: failures on one account from many IPs (each
// failing once) make attempts on that account wait, bounded by
// AccountMaxDelay; other accounts are not slowed.
func TestThrottleAccount(t *testing.T) {
	t.Parallel()
	th := NewThrottle(Policy{BaseDelay: 100 * time.Millisecond, AccountFree: 3, AccountMaxDelay: 400 * time.Millisecond})
	clk := newFakeClock()
	th.Now = clk.Now
	for i := range 10 {
		th.Fail("10.0.0."+string(rune('0'+i)), "bob@agents.test")
	}
	for _, c := range []struct {
		ip, account string
		want        time.Duration
	}{
		{"203.0.113.9", "bob@agents.test", 400 * time.Millisecond}, // 10 failures: capped
		{"203.0.113.9", "BOB@agents.test", 400 * time.Millisecond}, // case-insensitive
		{"203.0.113.9", "alice@agents.test", 0},
	} {
		d, err := th.Admit(c.ip, c.account)
		if err != nil || d != c.want {
			t.Errorf("Admit(%s, %s) = %v, %v; want %v", c.ip, c.account, d, err, c.want)
		}
	}
	// Failures are forgotten after the window.
	clk.advance(16 * time.Minute)
	if d, _ := th.Admit("203.0.113.9", "bob@agents.test"); d != 0 {
		t.Errorf("after the window: delay %v", d)
	}
}

func TestIPKey(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"192.0.2.1:25":               "192.0.2.1",
		"[2001:db8:1:2:3::4]:25":     "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::1]:993": "2001:db8:1:2::/64",
		"[::ffff:192.0.2.1]:25":      "192.0.2.1",
		"not an address":             "not an address",
	} {
		if got := IPKey(in); got != want {
			t.Errorf("IPKey(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestGate: at most n run at once; with the queue full the next attempt
// gets ErrBusy at once; a freed slot lets a waiter in.
func TestGate(t *testing.T) {
	t.Parallel()
	g := NewGate(1, 1, time.Hour)
	release := make(chan struct{})
	running := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		g.Do(context.Background(), func() { close(running); <-release })
	}()
	<-running
	queued := make(chan error, 1)
	go func() { queued <- g.Do(context.Background(), func() {}) }()
	// Wait until the second one is in the queue.
	for len(g.queue) == 0 {
		time.Sleep(time.Millisecond)
	}
	if err := g.Do(context.Background(), func() { t.Error("ran beyond the gate") }); !errors.Is(err, ErrBusy) {
		t.Errorf("third: %v, want ErrBusy", err)
	}
	close(release)
	if err := <-queued; err != nil {
		t.Errorf("queued: %v", err)
	}
	wg.Wait()
}

// TestPlainServer: a malformed PLAIN response is still handed to check.
func TestPlainServer(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		resp                 string
		identity, user, pass string
	}{
		{"\x00bob\x00pw", "", "bob", "pw"},
		{"admin\x00bob\x00pw", "admin", "bob", "pw"},
		{"garbage", "", "", ""},
		{"a\x00b\x00c\x00d", "", "", ""},
	} {
		var got [3]string
		called := false
		s := NewPlainServer(func(i, u, p string) error { called = true; got = [3]string{i, u, p}; return errWrong })
		if ch, done, err := s.Next(nil); done || err != nil || len(ch) != 0 {
			t.Fatalf("first step: %q %v %v", ch, done, err)
		}
		_, done, err := s.Next([]byte(c.resp))
		if !done || !errors.Is(err, errWrong) || !called || got != [3]string{c.identity, c.user, c.pass} {
			t.Errorf("%q: done=%v err=%v called=%v got=%q", c.resp, done, err, called, got)
		}
	}
	var _ sasl.Server = NewPlainServer(nil)
}
