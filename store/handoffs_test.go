package store_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/envelopd/envelopd/store"
)

// TestHandoffListRetryDrop: failed hand-offs can be listed,
// retried and dropped, like the outbound queue.
func TestHandoffListRetryDrop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := store.OpenSQLite(ctx, filepath.Join(t.TempDir(), "h.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, mid := range []string{"a@x.test", "b@x.test", "c@x.test"} {
		if _, err := s.Ingest(ctx, &store.Incoming{Direction: store.DirIn, MessageID: mid, Subject: "PAY | " + mid, Type: "pay",
			Sender: "alice@x.test", Raw: []byte(mid), Status: store.StatusAccepted, Handoff: []string{"exec"}, ReceivedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	ds, err := s.ClaimDeliveries(ctx, "exec", now, time.Minute, 10)
	if err != nil || len(ds) != 3 {
		t.Fatalf("claim: %d %v", len(ds), err)
	}
	// 1 delivered, 2 failed, 3 left untried.
	if err := s.DeliveryDone(ctx, ds[0].ID); err != nil {
		t.Fatal(err)
	}
	if err := s.DeliveryRetry(ctx, ds[1].ID, now.Add(time.Hour), "exec: exit status 3"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeliveryRetry(ctx, ds[2].ID, now, ""); err != nil {
		t.Fatal(err)
	}
	ids := func(f store.HandoffFilter) []int64 {
		t.Helper()
		hs, err := s.Handoffs(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		out := []int64{}
		for _, h := range hs {
			out = append(out, h.ID)
		}
		return out
	}
	eq := func(name string, got []int64, want ...int64) {
		t.Helper()
		if len(got) != len(want) {
			t.Errorf("%s: %v, want %v", name, got, want)
			return
		}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("%s: %v, want %v", name, got, want)
				return
			}
		}
	}
	a, b, c := ds[0].ID, ds[1].ID, ds[2].ID
	eq("default (not done)", ids(store.HandoffFilter{}), b, c)
	eq("all", ids(store.HandoffFilter{State: "all"}), a, b, c)
	eq("failed", ids(store.HandoffFilter{State: store.HandoffFailed}), b)
	eq("done", ids(store.HandoffFilter{State: store.HandoffDone}), a)
	eq("webhook", ids(store.HandoffFilter{State: "all", Target: "webhook"}))
	if _, err := s.Handoffs(ctx, store.HandoffFilter{State: "bogus"}); err == nil {
		t.Errorf("state bogus accepted")
	}

	hs, _ := s.Handoffs(ctx, store.HandoffFilter{State: store.HandoffFailed})
	h := hs[0]
	if h.Event != "evt_2_exec" || h.Target != "exec" || !h.Failed || h.Attempts != 1 || h.LastError != "exec: exit status 3" ||
		h.NextAttempt == nil || h.Message.MessageID != "b@x.test" || h.Message.Type != "pay" || h.Message.From != "alice@x.test" || h.Message.ID == 0 {
		t.Errorf("failed hand-off: %+v", h)
	}
	done, _ := s.Handoffs(ctx, store.HandoffFilter{State: store.HandoffDone})
	if done[0].NextAttempt != nil || done[0].Failed {
		t.Errorf("done hand-off: %+v, want next_attempt_at null", done[0])
	}

	// Drop: never claimed again; retry brings it back, due now, backoff reset.
	if err := s.HandoffDrop(ctx, b); err != nil {
		t.Fatal(err)
	}
	eq("dropped", ids(store.HandoffFilter{State: store.HandoffDropped}), b)
	if ds, _ := s.ClaimDeliveries(ctx, "exec", now.Add(2*time.Hour), time.Minute, 10); len(ds) != 1 || ds[0].ID != c {
		t.Errorf("claim after drop: %+v, want only %d", ds, c)
	}
	if err := s.HandoffRetry(ctx, b); err != nil {
		t.Fatal(err)
	}
	if ds, _ := s.ClaimDeliveries(ctx, "exec", time.Now(), time.Minute, 10); len(ds) != 1 || ds[0].ID != b || ds[0].Attempts != 1 {
		t.Errorf("claim after retry: %+v, want %d at attempt 1", ds, b)
	}

	for _, op := range []func(context.Context, int64) error{s.HandoffRetry, s.HandoffDrop} {
		if err := op(ctx, a); !errors.Is(err, store.ErrHandoffDone) {
			t.Errorf("retry/drop of a delivered hand-off: %v, want ErrHandoffDone", err)
		}
		if err := op(ctx, 99); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("retry/drop of an unknown hand-off: %v, want ErrNotFound", err)
		}
	}
}
