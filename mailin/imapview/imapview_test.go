package imapview_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/envelopd/envelopd/mailin/relaytest"
)

// TestIMAPView drives the view with go-imap's client: LOGIN, LIST,
// SELECT, FETCH BODY.PEEK[] (the stored bytes after the verdict fields), STORE, SEARCH,
// IDLE (a delivery during IDLE is announced with EXISTS), MOVE, EXPUNGE,
// and a wrong password.
func TestIMAPView(t *testing.T) {
	relay := relaytest.Start(t)
	alice, bob := relay.Mailbox("alice@agents.test"), relay.Mailbox("bob@agents.test")
	alice.SendType("which", `{"note":"first"}`, bob.Address)
	first := bob.Next()

	exists := make(chan uint32, 8)
	c, err := imapclient.DialInsecure(relay.IMAPAddr, &imapclient.Options{UnilateralDataHandler: &imapclient.UnilateralDataHandler{
		Mailbox: func(d *imapclient.UnilateralDataMailbox) {
			if d.NumMessages != nil {
				exists <- *d.NumMessages
			}
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Login(bob.Address, "wrong").Wait(); err == nil {
		t.Fatal("wrong password accepted")
	}
	if err := c.Login(bob.Address, bob.Password).Wait(); err != nil {
		t.Fatal(err)
	}
	boxes, err := c.List("", "*", nil).Collect()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, b := range boxes {
		names = append(names, b.Mailbox)
	}
	if !slices.Equal(names, []string{"INBOX", "Quarantine", "Sent"}) {
		t.Errorf("LIST %v", names)
	}
	sel, err := c.Select("INBOX", nil).Wait()
	if err != nil {
		t.Fatal(err)
	}
	if sel.NumMessages != 1 || sel.UIDNext != 2 || sel.UIDValidity == 0 {
		t.Errorf("SELECT %+v", sel)
	}
	msgs, err := c.Fetch(imap.SeqSetNum(1), &imap.FetchOptions{UID: true, Flags: true,
		BodySection: []*imap.FetchItemBodySection{{Peek: true}}}).Collect()
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 || msgs[0].UID != 1 || len(msgs[0].Flags) != 0 {
		t.Fatalf("FETCH %+v", msgs)
	}
	// The stored bytes, after the view's verdict fields (TestIMAPViewVerdicts).
	if got := msgs[0].FindBodySection(&imap.FetchItemBodySection{}); !strings.HasSuffix(string(got), string(first.Raw)) ||
		!strings.HasPrefix(string(got), "Authentication-Results: ") {
		t.Errorf("BODY.PEEK[] is not the verdict fields and the stored bytes (%d vs %d)", len(got), len(first.Raw))
	}

	// IDLE: a message delivered meanwhile is announced.
	idle, err := c.Idle()
	if err != nil {
		t.Fatal(err)
	}
	alice.SendType("which", `{"note":"second"}`, bob.Address)
	select {
	case n := <-exists:
		if n != 2 {
			t.Errorf("EXISTS %d during IDLE, want 2", n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no EXISTS during IDLE")
	}
	if err := idle.Close(); err != nil {
		t.Fatal(err)
	}
	idle.Wait()

	if _, err := c.Store(imap.UIDSetNum(1), &imap.StoreFlags{Op: imap.StoreFlagsAdd, Flags: []imap.Flag{imap.FlagFlagged}, Silent: true}, nil).Collect(); err != nil {
		t.Fatal(err)
	}
	sd, err := c.UIDSearch(&imap.SearchCriteria{Flag: []imap.Flag{imap.FlagFlagged}}, nil).Wait()
	if err != nil {
		t.Fatal(err)
	}
	if got := sd.AllUIDs(); !slices.Equal(got, []imap.UID{1}) {
		t.Errorf("SEARCH FLAGGED %v", got)
	}
	sd, err = c.UIDSearch(&imap.SearchCriteria{Body: []string{"second"}}, nil).Wait()
	if err != nil {
		t.Fatal(err)
	}
	if got := sd.AllUIDs(); !slices.Equal(got, []imap.UID{2}) {
		t.Errorf("SEARCH BODY second %v", got)
	}

	// MOVE UID 2 to a new folder; EXPUNGE UID 1 (\Deleted).
	if err := c.Create("Archive", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	md, err := c.Move(imap.UIDSetNum(2), "Archive").Wait()
	if err != nil {
		t.Fatal(err)
	}
	if md.DestUIDs.String() != "1" {
		t.Errorf("MOVE dest UIDs %v", md.DestUIDs)
	}
	if _, err := c.Store(imap.UIDSetNum(1), &imap.StoreFlags{Op: imap.StoreFlagsAdd, Flags: []imap.Flag{imap.FlagDeleted}, Silent: true}, nil).Collect(); err != nil {
		t.Fatal(err)
	}
	gone, err := c.Expunge().Collect()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(gone, []uint32{1}) {
		t.Errorf("EXPUNGE %v", gone)
	}
	st, err := c.Status("INBOX", &imap.StatusOptions{NumMessages: true, UIDNext: true}).Wait()
	if err != nil {
		t.Fatal(err)
	}
	if *st.NumMessages != 0 || st.UIDNext != 3 {
		t.Errorf("STATUS INBOX %d messages, UIDNEXT %d", *st.NumMessages, st.UIDNext)
	}
	// The stored messages stay: the view only unfiled them.
	if _, err := relay.Store.Message(t.Context(), first.ID); err != nil {
		t.Errorf("expunged message gone from the store: %v", err)
	}
}
