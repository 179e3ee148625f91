package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/envelopd/envelopd/store"
)

// TestWebhookCLI: list shows each webhook's owner and state (never its
// secret), a revoked key's webhooks as disabled; disable and delete act
// on one webhook.
func TestWebhookCLI(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "w.db")
	ctx := context.Background()
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, k := range []string{"aaaaaaaaaaaa", "bbbbbbbbbbbb"} {
		if err := st.CreateAPIKey(ctx, store.APIKey{ID: k, Hash: []byte("h"), CreatedAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range []store.Webhook{
		{ID: "wh_1", URL: "http://127.0.0.1:9/a", KeyID: "aaaaaaaaaaaa", InboxIDs: []string{"bob@x.test"}},
		{ID: "wh_2", URL: "http://127.0.0.1:9/b", KeyID: "bbbbbbbbbbbb", EventTypes: []string{store.EventReceived}},
		{ID: "wh_3", URL: "http://127.0.0.1:9/c", KeyID: "bbbbbbbbbbbb"},
	} {
		w.Secret, w.Enabled, w.CreatedAt, w.UpdatedAt = "whsec_SECRET", true, now, now
		if _, _, err := st.CreateWebhook(ctx, w, store.WebhookLimits{}); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	if _, code := cli(t, "apikey", "revoke", "aaaaaaaaaaaa", "--db", db); code != 0 {
		t.Fatalf("revoke: %d", code)
	}
	if _, code := cli(t, "webhook", "disable", "wh_2", "--db", db); code != 0 {
		t.Fatalf("disable: %d", code)
	}
	if _, code := cli(t, "webhook", "delete", "wh_3", "--db", db); code != 0 {
		t.Fatalf("delete: %d", code)
	}
	if _, code := cli(t, "webhook", "delete", "wh_3", "--db", db); code != 1 {
		t.Errorf("delete again: %d, want 1", code)
	}
	out, _ := cli(t, "webhook", "list", "--json", "--db", db)
	if strings.Contains(out, "SECRET") {
		t.Errorf("list shows a secret:\n%s", out)
	}
	got := map[string]webhookRow{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r webhookRow
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		got[r.ID] = r
	}
	if len(got) != 2 || got["wh_1"].State != "disabled" || got["wh_1"].DisabledReason != "key_revoked" || got["wh_1"].KeyID != "aaaaaaaaaaaa" ||
		got["wh_2"].State != "disabled" || got["wh_2"].DisabledReason != "operator" {
		t.Errorf("list: %+v", got)
	}
	text, _ := cli(t, "webhook", "list", "--db", db)
	if !strings.Contains(text, "disabled (key_revoked)") || !strings.Contains(text, "aaaaaaaaaaaa") {
		t.Errorf("text list:\n%s", text)
	}
}
