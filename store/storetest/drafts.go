package storetest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/envelopd/envelopd/store"
)

// testDrafts: drafts are stored whole or not at all (bad input writes
// nothing), idempotent per client_id, listed newest first by keyset; a
// due scheduled draft is leased to exactly one of several racing
// claimers, claimed again after its lease ends, and not before.
func testDrafts(ctx context.Context, t *testing.T, s Drafts) {
	mk := func(id, inbox string, at time.Time) store.Draft {
		return store.Draft{ID: id, Inbox: inbox, Request: []byte(`{"subject":"` + id + `"}`), CreatedAt: at, UpdatedAt: at}
	}
	for i, id := range []string{"d1", "d2", "d3"} {
		if _, created, err := s.CreateDraft(ctx, mk(id, "a@shop.test", base.Add(time.Duration(i)*time.Second))); err != nil || !created {
			t.Fatalf("create %s: %v %v", id, created, err)
		}
	}
	other := mk("d4", "b@shop.test", base.Add(time.Minute))
	other.ClientID = "c1"
	if _, created, err := s.CreateDraft(ctx, other); err != nil || !created {
		t.Fatal(created, err)
	}
	again := mk("d5", "b@shop.test", base.Add(2*time.Minute))
	again.ClientID = "c1"
	if got, created, err := s.CreateDraft(ctx, again); err != nil || created || got.ID != "d4" {
		t.Errorf("client_id repeat: %+v %v %v", got, created, err)
	}
	// Bad input writes nothing.
	big := mk("big", "a@shop.test", base)
	big.Request = []byte(strings.Repeat("x", store.MaxDraftBytes+1))
	sched := mk("bad", "a@shop.test", base)
	sched.Status = store.DraftScheduled
	for _, d := range []store.Draft{big, sched, {ID: "x"}} {
		if _, _, err := s.CreateDraft(ctx, d); !errors.Is(err, store.ErrBadInput) {
			t.Errorf("create %s: %v, want ErrBadInput", d.ID, err)
		}
	}
	if _, err := s.DraftByID(ctx, "big"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a refused draft was stored: %v", err)
	}
	// Lists: newest first, per inbox or all, keyset paged.
	ids := func(ds []store.Draft) string {
		var out []string
		for _, d := range ds {
			out = append(out, d.ID)
		}
		return strings.Join(out, ",")
	}
	p1, err := s.Drafts(ctx, "a@shop.test", 0, "", 2)
	if err != nil || ids(p1) != "d3,d2" {
		t.Fatalf("page 1: %s %v", ids(p1), err)
	}
	last := p1[len(p1)-1]
	if p2, err := s.Drafts(ctx, "a@shop.test", last.CreatedAt.UnixNano(), last.ID, 2); err != nil || ids(p2) != "d1" {
		t.Errorf("page 2: %s %v", ids(p2), err)
	}
	if all, err := s.Drafts(ctx, "", 0, "", 10); err != nil || ids(all) != "d4,d3,d2,d1" {
		t.Errorf("all: %s %v", ids(all), err)
	}
	got, err := s.DraftByID(ctx, "d1")
	if err != nil || string(got.Request) != `{"subject":"d1"}` || !got.CreatedAt.Equal(base) || got.Status != "" {
		t.Errorf("get: %+v %v", got, err)
	}
	// Scheduling: d1 due at base+1h; four racing claimers, one wins.
	got.Status, got.SendAt, got.UpdatedAt = store.DraftScheduled, base.Add(time.Hour), base.Add(time.Second)
	if err := s.UpdateDraft(ctx, got); err != nil {
		t.Fatal(err)
	}
	if c, err := s.ClaimDueDrafts(ctx, base.Add(59*time.Minute), time.Minute, 10); err != nil || len(c) != 0 {
		t.Errorf("claimed before due: %v %v", c, err)
	}
	due := base.Add(time.Hour)
	var mu sync.Mutex
	var won []string
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := s.ClaimDueDrafts(ctx, due, time.Minute, 10)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			won = append(won, ids(c))
			mu.Unlock()
		}()
	}
	wg.Wait()
	if strings.Join(won, "") != "d1" {
		t.Errorf("racing claims: %q, want exactly one d1", won)
	}
	if c, _ := s.ClaimDueDrafts(ctx, due.Add(59*time.Second), time.Minute, 10); len(c) != 0 {
		t.Errorf("claimed within the lease: %s", ids(c))
	}
	// The holder died: after the lease another claimer gets it.
	if c, err := s.ClaimDueDrafts(ctx, due.Add(time.Minute), time.Minute, 10); err != nil || ids(c) != "d1" || c[0].Status != store.DraftScheduled {
		t.Errorf("claim after the lease: %s %v", ids(c), err)
	}
	// Sent: deleted; a second delete is ErrNotFound.
	if err := s.DeleteDraft(ctx, "d1"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteDraft(ctx, "d1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second delete: %v", err)
	}
	if err := s.UpdateDraft(ctx, mk("nope", "a@shop.test", base)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("update of a missing draft: %v", err)
	}
	if c, _ := s.ClaimDueDrafts(ctx, due.Add(time.Hour), time.Minute, 10); len(c) != 0 {
		t.Errorf("a deleted draft was claimed: %s", ids(c))
	}
}
