package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/envelopd/envelopd/internal/pgtest"
	"github.com/envelopd/envelopd/store"
)

// TestMigrateWebhookFanOut: migration 18 moves the webhook fan-out out of
// the event's transaction. Webhooks made before it are matched through
// the new index exactly as their lists say; an event fanned out by the
// old trigger is not fanned out again; a webhook of a key revoked before
// it is disabled.
func TestMigrateWebhookFanOut(t *testing.T) {
	ctx := context.Background()
	path := oldDatabase(t, 17,
		`INSERT INTO api_keys (id, hash, inboxes, name, created_at, revoked_at) VALUES ('k_live', x'00', '[]', '', 0, NULL), ('k_gone', x'00', '[]', '', 0, 1)`,
		`INSERT INTO api_webhooks (id, url, event_types, inbox_ids, secret, key_id, created_at, updated_at) VALUES
			('wh_b', 'http://127.0.0.1:9/', '["message.received"]', '["b@y.test"]', 'whsec_AAAA', 'k_live', 1, 1),
			('wh_all', 'http://127.0.0.1:9/', '[]', '[]', 'whsec_AAAA', 'k_live', 2, 2),
			('wh_gone', 'http://127.0.0.1:9/', '[]', '[]', 'whsec_AAAA', 'k_gone', 3, 3)`,
		// A message.sent event, fanned out by the old trigger to wh_all
		// and wh_gone.
		`INSERT INTO messages (mailbox, direction, message_id, content_hash, sender, recipients, subject, type, envelopay_id,
			status, thread_id, received_at, errors, warnings, auth_results, size) VALUES ('', 'out', 'old@x.test', x'00',
			'a@x.test', '["b@y.test"]', 'hi', '', '', 'accepted', 't_old', 0, '[]', '[]', '', 1)`)
	s, err := store.OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkMigratedWebhooks(t, s)
}

// TestPostgresMigrateWebhookFanOut is TestMigrateWebhookFanOut on
// Postgres (migration 18 there).
func TestPostgresMigrateWebhookFanOut(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Schema(t)
	db, err := store.PostgresMigrateTo(ctx, dsn, 17)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO api_keys (id, hash, inboxes, name, created_at, revoked_at) VALUES ('k_live', '\x00', '[]', '', 0, NULL), ('k_gone', '\x00', '[]', '', 0, 1)`,
		`INSERT INTO api_webhooks (id, url, event_types, inbox_ids, secret, key_id, created_at, updated_at) VALUES
			('wh_b', 'http://127.0.0.1:9/', '["message.received"]', '["b@y.test"]', 'whsec_AAAA', 'k_live', 1, 1),
			('wh_all', 'http://127.0.0.1:9/', '[]', '[]', 'whsec_AAAA', 'k_live', 2, 2),
			('wh_gone', 'http://127.0.0.1:9/', '[]', '[]', 'whsec_AAAA', 'k_gone', 3, 3)`,
		// An event fanned out by the old trigger to wh_all and wh_gone.
		`INSERT INTO api_events (id, type, inbox, message_id, created_at) VALUES (1, 'message.sent', 'a@x.test', 1, 0)`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			db.Close()
			t.Fatal(err)
		}
	}
	db.Close()
	s, err := store.OpenPostgres(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkMigratedWebhooks(t, s)
}

// checkMigratedWebhooks checks the webhooks of the migration tests after
// migration 18: the revoked key's webhook disabled; after one more
// message, its events fanned out through the new index. Old event:
// wh_all, wh_gone (by the old trigger); new events (received for b@ and
// c@): wh_b once, wh_all twice, nothing for wh_gone. On Postgres the new
// events are fanned out once every older transaction has ended (other
// tests share the server): it waits up to 10 s.
func checkMigratedWebhooks(t *testing.T, s store.DB) {
	t.Helper()
	ctx := context.Background()
	w, err := s.WebhookByID(ctx, "wh_gone")
	if err != nil || w.Enabled || w.DisabledReason != "key_revoked" {
		t.Errorf("webhook of a revoked key: %+v %v", w, err)
	}
	if _, err := s.Ingest(ctx, &store.Incoming{MessageID: "new@x.test", Direction: store.DirIn, Sender: "a@x.test",
		Recipients: []string{"b@y.test", "c@y.test"}, Subject: "hello", Status: store.StatusAccepted, Raw: []byte("y")}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ds, err := s.WebhookDeliveries(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		for _, d := range ds {
			got[d.WebhookID]++
		}
		if len(ds) == 5 && got["wh_all"] == 3 && got["wh_b"] == 1 && got["wh_gone"] == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("deliveries %v (%d), want wh_all 3, wh_b 1, wh_gone 1", got, len(ds))
		}
		time.Sleep(5 * time.Millisecond)
	}
}
