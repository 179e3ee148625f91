// Package storetest is the conformance suite every store.Store backend
// must pass (in the manner of inbucket's storage tests): the ingest rules
// (exact redelivery, duplicate_id, duplicate_proof, ACCEPT
// against OFFER, tunnelled-protocol claims and chain links, status,
// threading, hand-off, courtesy OOPS) as scenario files under testdata/,
// the courtesy OOPS limits and decision record (oops.go),
// plus races, several store instances over one data set (nodes.go:
// what several envelopd processes on one database are), restart, the outbound queue, the hand-off log, IMAP state,
// keys, the readers, and relay mailboxes with their folder view.
package storetest

import (
	"testing"

	"github.com/envelopd/envelopd/store"
)

// Run runs the suite. open returns a store for t; it may be called more
// than once with the same t, and then must return a store over the same
// data (the restart tests close the first store and open again). The
// suite closes every store it opens.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	t.Run("Scenarios", func(t *testing.T) { testScenarios(t, open) })
	t.Run("Races", func(t *testing.T) { testRaces(t, open) })
	t.Run("Restart", func(t *testing.T) { testRestart(t, open) })
	t.Run("Queue", func(t *testing.T) { testQueue(t, open) })
	t.Run("Deliveries", func(t *testing.T) { testDeliveries(t, open) })
	t.Run("State", func(t *testing.T) { testState(t, open) })
	t.Run("Read", func(t *testing.T) { testRead(t, open) })
	t.Run("BadInput", func(t *testing.T) { testBadInput(t, open) })
	t.Run("Mailboxes", func(t *testing.T) { testMailboxes(t, open) })
	t.Run("OOPSLimits", func(t *testing.T) { testOOPSLimits(t, open) })
	t.Run("ProblemTexts", func(t *testing.T) { testProblemTexts(t, open) })
	t.Run("Nodes", func(t *testing.T) { testNodes(t, open) })
	t.Run("OwedOOPS", func(t *testing.T) { testOwedOOPS(t, open) })
	t.Run("Webhooks", func(t *testing.T) { testWebhooks(t, open) })
	t.Run("Retention", func(t *testing.T) { testRetention(t, open) })
	t.Run("WebhookOwners", func(t *testing.T) { testWebhookOwners(t, open) })
	t.Run("Drafts", func(t *testing.T) { testDrafts(t, open) })
	t.Run("Lists", func(t *testing.T) { testLists(t, open) })
	t.Run("Domains", func(t *testing.T) { testDomains(t, open) })
	t.Run("Payments", func(t *testing.T) { testPayments(t, open) })
	t.Run("HandoffHold", func(t *testing.T) { testHandoffHold(t, open) })
}
