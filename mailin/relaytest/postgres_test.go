package relaytest_test

import (
	"os"
	"testing"

	"github.com/envelopd/envelopd/internal/pgtest"
	"github.com/envelopd/envelopd/mailin/relaytest"
	"github.com/envelopd/envelopd/store"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// TestPostgresRelayTwoNodes: two relays — SMTP, submission,
// IMAP view, queue worker each — on one Postgres database share the
// mailboxes, their folders and UIDs, and the relay DKIM keys: mail
// submitted on one node reaches the recipient's mailbox read through the
// other node's IMAP view, and the reply goes back the same way, in one
// thread.
func TestPostgresRelayTwoNodes(t *testing.T) {
	db := pgtest.Schema(t)
	a := relaytest.Start(t, relaytest.DB(db))
	b := relaytest.Start(t, relaytest.DB(db))
	alice := a.Mailbox("alice@agents.test")
	bob := b.Mailbox("bob@agents.test")
	alice.SendType("ORDER", `{"v":"0.2.0","type":"order","id":"ord_1","task":"review"}`, bob.Address)
	order := bob.Next()
	if order.Type != "order" || order.Status != store.StatusAccepted {
		t.Fatalf("bob got %s %s, want the accepted ORDER", order.Type, order.Status)
	}
	bob.Reply(order, "FULFILL", `{"v":"0.2.0","type":"fulfill","id":"ful_1","result":{"summary":"ok"}}`)
	got := alice.Next()
	if got.Type != "fulfill" || got.ThreadID != order.ThreadID {
		t.Errorf("alice got %s in thread %s, want the FULFILL in %s", got.Type, got.ThreadID, order.ThreadID)
	}
	keysA, err := a.Store.Keys(t.Context(), "dkim-local")
	if err != nil {
		t.Fatal(err)
	}
	keysB, err := b.Store.Keys(t.Context(), "dkim-local")
	if err != nil {
		t.Fatal(err)
	}
	if len(keysA) == 0 || keysA["agents.test"] != keysB["agents.test"] {
		t.Errorf("relay DKIM keys not shared: %d on a, equal %v", len(keysA), keysA["agents.test"] == keysB["agents.test"])
	}
}
