package storetest

import (
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/envelopd/envelopd/store"
)

// test is one named test of a suite over the contract S: one runs on a
// fresh store, with the test's context; open on the factory itself (a
// test that reopens its store, or opens several over one data set).
type test[S io.Closer] struct {
	name string
	one  func(ctx context.Context, t *testing.T, s S)
	open func(t *testing.T, open func(t *testing.T) S)
}

// runTests runs each test as a subtest of t over the stores open makes.
func runTests[S io.Closer](t *testing.T, open func(t *testing.T) S, tests []test[S]) {
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.one != nil {
				tc.one(t.Context(), t, openStore(t, open))
				return
			}
			tc.open(t, open)
		})
	}
}

// openStore opens one store for t, closed when t and its subtests end.
func openStore[S io.Closer](t *testing.T, open func(t *testing.T) S) S {
	t.Helper()
	s := open(t)
	t.Cleanup(func() { s.Close() })
	return s
}

// openNodes opens the store nodes times over one data set, each node
// taken as the contract S of the suite, closed when t ends.
func openNodes[S io.Closer](t *testing.T, open func(t *testing.T) S) []S {
	t.Helper()
	ss := make([]S, nodes)
	for i := range ss {
		ss[i] = openStore(t, open)
	}
	return ss
}

// race runs n goroutines released together; racer i gets its index.
func race(n int, f func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			f(i)
		}()
	}
	close(start)
	wg.Wait()
}

// raceIngest has n racers ingest at the same moment, racer i the
// message in(i) (built before the start) through node i%len(ss), and
// returns their outcomes; a racer's error fails t.
func raceIngest[S store.Ingester](t *testing.T, ss []S, n int, in func(i int) *store.Incoming) []store.Outcome {
	t.Helper()
	ins := make([]*store.Incoming, n)
	for i := range ins {
		ins[i] = in(i)
	}
	outs := make([]store.Outcome, n)
	errs := make([]error, n)
	race(n, func(i int) { outs[i], errs[i] = ss[i%len(ss)].Ingest(context.Background(), ins[i]) })
	for i, err := range errs {
		if err != nil {
			t.Fatalf("racer %d: %v", i, err)
		}
	}
	return outs
}

// claimRace races n claimers, each claiming in a loop (claim(i) for
// claimer i) until a claim comes back empty, and counts how often each
// key was claimed. key runs under a lock.
func claimRace[T any, K comparable](t *testing.T, n int, claim func(i int) ([]T, error), key func(T) K) map[K]int {
	var mu sync.Mutex
	got := map[K]int{}
	race(n, func(i int) {
		for {
			xs, err := claim(i)
			if err != nil {
				t.Errorf("claimer %d: %v", i, err)
				return
			}
			if len(xs) == 0 {
				return
			}
			mu.Lock()
			for _, x := range xs {
				got[key(x)]++
			}
			mu.Unlock()
		}
	})
	return got
}

// cursor is a cursor a reader follows as watch does (wait for news after
// the last id seen, then read what follows that id), over items of T.
type cursor[T any] struct {
	wait func(ctx context.Context, after int64) error
	read func(ctx context.Context, after int64) ([]T, error)
	// all reads every item, to find one the cursor skipped.
	all   func(ctx context.Context) ([]T, error)
	id    func(T) int64
	name  func(T) string // which item an error is about
	check func(T) error  // when not nil, vets each item
}

// cursorRace has writers on the nodes ws ingest each messages apiece
// (writer w's i-th is msg(w, i)) while a reader follows c. The reader
// must see every item exactly once, within grace of the last commit: an
// item committed late, below an id already passed, would be skipped.
// It returns the number of items.
func cursorRace[S store.Ingester, T any](t *testing.T, ws []S, writers, each int, msg func(w, i int) *store.Incoming,
	c cursor[T], grace time.Duration,
) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	want := writers * each
	seen := map[int64]bool{}
	done := make(chan error, 1)
	go func() {
		done <- func() error {
			var after int64
			for len(seen) < want {
				if err := c.wait(ctx, after); err != nil {
					return err
				}
				xs, err := c.read(ctx, after)
				if err != nil {
					return err
				}
				for _, x := range xs {
					if seen[c.id(x)] {
						return fmt.Errorf("%s seen twice", c.name(x))
					}
					if c.check != nil {
						if err := c.check(x); err != nil {
							return err
						}
					}
					seen[c.id(x)] = true
					after = c.id(x)
				}
			}
			return nil
		}()
	}()
	race(writers, func(w int) {
		for i := range each {
			if _, err := ws[w%len(ws)].Ingest(ctx, msg(w, i)); err != nil {
				t.Error(err)
				return
			}
		}
	})
	var err error
	select {
	case err = <-done:
	case <-time.After(grace):
		cancel()
		err = <-done
	}
	if err != nil {
		t.Fatalf("cursor: %v (saw %d of %d)", err, len(seen), want)
	}
	all, err := c.all(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != want {
		t.Errorf("%d stored, want %d", len(all), want)
	}
	for _, x := range all {
		if !seen[c.id(x)] {
			t.Errorf("the cursor skipped %s", c.name(x))
		}
	}
	return want
}

// each maps f over xs (never nil: an empty list prints as []).
func each[T, U any](xs []T, f func(T) U) []U {
	out := make([]U, 0, len(xs))
	for _, x := range xs {
		out = append(out, f(x))
	}
	return out
}

// queuedOOPS counts the queue's entries of kind "oops".
func queuedOOPS(t *testing.T, s store.OutboundQueue) int {
	t.Helper()
	q, err := s.Queue(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range q {
		if e.Kind == "oops" {
			n++
		}
	}
	return n
}
