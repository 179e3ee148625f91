package imapview_test

import (
	"bytes"
	"encoding/json"
	"net/mail"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/envelopd/envelopd/mailin/relaytest"
	"github.com/envelopd/envelopd/store"
)

// fetched is one message as a client reads it over the view.
type fetched struct {
	uid  imap.UID
	size int64
	body []byte
}

func fetchAll(t *testing.T, c *imapclient.Client, folder string) (*imap.SelectData, []fetched) {
	t.Helper()
	sel, err := c.Select(folder, &imap.SelectOptions{ReadOnly: true}).Wait()
	if err != nil {
		t.Fatalf("SELECT %s: %v", folder, err)
	}
	if sel.NumMessages == 0 {
		return sel, nil
	}
	ms, err := c.Fetch(imap.SeqSet{{Start: 1, Stop: 0}}, &imap.FetchOptions{UID: true, RFC822Size: true,
		BodySection: []*imap.FetchItemBodySection{{Peek: true}}}).Collect()
	if err != nil {
		t.Fatalf("FETCH %s: %v", folder, err)
	}
	var out []fetched
	for _, m := range ms {
		out = append(out, fetched{m.UID, m.RFC822Size, m.FindBodySection(&imap.FetchItemBodySection{})})
	}
	return sel, out
}

