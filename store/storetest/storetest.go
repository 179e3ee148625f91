// Package storetest is the conformance suite every store backend must
// pass (in the manner of inbucket's StoreSuite(t, factory)): one suite per
// room of the store, each declaring the contract it tests — Rules (the
// ingest rules: exact redelivery, duplicate_id, duplicate_proof, ACCEPT
// against OFFER, tunnelled-protocol claims and chain links, status,
// threading, hand-off, courtesy OOPS, as scenario files under testdata/;
// the courtesy OOPS limits and decision record; races; several store
// instances over one data set, which is what several envelopd processes on
// one database are; restart; the outbound queue; the hand-off log; IMAP
// state; keys; the readers), Relay (mailboxes and their folder view), API
// (keys, inbox index, event log, webhooks, idempotency, retention),
// Payments, Domains, Drafts and Lists. Run runs them all through one
// Factory; a backend that keeps only some rooms runs their suites alone.
package storetest

import (
	"io"
	"testing"

	"github.com/envelopd/envelopd/store"
)

// Factory opens a store for t; it may be called more than once with the
// same t, and then must return a store over the same data (the restart
// tests close the first store and open again). The suites close every
// store they open. One factory serves every suite: each suite takes the
// store as the contract it tests (Rules, Relay, API, …), so a backend
// that keeps only some rooms runs only their suites.
type Factory func(t *testing.T) store.DB

// Rules is the contract of the rules core (RunRules): ingest and its
// rules, the reads, the outbound queue, the hand-off log with the
// operator's holds, the protocols' state, the owed courtesy OOPS, and the
// payments an ingest records.
type Rules interface {
	store.Ingester
	store.Reader
	store.OutboundQueue
	store.HandoffLog
	store.HandoffAdmin
	store.StateStore
	store.OOPSLog
	store.Payments
	store.Mailboxes // the rules file received mail in its mailbox
	io.Closer
}

// Relay is the contract of relay mode's mailboxes and folders
// (RunRelay): the folder view over messages stored by ingest.
type Relay interface {
	store.Ingester
	store.Reader
	store.Mailboxes
	io.Closer
}

// API is the contract of the HTTP API's rooms (RunAPI): keys, the inbox
// index, the event log and its retention, webhooks, idempotency, over
// messages stored by ingest.
type API interface {
	store.APIStore
	store.Ingester
	store.Reader
	io.Closer
}

// Payments is the contract of the payments' room (RunPayments): the
// payments recorded by ingest, their checks, and the events they write.
type Payments interface {
	store.Payments
	store.Ingester
	store.Reader
	store.EventLog
	store.OOPSLog // a rejected payment's owed OOPS
	io.Closer
}

// Domains is the contract of the managed domains' room (RunDomains),
// with the event log their verification writes to.
type Domains interface {
	store.DomainStore
	store.EventLog
	io.Closer
}

// Drafts is the contract of the drafts' room (RunDrafts).
type Drafts interface {
	store.DraftStore
	io.Closer
}

// Lists is the contract of the allow/block lists' room (RunLists).
type Lists interface {
	store.ListStore
	io.Closer
}

// Run runs every suite over the stores open makes.
func Run(t *testing.T, open Factory) {
	RunRules(t, func(t *testing.T) Rules { return open(t) })
	RunRelay(t, func(t *testing.T) Relay { return open(t) })
	RunAPI(t, func(t *testing.T) API { return open(t) })
	RunPayments(t, func(t *testing.T) Payments { return open(t) })
	RunDomains(t, func(t *testing.T) Domains { return open(t) })
	RunDrafts(t, func(t *testing.T) Drafts { return open(t) })
	RunLists(t, func(t *testing.T) Lists { return open(t) })
}

// RunRules runs the rules core's suite.
func RunRules(t *testing.T, open func(t *testing.T) Rules) {
	runTests(t, open, []test[Rules]{
		{name: "Scenarios", open: testScenarios},
		{name: "Races", open: testRaces},
		{name: "Restart", open: testRestart},
		{name: "Queue", one: testQueue},
		{name: "Deliveries", one: testDeliveries},
		{name: "State", one: testState},
		{name: "Read", one: testRead},
		{name: "BadInput", one: testBadInput},
		{name: "OOPSLimits", open: testOOPSLimits},
		{name: "ProblemTexts", one: testProblemTexts},
		{name: "Nodes", open: testNodes},
		{name: "OwedOOPS", open: testOwedOOPS},
		{name: "HandoffHold", one: testHandoffHold},
		{name: "EnqueueChecked", one: testEnqueueChecked},
	})
}

// RunRelay runs the suite of relay mode's mailboxes and folders.
func RunRelay(t *testing.T, open func(t *testing.T) Relay) {
	runTests(t, open, []test[Relay]{{name: "Mailboxes", open: testMailboxes}})
}

// RunAPI runs the suite of the HTTP API's rooms.
func RunAPI(t *testing.T, open func(t *testing.T) API) {
	runTests(t, open, []test[API]{
		{name: "NodesAPI", open: testNodesAPI},
		{name: "Webhooks", one: testWebhooks},
		{name: "Retention", one: testRetention},
		{name: "WebhookOwners", one: testWebhookOwners},
		{name: "EventTypes", one: testEventTypes},
		{name: "APIKeys", one: testAPIKeys},
		{name: "Usage", one: testUsage},
		{name: "WebhookHeaders", one: testWebhookHeaders},
	})
}

// RunPayments runs the payments' suite.
func RunPayments(t *testing.T, open func(t *testing.T) Payments) {
	runTests(t, open, []test[Payments]{{name: "Payments", open: testPayments}})
}

// RunDomains runs the managed domains' suite.
func RunDomains(t *testing.T, open func(t *testing.T) Domains) {
	runTests(t, open, []test[Domains]{{name: "Domains", open: testDomains}})
}

// RunDrafts runs the drafts' suite.
func RunDrafts(t *testing.T, open func(t *testing.T) Drafts) {
	runTests(t, open, []test[Drafts]{{name: "Drafts", one: testDrafts}})
}

// RunLists runs the allow/block lists' suite.
func RunLists(t *testing.T, open func(t *testing.T) Lists) {
	runTests(t, open, []test[Lists]{{name: "Lists", one: testLists}})
}
