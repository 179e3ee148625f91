package relaytest_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/emersion/go-smtp"

	"github.com/envelopd/envelopd/mailin/relaytest"
	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/store"
)

// flow holds the Envelopay bodies of the first-contact flow.
func flow(t *testing.T) map[string]string {
	b, err := os.ReadFile("../../testdata/relay/first-contact.json")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for k, v := range m {
		out[k] = string(v)
	}
	return out
}

func expect(t *testing.T, m *store.Message, typ, status string) {
	t.Helper()
	if m.Type != typ || m.Status != status {
		t.Fatalf("got %s/%s (errors %v), want %s/%s", m.Type, m.Status, m.Errors, typ, status)
	}
	d := relaytest.DKIM(t, m)
	if len(d) != 1 || d[0].Result != "pass" || d[0].Domain != "agents.test" {
		t.Fatalf("%s: dkim %+v, want one pass for agents.test", typ, d)
	}
}

// TestFirstContact plays Envelopay's first-contact flow between two agents
// through the relay: WHICH → METHODS → ORDER (with proof) → FULFILL, each
// DKIM-signed by the relay and verified by the receiver, one thread seen
// whole from each mailbox; then a PAY replaying the ORDER's proof is refused with a
// courtesy OOPS (duplicate_proof) that lands in the buyer's mailbox.
func TestFirstContact(t *testing.T) {
	body := flow(t)
	relay := relaytest.Start(t, relaytest.Domains("agents.test"))
	alice := relay.Mailbox("alice@agents.test") // buyer
	bob := relay.Mailbox("bob@agents.test")     // seller

	alice.SendType("which", body["which"], bob.Address)
	which := bob.Next()
	expect(t, which, "which", store.StatusAccepted)

	bob.Reply(which, "methods", body["methods"])
	methods := alice.Next()
	expect(t, methods, "methods", store.StatusAccepted)
	if r := relaytest.Result(t, methods); string(r.Fields["which_ref"]) != `"wch_rt01"` {
		t.Errorf("METHODS which_ref %s", r.Fields["which_ref"])
	}

	alice.Reply(methods, "order", body["order"])
	order := bob.Next()
	expect(t, order, "order", store.StatusAccepted)

	bob.Reply(order, "fulfill", body["fulfill"])
	fulfill := alice.Next()
	expect(t, fulfill, "fulfill", store.StatusAccepted)
	if r := relaytest.Result(t, fulfill); string(r.Fields["order_ref"]) != `"ord_rt01"` {
		t.Errorf("FULFILL order_ref %s", r.Fields["order_ref"])
	}

	// Threading: the exchange is one thread (one message sent is one
	// thread, whatever the number of local copies), and each side sees
	// it whole, both directions, in its own mailbox.
	for _, c := range []struct {
		m      *store.Message
		mbox   string
		wantTy []string
	}{
		{which, bob.Address, []string{"which", "methods", "order", "fulfill"}},
		{methods, alice.Address, []string{"which", "methods", "order", "fulfill"}},
	} {
		th, err := relay.Store.Messages(t.Context(), store.Filter{ThreadID: c.m.ThreadID, Mailbox: c.mbox})
		if err != nil {
			t.Fatal(err)
		}
		var types []string
		for _, m := range th {
			types = append(types, m.Type)
		}
		if !equal(types, c.wantTy) {
			t.Errorf("%s thread %v, want %v", c.mbox, types, c.wantTy)
		}
	}
	if fulfill.ThreadID != methods.ThreadID || order.ThreadID != which.ThreadID || which.ThreadID != methods.ThreadID {
		t.Errorf("threads: alice %s/%s, bob %s/%s", methods.ThreadID, fulfill.ThreadID, which.ThreadID, order.ThreadID)
	}

	// Replay: a PAY with the ORDER's proof is a duplicate in bob's mailbox,
	// and bob's relay answers with a courtesy OOPS to alice.
	alice.SendType("pay", body["replayed_pay"], bob.Address)
	pay := bob.Next()
	if pay.Type != "pay" || pay.Status != store.StatusDuplicate || len(pay.Errors) != 1 || pay.Errors[0].Code != protocols.CodeDuplicateProof {
		t.Fatalf("replayed PAY: %s %v", pay.Status, pay.Errors)
	}
	oops := alice.Next()
	expect(t, oops, "oops", store.StatusAccepted)
	r := relaytest.Result(t, oops)
	var e struct {
		Code string `json:"code"`
	}
	json.Unmarshal(r.Fields["error"], &e)
	if e.Code != string(protocols.CodeDuplicateProof) || string(r.Fields["ref"]) != `"pay_rt02"` || oops.Sender != bob.Address {
		t.Errorf("OOPS error %s ref %s from %s", r.Fields["error"], r.Fields["ref"], oops.Sender)
	}

	// Tampering: the FULFILL as alice received it, with its note changed,
	// injected again, fails DKIM: as mail from a local address without a
	// passing signature it is refused at DATA (550 5.7.1) and not stored.
	tampered := bytes.Replace(fulfill.Raw, []byte("Approved with 2 comments"), []byte("Rejected with 2 comments"), 1)
	tampered = bytes.Replace(tampered, []byte("Message-ID: <"), []byte("Message-ID: <x"), 1)
	var se *smtp.SMTPError
	if err := relay.Inject(bob.Address, []string{alice.Address}, tampered); !errors.As(err, &se) || se.Code != 550 {
		t.Errorf("tampered FULFILL: %v, want 550 5.7.1", err)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
