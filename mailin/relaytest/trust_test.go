package relaytest_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/emersion/go-smtp"

	"github.com/envelopd/envelopd/mailin/relaytest"
	"github.com/envelopd/envelopd/store"
)

// TestLocalAuthorNeedsProof: mail on the relay's MX port
// (no AUTH) whose From is a local address is refused with 550 5.7.1 at
// DATA unless it carries a passing DKIM signature of that domain, so a
// stranger cannot have alice's agent act on mail "from bob". Before the
// fix each forged message was stored in alice's inbox as accepted, from
// bob. A stranger's own mail and bob's signed mail relayed unchanged are
// still accepted.
func TestLocalAuthorNeedsProof(t *testing.T) {
	for _, sign := range []bool{true, false} {
		name := "sign-local"
		var opts []relaytest.Option
		if !sign {
			name, opts = "no-signing", append(opts, relaytest.NoSigning())
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			relay := relaytest.Start(t, opts...)
			alice, bob, carol := relay.Mailbox("alice@agents.test"), relay.Mailbox("bob@agents.test"), relay.Mailbox("carol@agents.test")
			msg := func(from, id, extra string) []byte {
				return []byte("From: " + from + "\r\n" + extra + "To: alice@agents.test\r\nSubject: WHICH | forged\r\n" +
					"Message-ID: <" + id + "@x.test>\r\nDate: Mon, 2 Feb 2026 10:00:00 +0000\r\n" +
					"Content-Type: text/plain\r\n\r\n{\"v\":\"0.2.0\",\"type\":\"which\",\"id\":\"" + id + "\"}\r\n")
			}
			for _, c := range []struct {
				name, mailFrom string
				raw            []byte
			}{
				{"local From", "bob@agents.test", msg("Bob <bob@agents.test>", "f1", "")},
				{"local From, stranger envelope", "eve@evil.test", msg("bob@Agents.Test", "f2", "")},
				{"second From field", "eve@evil.test", msg("eve@evil.test", "f3", "From: bob@agents.test\r\n")},
				{"second address", "eve@evil.test", msg("eve@evil.test, bob@agents.test", "f4", "")},
				{"recipient's own address", "alice@agents.test", msg("alice@agents.test", "f5", "")},
				{"fake signature", "bob@agents.test", msg("bob@agents.test", "f6",
					"DKIM-Signature: v=1; a=rsa-sha256; d=agents.test; s=envelopd; h=from; bh=AAAA; b=AAAA\r\n")},
			} {
				err := relay.Inject(c.mailFrom, []string{alice.Address}, c.raw)
				var se *smtp.SMTPError
				if !errors.As(err, &se) || se.Code != 550 || se.EnhancedCode != (smtp.EnhancedCode{5, 7, 1}) ||
					!strings.Contains(se.Message, "submission") {
					t.Errorf("%s: Inject = %v, want 550 5.7.1", c.name, err)
				}
			}
			// A stranger writing as itself is accepted; the forgeries
			// above were not stored (this is alice's first message).
			if err := relay.Inject("eve@else.test", []string{alice.Address}, msg("eve@else.test", "ok1", "")); err != nil {
				t.Fatal(err)
			}
			if got := alice.Next(); got.Sender != "eve@else.test" || got.MessageID != "ok1@x.test" {
				t.Fatalf("alice's first message: %s from %s (%s), want ok1 from eve@else.test", got.MessageID, got.Sender, got.Status)
			}
			// Authenticated submission as bob is delivered.
			bob.SendType("which", `{"v":"0.2.0","type":"which","id":"w1"}`, alice.Address)
			fromBob := alice.Next()
			if fromBob.Sender != bob.Address || fromBob.Status != store.StatusAccepted {
				t.Fatalf("bob's submitted mail: from %s, %s %v", fromBob.Sender, fromBob.Status, fromBob.Errors)
			}
			// The same bytes relayed through the MX port: with
			// --sign-local they carry bob's domain's passing signature
			// and are accepted; unsigned they are refused.
			err := relay.Inject(bob.Address, []string{carol.Address}, fromBob.Raw)
			if !sign {
				if err == nil {
					t.Fatal("unsigned mail from bob accepted on the MX port")
				}
				return
			}
			if err != nil {
				t.Fatalf("bob's signed mail relayed unchanged: %v", err)
			}
			got := carol.Next()
			if got.Sender != bob.Address || got.Status != store.StatusAccepted || len(relaytest.DKIM(t, got)) != 1 {
				t.Errorf("carol: from %s, %s, dkim %s", got.Sender, got.Status, got.DKIM)
			}
		})
	}
}
