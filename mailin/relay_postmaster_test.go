package mailin_test

import (
	"context"
	"testing"

	"github.com/emersion/go-smtp"

	"github.com/envelopd/envelopd/mailin/relaytest"
	"github.com/envelopd/envelopd/store"
)

// TestRelayPostmaster: in relay mode RCPT TO:<postmaster> (no domain,
// RFC 5321 §4.5.1) reaches the mailbox postmaster@ the first --domain.
func TestRelayPostmaster(t *testing.T) {
	relay := relaytest.Start(t)
	c, err := smtp.Dial(relay.SMTPAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Hello("client.test"); err != nil {
		t.Fatal(err)
	}
	if err := c.Mail("someone@remote.test", nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Rcpt("POSTMASTER", nil); err != nil {
		t.Fatalf("RCPT TO:<POSTMASTER>: %v", err)
	}
	w, err := c.Data()
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("From: someone@remote.test\r\nTo: postmaster\r\nSubject: your server\r\n\r\nhello\r\n"))
	if err := w.Close(); err != nil {
		t.Fatalf("DATA: %v", err)
	}
	ms, err := relay.Store.Messages(context.Background(), store.Filter{Mailbox: "postmaster@agents.test"})
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 {
		t.Errorf("%d messages in postmaster@agents.test, want 1", len(ms))
	}
}
