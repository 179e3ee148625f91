package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/envelopd/envelopd/store"
)

// testNodesAPI: the HTTP API's state over several
// store instances at once. Uniqueness comes from the database's keys:
// one inbox per client_id, one webhook per client_id, one claim per
// Idempotency-Key. The event log (websocket, webhooks) is a cursor that
// never skips an event however the nodes commit, and the inbox index
// takes every message.
func testNodesAPI(t *testing.T, open func(t *testing.T) API) {
	t.Run("inbox client_id", func(t *testing.T) {
		ss := openNodes(t, open)
		ctx := context.Background()
		var created atomic.Int32
		race(nodeRacers, func(i int) {
			b, c, err := ss[i%nodes].CreateInbox(ctx, "shop@node.test", "Shop", "cid-1", false)
			if err != nil {
				t.Errorf("racer %d: %v", i, err)
				return
			}
			if b.Address != "shop@node.test" || b.ClientID != "cid-1" {
				t.Errorf("racer %d: %+v", i, b)
			}
			if c {
				created.Add(1)
			}
		})
		if n := created.Load(); n != 1 {
			t.Errorf("%d creates reported created, want 1", n)
		}
		// Another address with the same client_id, or the same address
		// without it: a conflict.
		if _, _, err := ss[1].CreateInbox(ctx, "other@node.test", "", "cid-1", false); !errors.Is(err, store.ErrConflict) {
			t.Errorf("client_id of another inbox: %v, want ErrConflict", err)
		}
		if _, _, err := ss[2].CreateInbox(ctx, "shop@node.test", "", "", false); !errors.Is(err, store.ErrConflict) {
			t.Errorf("existing address: %v, want ErrConflict", err)
		}
	})
	t.Run("webhook client_id", func(t *testing.T) {
		ss := openNodes(t, open)
		ctx := context.Background()
		var created atomic.Int32
		ids := make([]string, nodeRacers)
		race(nodeRacers, func(i int) {
			now := time.Now()
			w, c, err := ss[i%nodes].CreateWebhook(ctx, store.Webhook{ID: fmt.Sprintf("wh_%d", i), URL: "http://127.0.0.1:1/",
				Secret: "whsec_x", Enabled: true, ClientID: "wcid", CreatedAt: now, UpdatedAt: now}, store.WebhookLimits{})
			if err != nil {
				t.Errorf("racer %d: %v", i, err)
				return
			}
			ids[i] = w.ID
			if c {
				created.Add(1)
			}
		})
		if n := created.Load(); n != 1 {
			t.Errorf("%d creates reported created, want 1", n)
		}
		for i, id := range ids {
			if id != ids[0] {
				t.Errorf("racer %d got webhook %s, racer 0 %s", i, id, ids[0])
			}
		}
	})
	t.Run("idempotency key", func(t *testing.T) {
		ss := openNodes(t, open)
		ctx := context.Background()
		var claimed, inFlight atomic.Int32
		req := []byte("request-hash")
		race(nodeRacers, func(i int) {
			c, _, _, err := ss[i%nodes].ClaimIdempotency(ctx, "key1", "idem-1", req, time.Now(), time.Minute)
			switch {
			case errors.Is(err, store.ErrIdempotencyInFlight):
				inFlight.Add(1)
			case err != nil:
				t.Errorf("racer %d: %v", i, err)
			case c:
				claimed.Add(1)
			default:
				t.Errorf("racer %d: neither claimed nor in flight", i)
			}
		})
		if claimed.Load() != 1 || inFlight.Load() != nodeRacers-1 {
			t.Fatalf("claimed %d, in flight %d; want 1 and %d", claimed.Load(), inFlight.Load(), nodeRacers-1)
		}
		if err := ss[0].FinishIdempotency(ctx, "key1", "idem-1", 200, []byte(`{"ok":true}`)); err != nil {
			t.Fatal(err)
		}
		c, status, resp, err := ss[1].ClaimIdempotency(ctx, "key1", "idem-1", req, time.Now(), time.Minute)
		if err != nil || c || status != 200 || string(resp) != `{"ok":true}` {
			t.Errorf("replay on another node: claimed %v status %d %q %v", c, status, resp, err)
		}
		if _, _, _, err := ss[2].ClaimIdempotency(ctx, "key1", "idem-1", []byte("other"), time.Now(), time.Minute); !errors.Is(err, store.ErrIdempotencyMismatch) {
			t.Errorf("another request with the key: %v, want ErrIdempotencyMismatch", err)
		}
	})
	t.Run("event cursor", func(t *testing.T) {
		ss := openNodes(t, open)
		writers := openNodes(t, open)
		n := cursorRace(t, writers, 6, 15, func(w, i int) *store.Incoming {
			in := msg(fmt.Sprintf("ev%d.%d@node.test", w, i), fmt.Sprintf("w%d@node.test", w), fmt.Sprintf("ord_ev%d", i), nil)
			in.Recipients = []string{"rcpt@node.test"}
			return in
		}, cursor[store.Event]{
			wait: ss[0].WaitEvents,
			read: func(ctx context.Context, after int64) ([]store.Event, error) {
				return ss[0].Events(ctx, store.EventFilter{After: after, Limit: 1000})
			},
			all: func(ctx context.Context) ([]store.Event, error) {
				return ss[1].Events(ctx, store.EventFilter{Limit: 1000})
			},
			id:   func(e store.Event) int64 { return e.ID },
			name: func(e store.Event) string { return fmt.Sprintf("event %d", e.ID) },
			check: func(e store.Event) error {
				if e.Type != store.EventReceived || e.Inbox != "rcpt@node.test" {
					return fmt.Errorf("event %+v, want message.received for rcpt@node.test", e)
				}
				return nil
			},
		}, 10*time.Second) // every event is committed: a skipped one never comes
		ctx := context.Background()
		// The inbox index, synced by every node at once, takes each
		// message once.
		race(nodes, func(i int) {
			if _, err := ss[i].SyncInboxes(ctx, 0); err != nil {
				t.Errorf("sync on node %d: %v", i, err)
			}
		})
		ms, err := ss[2].InboxMessages(ctx, store.InboxQuery{Inbox: "rcpt@node.test"})
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) != n {
			t.Errorf("the inbox lists %d messages, want %d", len(ms), n)
		}
	})
}
