package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/envelopd/envelopd/store"
)

// testAPIKeys: a key keeps its scope (inboxes or pod) and permissions
// (nil: all; an empty list: none) as given; UpdateAPIKey changes only
// the name, the permissions and updated_at of a live key, and is
// ErrNotFound for an unknown or revoked one.
func testAPIKeys(ctx context.Context, t *testing.T, s API) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	keys := []store.APIKey{
		{ID: "k-all", Hash: []byte("h1"), Name: "all", CreatedAt: at},
		{ID: "k-none", Hash: []byte("h2"), Inboxes: []string{"a@x.test"}, Permissions: []string{}, CreatedAt: at.Add(time.Second)},
		{ID: "k-pod", Hash: []byte("h3"), Pod: "envelopd", Permissions: []string{"inbox_read", "message_read"}, CreatedAt: at.Add(2 * time.Second)},
	}
	for _, k := range keys {
		if err := s.CreateAPIKey(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range keys {
		got, err := s.APIKeyByID(ctx, want.ID)
		if err != nil {
			t.Fatal(err)
		}
		if (got.Permissions == nil) != (want.Permissions == nil) || !slices.Equal(got.Permissions, want.Permissions) ||
			got.Pod != want.Pod || got.Name != want.Name || !got.UpdatedAt.Equal(want.CreatedAt) || !got.CreatedAt.Equal(want.CreatedAt) {
			t.Errorf("key %s: got %+v, want %+v", want.ID, got, want)
		}
	}
	later := at.Add(time.Hour)
	if err := s.UpdateAPIKey(ctx, "k-all", "renamed", []string{"draft_read"}, later); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateAPIKey(ctx, "k-pod", "pod", nil, later); err != nil {
		t.Fatal(err)
	}
	got, err := s.APIKeyByID(ctx, "k-all")
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "renamed" || !slices.Equal(got.Permissions, []string{"draft_read"}) || !got.UpdatedAt.Equal(later) ||
		!got.CreatedAt.Equal(at) || string(got.Hash) != "h1" || len(got.Inboxes) != 0 {
		t.Errorf("updated k-all: %+v", got)
	}
	if got, _ := s.APIKeyByID(ctx, "k-pod"); got.Permissions != nil || got.Pod != "envelopd" {
		t.Errorf("k-pod with every permission: %+v", got)
	}
	if err := s.UpdateAPIKey(ctx, "nope", "x", nil, later); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("update of an unknown key: %v, want ErrNotFound", err)
	}
	if err := s.RevokeAPIKey(ctx, "k-none"); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateAPIKey(ctx, "k-none", "x", nil, later); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("update of a revoked key: %v, want ErrNotFound", err)
	}
	all, err := s.APIKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 || all[1].ID != "k-none" || all[1].Permissions == nil || len(all[1].Permissions) != 0 || all[1].RevokedAt == nil {
		t.Errorf("APIKeys: %+v", all)
	}
}
