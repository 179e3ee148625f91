package relaytest_test

import (
	"os"
	"testing"

	"github.com/emersion/go-message/mail"
	"github.com/envelopd/envelopd/mailin/relaytest"
	"github.com/envelopd/envelopd/mailout"
	"github.com/envelopd/envelopd/store"
)

// TestTunnelStatePerMailbox: protocol state (VCP idempotency claims,
// Vacant chain links) is kept per mailbox and direction. One message
// carrying a tunnelled envelope to two local agents is accepted in the
// sender's Sent copy and in both recipients' copies — no copy makes the
// others replays — while the same envelope sent again to the same agent
// is still a replay there.
func TestTunnelStatePerMailbox(t *testing.T) {
	cases := []struct {
		file     string
		resend   string // the recipients' status when the same envelope comes again
		resendEr string // and the error code, "" for none
	}{
		{"vcp/spec-commerce-search.json", store.StatusDuplicate, ""},
		{"vacant/chain_1.json", store.StatusDuplicate, "replay_detected"},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			relay := relaytest.Start(t, relaytest.Domains("agents.test"))
			alice := relay.Mailbox("alice@agents.test")
			bob := relay.Mailbox("bob@agents.test")
			carol := relay.Mailbox("carol@agents.test")
			doc, err := os.ReadFile("../../testdata/protocols/" + tc.file)
			if err != nil {
				t.Fatal(err)
			}
			send := func(note string) {
				alice.Send(mailout.Draft{Type: "which", Body: []byte(`{"v":"0.2.0","type":"which","note":"` + note + `"}`),
					To:          []*mail.Address{{Address: bob.Address}, {Address: carol.Address}},
					Attachments: []mailout.Attachment{{Filename: "m.json", Data: doc}}})
			}
			send("first")
			for _, m := range []*relaytest.Mailbox{bob, carol} {
				got := m.Next()
				if got.Status != store.StatusAccepted || len(got.Errors) != 0 {
					t.Errorf("%s first copy: %s %v, want accepted without errors", m.Address, got.Status, got.Errors)
				}
			}
			all, err := relay.Store.Messages(t.Context(), store.Filter{})
			if err != nil {
				t.Fatal(err)
			}
			var sent []store.Message
			for _, m := range all {
				if m.Direction == store.DirOut {
					sent = append(sent, m)
				}
			}
			if len(sent) != 1 || sent[0].Status != store.StatusAccepted {
				t.Fatalf("Sent copies %+v, want one accepted", sent)
			}
			send("again")
			for _, m := range []*relaytest.Mailbox{bob, carol} {
				got := m.Next()
				code := ""
				if len(got.Errors) > 0 {
					code = string(got.Errors[0].Code)
				}
				if got.Status != tc.resend || code != tc.resendEr {
					t.Errorf("%s second copy: %s %v, want %s %q", m.Address, got.Status, got.Errors, tc.resend, tc.resendEr)
				}
			}
		})
	}
}
