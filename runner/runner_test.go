package runner

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"
)

func TestBackoffOr(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		b    Backoff
		want Backoff
	}{
		{Backoff{}, Backoff{Initial: time.Second, Max: time.Hour}},
		{Backoff{Initial: -1, Max: -1, Jitter: 0.5}, Backoff{Initial: time.Second, Max: time.Hour, Jitter: 0.5}},
		{Backoff{Initial: time.Minute}, Backoff{Initial: time.Minute, Max: time.Hour}},
		{Backoff{Max: time.Minute}, Backoff{Initial: time.Second, Max: time.Minute}},
		{Backoff{Initial: 2 * time.Second, Max: 3 * time.Second}, Backoff{Initial: 2 * time.Second, Max: 3 * time.Second}},
	} {
		got := tc.b.Or(time.Second, time.Hour)
		if got.Initial != tc.want.Initial || got.Max != tc.want.Max || got.Jitter != tc.want.Jitter {
			t.Errorf("%+v.Or(1s, 1h) = %+v, want %+v", tc.b, got, tc.want)
		}
	}
}

func TestBackoffDelay(t *testing.T) {
	t.Parallel()
	b := Backoff{Initial: 30 * time.Second, Max: time.Hour}
	for _, tc := range []struct {
		n      int
		jitter float64
		r      float64
		want   time.Duration
	}{
		{1, 0, 0.9, 30 * time.Second},            // no jitter: exact
		{0, 0, 0, 30 * time.Second},              // n < 1 counts as 1
		{2, 0, 0, time.Minute},                   // doubled
		{8, 0, 0, time.Hour},                     // 64 min capped at 60
		{1, 0.5, 0, 15 * time.Second},            // half drawn at random: [d/2, d)
		{1, 0.5, 0.75, 26250 * time.Millisecond}, // d·(0.5 + 0.5·0.75)
		{50, 0.5, 0.5, 45 * time.Minute},         // capped, then jittered
		{3, 0.5, 2, 60 * time.Second},            // r out of range counts as 0
		{3, 1, 0.5, 60 * time.Second},            // full jitter: d·r
		{3, 2, 0.5, 60 * time.Second},            // jitter above 1 counts as 1
		{1, 0.5, -1, 15 * time.Second},           // negative r counts as 0
		{100000, 0, 0, time.Hour},                // no overflow
		{4, 0.25, 0.5, 4 * time.Minute * 7 / 8},  // d·(0.75 + 0.125)
		{5, 0, 0, 8 * time.Minute},               // 30 s · 16
		{6, 0, 0, 16 * time.Minute},              // 30 s · 32
		{7, 0, 0, 32 * time.Minute},              // 30 s · 64
		{7, 0.5, 0, 16 * time.Minute},            // halved
	} {
		b := b
		b.Jitter = tc.jitter
		b.Rand = func() float64 { return tc.r }
		if got := b.Delay(tc.n); got != tc.want {
			t.Errorf("Delay(%d) jitter %v r %v = %v, want %v", tc.n, tc.jitter, tc.r, got, tc.want)
		}
	}
}

// fake is a Worker over numbered jobs: due holds the jobs a claim may
// take, outcome decides each attempt, events reports every call.
type fake struct {
	mu      sync.Mutex
	due     []int
	outcome func(j int) (Outcome, error)
	block   map[int]chan struct{} // an attempt of j waits for its channel
	claims  []int                 // each claim's limit
	settled []int
	given   []int
	events  chan string
}

func (f *fake) Claim(ctx context.Context, now time.Time, limit int) ([]int, error) {
	f.mu.Lock()
	n := min(limit, len(f.due))
	js := slices.Clone(f.due[:n])
	f.due = f.due[n:]
	f.claims = append(f.claims, limit)
	f.mu.Unlock()
	f.event("claim")
	return js, nil
}

func (f *fake) Attempt(ctx context.Context, j int) (Outcome, error) {
	f.event("start")
	if ch := f.block[j]; ch != nil {
		<-ch
	}
	o, err := Succeeded, error(nil)
	if f.outcome != nil {
		o, err = f.outcome(j)
	}
	f.mu.Lock()
	f.settled = append(f.settled, j)
	f.mu.Unlock()
	f.event("settle")
	return o, err
}

func (f *fake) Release(ctx context.Context, js []int) {
	f.mu.Lock()
	f.given = append(f.given, js...)
	f.due = append(js, f.due...)
	f.mu.Unlock()
}

