package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/envelopd/envelopd/store"
)

// testLists: the allow/block rule (ListVerdict): the most specific scope
// with entries for the direction decides; a block entry matches the
// address or its domain; a non-empty allow list blocks the rest.
func testLists(ctx context.Context, t *testing.T, s Lists) {
	put := func(scope, dir, typ, entry string) {
		t.Helper()
		if _, err := s.PutListEntry(ctx, store.ListEntry{Scope: scope, Direction: dir, Type: typ, Entry: entry, Reason: "r", CreatedAt: base}); err != nil {
			t.Fatal(err)
		}
	}
	put("", store.ListReceive, store.ListBlock, "spam.test")
	put("", store.ListSend, store.ListAllow, "partner.test")
	put("a@shop.test", store.ListReceive, store.ListAllow, "friend@spam.test")
	put("a@shop.test", store.ListReceive, store.ListBlock, "x@other.test")
	for _, tc := range []struct {
		inbox, dir, addr string
		blocked          bool
		entry            string
	}{
		{"b@shop.test", store.ListReceive, "Bob@SPAM.test", true, "spam.test"}, // org block, by domain, any case
		{"b@shop.test", store.ListReceive, "bob@ok.test", false, ""},
		{"a@shop.test", store.ListReceive, "friend@spam.test", false, ""}, // the inbox's list decides
		{"a@shop.test", store.ListReceive, "bob@spam.test", true, ""},     // not on the inbox's allow list
		{"a@shop.test", store.ListReceive, "x@other.test", true, "x@other.test"},
		{"a@shop.test", store.ListSend, "ceo@partner.test", false, ""}, // org send allow
		{"a@shop.test", store.ListSend, "ceo@elsewhere.test", true, ""},
		{"a@shop.test", store.ListReply, "ceo@elsewhere.test", false, ""}, // no reply list
	} {
		b, e, err := s.ListVerdict(ctx, tc.inbox, tc.dir, tc.addr)
		if err != nil || b != tc.blocked || e != tc.entry {
			t.Errorf("ListVerdict(%s, %s, %s) = %v %q %v; want %v %q", tc.inbox, tc.dir, tc.addr, b, e, err, tc.blocked, tc.entry)
		}
	}
	for _, e := range []store.ListEntry{{Direction: "sideways", Type: "block", Entry: "a.test"}, {Direction: "send", Type: "deny", Entry: "a.test"},
		{Direction: "send", Type: "block", Entry: "A.test"}, {Direction: "send", Type: "block"}} {
		if _, err := s.PutListEntry(ctx, e); !errors.Is(err, store.ErrBadInput) {
			t.Errorf("put %+v: %v", e, err)
		}
	}
	put("", store.ListReceive, store.ListBlock, "a.test")
	put("", store.ListReceive, store.ListBlock, "a.test") // again: kept once
	l, err := s.ListEntries(ctx, "", store.ListReceive, store.ListBlock, "", 10)
	if err != nil || len(l) != 2 || l[0].Entry != "a.test" || l[1].Entry != "spam.test" {
		t.Errorf("entries: %+v %v", l, err)
	}
	if l, _ := s.ListEntries(ctx, "", store.ListReceive, store.ListBlock, "a.test", 10); len(l) != 1 || l[0].Entry != "spam.test" {
		t.Errorf("page 2: %+v", l)
	}
	if e, err := s.GetListEntry(ctx, "", store.ListReceive, store.ListBlock, "SPAM.test"); err != nil || e.Reason != "r" || !e.CreatedAt.Equal(base) {
		t.Errorf("get: %+v %v", e, err)
	}
	if err := s.DeleteListEntry(ctx, "", store.ListReceive, store.ListBlock, "spam.test"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteListEntry(ctx, "", store.ListReceive, store.ListBlock, "spam.test"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second delete: %v", err)
	}
	if b, _, _ := s.ListVerdict(ctx, "b@shop.test", store.ListReceive, "bob@spam.test"); b {
		t.Error("blocked after the entry was deleted")
	}
}
