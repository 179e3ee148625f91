package mailout

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/envelopd/envelopd/store"
)

// queueCase is one outbound-queue scenario: a message to Rcpts, a server
// script, and what must come of it. The worker runs with a fixed jitter of
// 0.5 (delays are 3/4 of the nominal backoff) and a test clock that jumps
// to each next attempt, so no test waits.
type queueCase struct {
	Rcpts        []string                `json:"rcpts"`
	ExpiresAfter string                  `json:"expires_after"`
	Server       serverScript            `json:"server"`
	Want         map[string]wantQueueRow `json:"want"`
	// Delivered lists the recipients of each message the server accepted.
	Delivered [][]string     `json:"delivered"`
	RcptSeen  map[string]int `json:"rcpt_seen"`
	// AttemptsAt are the clock offsets at which the worker tried.
	AttemptsAt []string `json:"attempts_at"`
}

type wantQueueRow struct {
	State     string `json:"state"`
	Attempts  int    `json:"attempts"`
	LastError string `json:"last_error"`
}

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// recordingSender notes the clock at each submission.
type recordingSender struct {
	Sender
	clock *clock
	mu    sync.Mutex
	at    []time.Time
}

func (r *recordingSender) Submit(ctx context.Context, from string, rcpts []string, raw []byte) []RcptResult {
	r.mu.Lock()
	r.at = append(r.at, r.clock.Now())
	r.mu.Unlock()
	return r.Sender.Submit(ctx, from, rcpts, raw)
}