func (f *fake) event(e string) {
	if f.events != nil {
		f.events <- e
	}
}

func (f *fake) state() (due, settled, given []int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.due), slices.Clone(f.settled), slices.Clone(f.given)
}

func counts(m *Metrics) map[string]int64 {
	out := map[string]int64{}
	for _, c := range m.Snapshot() {
		out[c.Worker+"/"+c.Outcome] = c.Value
	}
	return out
}

// TestOnce: one claim of Batch, attempted Parallel at once, each outcome
// counted; a cancelled context gives the unstarted claims back.
func TestOnce(t *testing.T) {
	t.Parallel()
	errSettle := errors.New("settle failed")
	for _, tc := range []struct {
		name        string
		due         []int
		batch       int
		outcome     func(int) (Outcome, error)
		cancelled   bool
		wantTried   int
		wantClaimed int
		wantErr     error
		wantCounts  map[string]int64
	}{
		{"empty", nil, 4, nil, false, 0, 0, nil,
			map[string]int64{}},
		{"one batch of more", []int{1, 2, 3, 4, 5, 6}, 4, nil, false, 4, 4, nil,
			map[string]int64{"w/claimed": 4, "w/succeeded": 4}},
		{"each outcome", []int{1, 2, 3, 4}, 16, func(j int) (Outcome, error) { return Outcome(j - 1), nil }, false, 4, 4, nil,
			map[string]int64{"w/claimed": 4, "w/succeeded": 1, "w/retried": 1, "w/dropped": 1, "w/released": 1}},
		{"settle error joined", []int{1, 2}, 16, func(j int) (Outcome, error) {
			if j == 2 {
				return Retried, errSettle
			}
			return Succeeded, nil
		}, false, 2, 2, errSettle,
			map[string]int64{"w/claimed": 2, "w/succeeded": 1, "w/retried": 1}},
		{"cancelled", []int{1, 2}, 16, nil, true, 0, 0, context.Canceled,
			map[string]int64{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &fake{due: tc.due, outcome: tc.outcome}
			m := &Metrics{}
			l := &Loop[int]{Name: "w", Worker: f, Batch: tc.batch, Parallel: 2, Metrics: m}
			ctx, cancel := context.WithCancel(context.Background())
			if tc.cancelled {
				cancel()
			}
			defer cancel()
			tried, claimed, err := l.Once(ctx)
			if tried != tc.wantTried || claimed != tc.wantClaimed || !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("Once = %d, %d, %v; want %d, %d, %v", tried, claimed, err, tc.wantTried, tc.wantClaimed, tc.wantErr)
			}
			got := counts(m)
			for k, v := range got {
				if v == 0 {
					delete(got, k)
				}
			}
			if !maps.Equal(got, tc.wantCounts) {
				t.Errorf("counters %v, want %v", got, tc.wantCounts)
			}
		})
	}
}

// cancelClaimer cancels the context right after its claim.
type cancelClaimer struct {
	*fake
	cancel func()
}

func (c cancelClaimer) Claim(ctx context.Context, now time.Time, limit int) ([]int, error) {
	js, err := c.fake.Claim(ctx, now, limit)
	c.cancel()
	return js, err
}

func (c cancelClaimer) Release(ctx context.Context, js []int) { c.fake.Release(ctx, js) }

