package relaytest_test

import (
	"testing"

	"github.com/envelopd/envelopd/mailin/relaytest"
	"github.com/envelopd/envelopd/store"
)

// TestOneSendOneThread: one message sent to two local agents is stored
// three times (the sender's Sent copy and one copy per recipient mailbox),
// all in one thread; a reply joins it in both mailboxes.
func TestOneSendOneThread(t *testing.T) {
	relay := relaytest.Start(t)
	alice := relay.Mailbox("alice@agents.test")
	bob := relay.Mailbox("bob@agents.test")
	carol := relay.Mailbox("carol@agents.test")
	alice.SendType("ORDER", `{"v":"0.2.0","type":"order","id":"ord_1","task":"review"}`, bob.Address, carol.Address)
	order := bob.Next()
	carol.Next()
	all, err := relay.Store.Messages(t.Context(), store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 {
		t.Fatalf("stored %d messages, want 3 (Sent copy, bob's, carol's)", len(all))
	}
	for _, m := range all {
		if m.ThreadID != all[0].ThreadID {
			t.Errorf("%s copy (%s) in thread %s, want %s like the others", m.Mailbox, m.Direction, m.ThreadID, all[0].ThreadID)
		}
	}
	bob.Reply(order, "FULFILL", `{"v":"0.2.0","type":"fulfill","id":"ful_1","result":{"summary":"ok"}}`)
	got := alice.Next()
	if got.Type != "fulfill" || got.ThreadID != all[0].ThreadID {
		t.Errorf("alice got %s in thread %s, want the FULFILL in %s", got.Type, got.ThreadID, all[0].ThreadID)
	}
}
