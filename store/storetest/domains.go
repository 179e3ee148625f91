package storetest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/envelopd/envelopd/store"
)

// testDomains: managed domains — one row per name however many nodes
// add it, the status a check leaves, and exactly one domain.verified
// event per transition to verified, in the event log the API follows.
func testDomains(t *testing.T, open func(t *testing.T) Domains) {
	ds := openNodes(t, open)
	ctx := context.Background()
	var added atomic.Int32
	race(nodeRacers, func(i int) {
		err := ds[i%nodes].AddDomain(ctx, store.ManagedDomain{Name: "agents.example.com", Config: `{"hostname":"mx.example.com"}`, CreatedAt: base})
		switch {
		case err == nil:
			added.Add(1)
		case !errors.Is(err, store.ErrDomainExists):
			t.Errorf("racer %d: %v", i, err)
		}
	})
	if n := added.Load(); n != 1 {
		t.Fatalf("%d adds succeeded, want 1", n)
	}
	d, err := ds[1].ManagedDomain(ctx, "agents.example.com")
	if err != nil {
		t.Fatal(err)
	}
	if d.Status != store.DomainPending || d.Config != `{"hostname":"mx.example.com"}` || !d.CreatedAt.Equal(base) || !d.CheckedAt.IsZero() || !d.VerifiedAt.IsZero() {
		t.Errorf("added: %+v", d)
	}
	if _, err := ds[0].ManagedDomain(ctx, "other.example.com"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown domain: %v, want ErrNotFound", err)
	}
	if err := ds[0].AddDomain(ctx, store.ManagedDomain{Name: "b.example.org", Config: "{}", ClientID: "c1", CreatedAt: base.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	if err := ds[0].AddDomain(ctx, store.ManagedDomain{Name: "c.example.org", Config: "{}", ClientID: "c1", CreatedAt: base}); !errors.Is(err, store.ErrDomainExists) {
		t.Errorf("same client_id: %v, want ErrDomainExists", err)
	}
	if err := ds[0].AddDomain(ctx, store.ManagedDomain{Name: "", Config: "{}"}); !errors.Is(err, store.ErrBadInput) {
		t.Errorf("no name: %v, want ErrBadInput", err)
	}
	list, err := ds[2%nodes].ManagedDomains(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Name != "b.example.org" || list[1].Name != "agents.example.com" {
		t.Errorf("list: %+v", list)
	}

	verified := func() []store.Event {
		t.Helper()
		evs, err := ds[0].Events(ctx, store.EventFilter{Types: []string{store.EventDomainVerified}})
		if err != nil {
			t.Fatal(err)
		}
		return evs
	}
	steps := []struct {
		ok         bool
		wantStatus string
		wantEvents int
	}{
		{false, store.DomainPending, 0},
		{true, store.DomainVerified, 1},
		{true, store.DomainVerified, 1}, // still verified: no new event
		{false, store.DomainInvalid, 1},
		{true, store.DomainVerified, 2}, // verifies again
	}
	for i, st := range steps {
		at := base.Add(time.Duration(i+1) * time.Minute)
		got, err := ds[i%nodes].SetDomainCheck(ctx, "agents.example.com", st.ok, `[{"step":1}]`, at)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if got.Status != st.wantStatus || !got.CheckedAt.Equal(at) || got.Checks != `[{"step":1}]` {
			t.Errorf("step %d: %+v, want status %s", i, got, st.wantStatus)
		}
		if st.ok && i == 1 && !got.VerifiedAt.Equal(at) {
			t.Errorf("step %d: verified at %v, want %v", i, got.VerifiedAt, at)
		}
		evs := verified()
		if len(evs) != st.wantEvents {
			t.Fatalf("step %d: %d domain.verified events, want %d", i, len(evs), st.wantEvents)
		}
		if len(evs) > 0 {
			e := evs[len(evs)-1]
			if e.Detail != "agents.example.com" || e.Inbox != "" || e.MessageID != 0 {
				t.Errorf("step %d: event %+v", i, e)
			}
		}
	}
	again, _ := ds[1].ManagedDomain(ctx, "agents.example.com")
	if !again.VerifiedAt.Equal(base.Add(2 * time.Minute)) {
		t.Errorf("verified_at moved: %v", again.VerifiedAt)
	}
	if _, err := ds[0].SetDomainCheck(ctx, "nope.example", true, "", base); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("check of unknown domain: %v", err)
	}
	if err := ds[1].DeleteDomain(ctx, "agents.example.com"); err != nil {
		t.Fatal(err)
	}
	if err := ds[0].DeleteDomain(ctx, "agents.example.com"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second delete: %v, want ErrNotFound", err)
	}
	if len(verified()) != 2 {
		t.Error("delete removed events")
	}
}