// TestOnceCancelAfterClaimReleases: jobs claimed but not started when the
// context ends are given back, not attempted.
func TestOnceCancelAfterClaimReleases(t *testing.T) {
	t.Parallel()
	f := &fake{due: []int{1, 2, 3}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l := &Loop[int]{Name: "w", Worker: cancelClaimer{f, cancel}}
	tried, claimed, err := l.Once(ctx)
	if tried != 0 || claimed != 3 || !errors.Is(err, context.Canceled) {
		t.Fatalf("Once = %d, %d, %v; want 0, 3, canceled", tried, claimed, err)
	}
	due, settled, given := f.state()
	if len(settled) != 0 || !slices.Equal(given, []int{1, 2, 3}) || !slices.Equal(due, []int{1, 2, 3}) {
		t.Errorf("settled %v, given back %v, due %v; want none, all, all", settled, given, due)
	}
}

// manualTimer is an After whose timers fire when the test says.
type manualTimer struct {
	mu sync.Mutex
	ch chan time.Time
}

func newManualTimer() *manualTimer { return &manualTimer{ch: make(chan time.Time)} }

func (m *manualTimer) After(time.Duration) <-chan time.Time { return m.ch }
func (m *manualTimer) fire()                                { m.ch <- time.Time{} }

func expect(t *testing.T, events <-chan string, want ...string) {
	t.Helper()
	for _, w := range want {
		select {
		case e := <-events:
			if e != w {
				t.Fatalf("event %q, want %q", e, w)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no event, want %q", w)
		}
	}
}

// TestRunWakes: Run claims when started, when woken and when its timer
// fires, never otherwise, and returns the context's error when it ends.
func TestRunWakes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		poke func(wake chan struct{}, tm *manualTimer)
	}{
		{"wake", func(w chan struct{}, _ *manualTimer) { w <- struct{}{} }},
		{"timer", func(_ chan struct{}, tm *manualTimer) { tm.fire() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &fake{events: make(chan string, 16)}
			wake := make(chan struct{})
			tm := newManualTimer()
			l := &Loop[int]{Name: "w", Worker: f, Wake: func() <-chan struct{} { return wake }, After: tm.After}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- l.Run(ctx) }()
			expect(t, f.events, "claim") // at start: nothing due
			f.mu.Lock()
			f.due = []int{7}
			f.mu.Unlock()
			tc.poke(wake, tm)
			expect(t, f.events, "claim", "start", "settle", "claim") // the settle asks for more
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("Run = %v, want context.Canceled", err)
			}
			if _, settled, _ := f.state(); !slices.Equal(settled, []int{7}) {
				t.Errorf("settled %v, want [7]", settled)
			}
			select {
			case e := <-f.events:
				t.Errorf("unexpected event %q", e)
			default:
			}
		})
	}
}

// TestRunBoundsAndStops: no more than Parallel attempts run at once; a
// cancel gives unstarted claims back and waits for those in flight.
func TestRunBoundsAndStops(t *testing.T) {
	t.Parallel()
	block := map[int]chan struct{}{1: make(chan struct{}), 2: make(chan struct{})}
	f := &fake{due: []int{1, 2, 3, 4}, block: block, events: make(chan string, 16)}
	tm := newManualTimer()
	l := &Loop[int]{Name: "w", Worker: f, Batch: 4, Parallel: 2, After: tm.After}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	expect(t, f.events, "claim", "start", "start") // 1 and 2 block; 3 and 4 wait
	select {
	case e := <-f.events:
		t.Fatalf("a third attempt or claim with two in flight: %q", e)
	default:
	}
	cancel()
	select {
	case err := <-done:
		t.Fatalf("Run returned %v with attempts in flight", err)
	default:
	}
	close(block[1])
	close(block[2])
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v", err)
	}
	due, settled, given := f.state()
	slices.Sort(settled)
	if !slices.Equal(settled, []int{1, 2}) || !slices.Equal(given, []int{3, 4}) || !slices.Equal(due, []int{3, 4}) {
		t.Errorf("settled %v, given back %v, due %v; want [1 2], [3 4], [3 4]", settled, given, due)
	}
}

// TestRunReleasedBatchWaits: a batch given back whole is not claimed
// again until the timer fires; one with a settled job is, at once.
func TestRunReleasedBatchWaits(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	release := true
	f := &fake{due: []int{1}, events: make(chan string, 16)}
	f.outcome = func(j int) (Outcome, error) {
		mu.Lock()
		defer mu.Unlock()
		if release {
			f.mu.Lock()
			f.due = append(f.due, j) // given back: due again
			f.mu.Unlock()
			return Released, nil
		}
		return Succeeded, nil
	}
	tm := newManualTimer()
	m := &Metrics{}
	l := &Loop[int]{Name: "w", Worker: f, After: tm.After, Metrics: m}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	expect(t, f.events, "claim", "start", "settle")
	select {
	case e := <-f.events:
		t.Fatalf("claimed again before the timer: %q", e)
	default:
	}
	mu.Lock()
	release = false
	mu.Unlock()
	tm.fire()
	expect(t, f.events, "claim", "start", "settle", "claim")
	cancel()
	<-done
	if got := counts(m); got["w/claimed"] != 2 || got["w/released"] != 1 || got["w/succeeded"] != 1 {
		t.Errorf("counters %v", got)
	}
}