func openStore(t *testing.T, path string) *store.SQLite {
	t.Helper()
	st, err := store.OpenSQLite(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func loopbackSubmitter(t *testing.T, ts *testServer) *Submitter {
	t.Helper()
	s, err := NewSubmitter("smtp://"+ts.Addr, "")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// drive runs the worker until nothing is pending, moving the clock to each
// next attempt; it fails the test after too many passes.
func drive(t *testing.T, ctx context.Context, w *Worker, st store.Store, clk *clock) {
	t.Helper()
	for pass := 0; pass < 100; pass++ {
		if _, err := w.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		pending, err := st.Queue(ctx, store.QueuePending)
		if err != nil {
			t.Fatal(err)
		}
		var next time.Time
		for _, e := range pending {
			for _, r := range e.Recipients {
				if r.State == store.QueuePending && (next.IsZero() || r.NextAttempt.Before(next)) {
					next = r.NextAttempt
				}
			}
		}
		if next.IsZero() {
			return
		}
		if next.Before(clk.Now()) {
			t.Fatalf("next attempt %v is before now %v", next, clk.Now())
		}
		clk.Set(next)
	}
	t.Fatal("queue still pending after 100 passes")
}

func TestQueueScenarios(t *testing.T) {
	files, _ := filepath.Glob("../testdata/mailout/queue/*.json")
	if len(files) == 0 {
		t.Fatal("no test cases")
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".json"), func(t *testing.T) {
			var tc queueCase
			loadJSON(t, f, &tc)
			ctx := context.Background()
			ts := startServer(t, tc.Server)
			st := openStore(t, filepath.Join(t.TempDir(), "q.db"))
			defer st.Close()

			t0 := time.Now().UTC().Truncate(time.Second).Add(time.Minute) // after any real enqueue time
			clk := &clock{t: t0}
			out := &store.Outgoing{From: "alice@x.test", Recipients: tc.Rcpts, Raw: testRaw, MessageID: "m1@x.test", Kind: "send"}
			if tc.ExpiresAfter != "" {
				d, err := time.ParseDuration(tc.ExpiresAfter)
				if err != nil {
					t.Fatal(err)
				}
				out.Expires = t0.Add(d)
			}
			id, err := st.Enqueue(ctx, out)
			if err != nil {
				t.Fatal(err)
			}
			rs := &recordingSender{Sender: loopbackSubmitter(t, ts), clock: clk}
			w := &Worker{Store: st, Sender: rs, Now: clk.Now, Jitter: func() float64 { return 0.5 }}
			drive(t, ctx, w, st, clk)

			entries, err := st.Queue(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != 1 || entries[0].ID != id {
				t.Fatalf("queue holds %+v", entries)
			}
			got := map[string]wantQueueRow{}
			for _, r := range entries[0].Recipients {
				got[r.Rcpt] = wantQueueRow{State: r.State, Attempts: r.Attempts, LastError: r.LastError}
			}
			for rcpt, w := range tc.Want {
				if got[rcpt] != w {
					t.Errorf("%s: got %+v, want %+v", rcpt, got[rcpt], w)
				}
			}
			if len(got) != len(tc.Want) {
				t.Errorf("queue recipients %v, want %v", got, tc.Want)
			}

			msgs := ts.messages()
			var delivered [][]string
			for _, m := range msgs {
				delivered = append(delivered, m.Rcpts)
			}
			if !slices.EqualFunc(delivered, tc.Delivered, slices.Equal) {
				t.Errorf("delivered %v, want %v", delivered, tc.Delivered)
			}
			for rcpt, n := range tc.RcptSeen {
				ts.mu.Lock()
				seen := ts.rcptSeen[rcpt]
				ts.mu.Unlock()
				if seen != n {
					t.Errorf("server saw RCPT %s %d times, want %d", rcpt, seen, n)
				}
			}
			var at []string
			for _, a := range rs.at {
				at = append(at, a.Sub(t0).String())
			}
			want := make([]string, len(tc.AttemptsAt))
			for i, s := range tc.AttemptsAt {
				d, err := time.ParseDuration(s)
				if err != nil {
					t.Fatal(err)
				}
				want[i] = d.String()
			}
			if !slices.Equal(at, want) {
				t.Errorf("attempts at %v, want %v", at, want)
			}
		})
	}
}

// TestQueueRestart closes the store in the middle of the queue's work (one
// message sent, one waiting for a retry, one claimed by a worker that
// "crashed" during its try) and reopens it: nothing is lost and nothing is
// sent twice.
func TestQueueRestart(t *testing.T) {
	ctx := context.Background()
	ts := startServer(t, serverScript{Rcpt: map[string][]string{"carol@y.test": {"421 4.3.0 later"}}})
	path := filepath.Join(t.TempDir(), "q.db")
	t0 := time.Now().UTC().Truncate(time.Second).Add(time.Minute) // after any real enqueue time
	clk := &clock{t: t0}
	const lease = 15 * time.Minute
	newWorker := func(st store.Store) *Worker {
		return &Worker{Store: st, Sender: loopbackSubmitter(t, ts), Now: clk.Now, Lease: lease, Jitter: func() float64 { return 0.5 }}
	}
	raw := func(id string) []byte { return []byte("Message-ID: <" + id + ">\r\nSubject: PAY\r\n\r\nbody\r\n") }

	st := openStore(t, path)
	for _, m := range []struct{ id, rcpt string }{{"a@x.test", "bob@y.test"}, {"b@x.test", "carol@y.test"}} {
		if _, err := st.Enqueue(ctx, &store.Outgoing{From: "alice@x.test", Recipients: []string{m.rcpt}, Raw: raw(m.id), MessageID: m.id}); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := newWorker(st).RunOnce(ctx); err != nil || n != 2 {
		t.Fatalf("first pass: %d attempts, %v", n, err)
	}
	// A third message is claimed by a worker that dies before recording.
	if _, err := st.Enqueue(ctx, &store.Outgoing{From: "alice@x.test", Recipients: []string{"dave@y.test"}, Raw: raw("c@x.test"), MessageID: "c@x.test"}); err != nil {
		t.Fatal(err)
	}
	if due, err := st.ClaimDue(ctx, clk.Now(), lease, 10); err != nil || len(due) != 1 {
		t.Fatalf("claim: %v, %v", due, err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st = openStore(t, path)
	defer st.Close()
	w := newWorker(st)
	clk.Set(t0.Add(45 * time.Second)) // carol's retry is due; dave's lease is not over
	if n, err := w.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("after restart: %d attempts, %v", n, err)
	}
	clk.Set(t0.Add(lease))
	if n, err := w.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("after the lease: %d attempts, %v", n, err)
	}
	clk.Set(t0.Add(48 * time.Hour))
	if n, err := w.RunOnce(ctx); err != nil || n != 0 {
		t.Fatalf("nothing should be left: %d attempts, %v", n, err)
	}

	count := map[string]int{}
	for _, m := range ts.messages() {
		for _, id := range []string{"a@x.test", "b@x.test", "c@x.test"} {
			if strings.Contains(string(m.Data), "<"+id+">") {
				count[id]++
			}
		}
	}
	want := map[string]int{"a@x.test": 1, "b@x.test": 1, "c@x.test": 1}
	if len(count) != 3 || count["a@x.test"] != 1 || count["b@x.test"] != 1 || count["c@x.test"] != 1 {
		t.Errorf("deliveries per message %v, want %v", count, want)
	}
	entries, err := st.Queue(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		for _, r := range e.Recipients {
			if r.State != store.QueueSent {
				t.Errorf("queue %d %s: state %s (%s)", e.ID, r.Rcpt, r.State, r.LastError)
			}
		}
	}
	if len(entries) != 3 {
		t.Errorf("%d queue entries, want 3", len(entries))
	}
}

func TestBackoff(t *testing.T) {
	for _, tc := range []struct {
		attempt int
		jitter  float64
		want    time.Duration
	}{
		{1, 0, 30 * time.Second},
		{1, 0.75, 52500 * time.Millisecond},
		{2, 0, time.Minute},
		{7, 0, 30 * time.Minute}, // 64 min capped at 60, halved
		{50, 0.5, 45 * time.Minute},
		{3, 2, 2 * time.Minute}, // out-of-range jitter counts as 0
	} {
		w := &Worker{Jitter: func() float64 { return tc.jitter }}
		if got := w.Backoff(tc.attempt); got != tc.want {
			t.Errorf("Backoff(%d) with jitter %v = %v, want %v", tc.attempt, tc.jitter, got, tc.want)
		}
	}
	// With real jitter the first retry always comes within a minute.
	w := &Worker{}
	for range 1000 {
		if d := w.Backoff(1); d < 30*time.Second || d >= time.Minute {
			t.Fatalf("first retry after %v", d)
		}
	}
}

// TestWorkerRun: Run delivers what is queued when woken and returns nil
// when its context ends.
func TestWorkerRun(t *testing.T) {
	ts := startServer(t, serverScript{})
	st := openStore(t, filepath.Join(t.TempDir(), "q.db"))
	defer st.Close()
	wake := make(chan struct{}, 1)
	w := &Worker{Store: st, Sender: loopbackSubmitter(t, ts), Interval: time.Hour, Wake: wake}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	if _, err := st.Enqueue(ctx, &store.Outgoing{From: "alice@x.test", Recipients: []string{"bob@y.test"}, Raw: testRaw, MessageID: "run@x.test"}); err != nil {
		t.Fatal(err)
	}
	wake <- struct{}{}
	deadline := time.Now().Add(10 * time.Second)
	for len(ts.messages()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("Run did not deliver within 10 s of a wake-up")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run returned %v", err)
	}
	if n := len(ts.messages()); n != 1 {
		t.Errorf("%d deliveries, want 1", n)
	}
}

// blockingSender never answers by itself: it returns when its context
// ends, as Submitter does when its connection is closed under it.
type blockingSender struct{}

func (blockingSender) Submit(ctx context.Context, _ string, rcpts []string, _ []byte) []RcptResult {
	<-ctx.Done()
	res := make([]RcptResult, len(rcpts))
	for i, r := range rcpts {
		res[i] = RcptResult{Rcpt: r, Err: &SendError{Stage: "data", Err: ctx.Err()}}
	}
	return res
}

// TestSubmitTimeout: a submission that hangs is cut off after
// SubmitTimeout and recorded as a temporary failure, to be retried.
func TestSubmitTimeout(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, filepath.Join(t.TempDir(), "q.db"))
	defer st.Close()
	if _, err := st.Enqueue(ctx, &store.Outgoing{From: "alice@x.test", Recipients: []string{"bob@y.test"},
		Raw: []byte("Message-ID: <h@x.test>\r\nSubject: PAY\r\n\r\nbody\r\n"), MessageID: "h@x.test"}); err != nil {
		t.Fatal(err)
	}
	w := &Worker{Store: st, Sender: blockingSender{}, SubmitTimeout: 50 * time.Millisecond, Lease: time.Second}
	done := make(chan error, 1)
	go func() {
		_, err := w.RunOnce(ctx)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("RunOnce still waiting on a hung submission 10 s after its 50 ms bound")
	}
	entries, err := st.Queue(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || len(entries[0].Recipients) != 1 {
		t.Fatalf("queue %+v", entries)
	}
	r := entries[0].Recipients[0]
	if r.State != store.QueuePending || r.Attempts != 1 || !strings.Contains(r.LastError, "deadline exceeded") {
		t.Errorf("after a cut-off attempt: state %s, attempts %d, last error %q; want pending, 1, a deadline error",
			r.State, r.Attempts, r.LastError)
	}
}