// TestIMAPViewVerdicts: an agent reading the view over IMAP
// sees only accepted mail in INBOX; a PAY replaying an ORDER's payment
// proof (duplicate_proof) and a mail failing DKIM are in Quarantine, which
// LIST shows. Every message served starts with an Authentication-Results
// field (authserv-id relaytest) and X-Envelopd-Status, followed by the
// stored bytes (kept unchanged in the store); RFC822.SIZE, partial BODY[]
// and SEARCH LARGER agree with the bytes served. A sender's
// Authentication-Results claiming the view's authserv-id is served
// renamed (RFC 8601 §5); a sender's X-Envelopd-Status comes after
// envelopd's, so a client reading the first one gets envelopd's. Before the fix the replayed PAY was in INBOX like the ORDER,
// with no field saying it was a duplicate.
func TestIMAPViewVerdicts(t *testing.T) {
	b, err := os.ReadFile("../../testdata/relay/first-contact.json")
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatal(err)
	}
	relay := relaytest.Start(t)
	alice, bob := relay.Mailbox("alice@agents.test"), relay.Mailbox("bob@agents.test")
	alice.SendType("order", string(body["order"]), bob.Address)
	order := bob.Next()
	alice.SendType("pay", string(body["replayed_pay"]), bob.Address)
	pay := bob.Next()
	if order.Status != store.StatusAccepted || pay.Status != store.StatusDuplicate || len(pay.Errors) != 1 || pay.Errors[0].Code != "duplicate_proof" {
		t.Fatalf("ORDER %s %v, PAY %s %v: want accepted, duplicate (duplicate_proof)", order.Status, order.Errors, pay.Status, pay.Errors)
	}
	forged := "From: eve@evil.test\r\nTo: bob@agents.test\r\nSubject: WHICH | forged\r\nMessage-ID: <forged@evil.test>\r\n" +
		"X-Envelopd-Status: accepted\r\nAuthentication-Results: relaytest; dkim=pass header.d=evil.test\r\n" +
		"DKIM-Signature: v=1; a=rsa-sha256; d=evil.test; s=x; h=from; bh=AAAA; b=AAAA\r\n" +
		"Date: Mon, 2 Feb 2026 10:00:00 +0000\r\nContent-Type: text/plain\r\n\r\n{\"v\":\"0.2.0\",\"type\":\"which\",\"id\":\"wch_f\"}\r\n"
	if err := relay.Inject("eve@evil.test", []string{bob.Address}, []byte(forged)); err != nil {
		t.Fatal(err)
	}
	bad := bob.Next()
	if bad.Status != store.StatusQuarantined {
		t.Fatalf("forged mail %s %v, want quarantined", bad.Status, bad.Errors)
	}

	c, err := imapclient.DialInsecure(relay.IMAPAddr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
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
		t.Errorf("LIST %v, want INBOX Quarantine Sent", names)
	}

	inSel, inbox := fetchAll(t, c, "INBOX")
	qSel, quar := fetchAll(t, c, "Quarantine")
	if len(inbox) != 1 || len(quar) != 2 {
		t.Fatalf("INBOX holds %d, Quarantine %d messages; want 1 (the ORDER) and 2 (the replayed PAY, the forged mail)", len(inbox), len(quar))
	}
	if inSel.UIDValidity == qSel.UIDValidity || inbox[0].uid != 1 || quar[0].uid != 1 || quar[1].uid != 2 {
		t.Errorf("UIDVALIDITY %d/%d, UIDs %d %d %d", inSel.UIDValidity, qSel.UIDValidity, inbox[0].uid, quar[0].uid, quar[1].uid)
	}
	for _, c := range []struct {
		name   string
		got    fetched
		stored *store.Message
		ar     string // Authentication-Results, unfolded
		status string
	}{
		{"ORDER", inbox[0], order, "relaytest; dkim=pass header.a=ed25519-sha256 header.d=agents.test header.s=envelopd", "accepted; payment=unverified"},
		{"replayed PAY", quar[0], pay, "relaytest; dkim=pass header.a=ed25519-sha256 header.d=agents.test header.s=envelopd", "duplicate; errors=duplicate_proof; payment=duplicate"},
		{"forged", quar[1], bad, "relaytest; dkim=permerror", "quarantined; errors=dkim_failed"},
	} {
		again, err := relay.Store.Message(t.Context(), c.stored.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again.Raw, c.stored.Raw) || again.Size != len(again.Raw) {
			t.Errorf("%s: stored bytes changed", c.name)
		}
		// The stored bytes follow, except that an Authentication-Results
		// field of the sender's claiming authserv-id relaytest is renamed
		// (same length).
		want := bytes.Replace(c.stored.Raw, []byte("\r\nAuthentication-Results: relaytest;"), []byte("\r\nX-Spoofed-Auth-Results: relaytest;"), 1)
		if !bytes.HasSuffix(c.got.body, want) || (c.name == "forged") == bytes.Equal(want, c.stored.Raw) {
			t.Fatalf("%s: served bytes do not end with the stored bytes:\n%.400s", c.name, c.got.body)
		}
		head := string(c.got.body[:len(c.got.body)-len(c.stored.Raw)])
		if strings.Count(strings.ReplaceAll(head, "\r\n\t", " "), "\r\n") != 2 || !strings.Contains(head, "\r\nX-Envelopd-Status: ") || !strings.HasSuffix(head, "\r\n") {
			t.Errorf("%s: prepended header %q, want the two fields", c.name, head)
		}
		if c.got.size != int64(len(c.got.body)) {
			t.Errorf("%s: RFC822.SIZE %d, BODY[] %d bytes", c.name, c.got.size, len(c.got.body))
		}
		m, err := mail.ReadMessage(bytes.NewReader(c.got.body))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		ar := strings.Join(strings.Fields(m.Header.Get("Authentication-Results")), " ")
		if !strings.HasPrefix(ar, c.ar) || !strings.HasPrefix(string(c.got.body), "Authentication-Results: relaytest;") {
			t.Errorf("%s: Authentication-Results %q, want %q…", c.name, ar, c.ar)
		}
		if n := len(m.Header["Authentication-Results"]); n != 1 {
			t.Errorf("%s: %d Authentication-Results fields served, want envelopd's only", c.name, n)
		}
		if got := m.Header.Get("X-Envelopd-Status"); got != c.status {
			t.Errorf("%s: X-Envelopd-Status %q, want %q", c.name, got, c.status)
		}
	}

	// Offsets and sizes are of the served bytes.
	if _, err := c.Select("Quarantine", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	part := &imap.FetchItemBodySection{Peek: true, Partial: &imap.SectionPartial{Offset: 0, Size: 22}}
	ms, err := c.Fetch(imap.UIDSetNum(1), &imap.FetchOptions{BodySection: []*imap.FetchItemBodySection{part}}).Collect()
	if err != nil || len(ms) != 1 || string(ms[0].FindBodySection(part)) != "Authentication-Results" {
		t.Errorf("BODY.PEEK[]<0.22>: %v %v", ms, err)
	}
	size := quar[0].size
	for _, c2 := range []struct {
		crit imap.SearchCriteria
		want []imap.UID
	}{
		{imap.SearchCriteria{Larger: size - 1, Smaller: size + 1}, []imap.UID{1}},
		{imap.SearchCriteria{Header: []imap.SearchCriteriaHeaderField{{Key: "X-Envelopd-Status", Value: "duplicate_proof"}}}, []imap.UID{1}},
		{imap.SearchCriteria{Header: []imap.SearchCriteriaHeaderField{{Key: "X-Envelopd-Status", Value: "dkim_failed"}}}, []imap.UID{2}},
	} {
		sd, err := c.UIDSearch(&c2.crit, nil).Wait()
		if err != nil {
			t.Fatal(err)
		}
		if got := sd.AllUIDs(); !slices.Equal(got, c2.want) {
			t.Errorf("UID SEARCH %+v = %v, want %v", c2.crit, got, c2.want)
		}
	}
}
