package api_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/envelopd/envelopd/store"
)

type listEntryObj struct {
	Entry     string `json:"entry"`
	EntryType string `json:"entry_type"`
	Direction string `json:"direction"`
	ListType  string `json:"list_type"`
	InboxID   string `json:"inbox_id"`
	PodID     string `json:"pod_id"`
	Name      string `json:"name"`
	Message   string `json:"message"`
}

// TestLists: entries at the organisation (= the pod) and inbox scopes;
// bad entries are 400; a send to a blocked recipient is a 403
// MessageRejectedError with nothing queued.
func TestLists(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.createInbox("shop", "shop.test")
	var le listEntryObj
	if c := e.do(e.key, "POST", "/v0/lists/send/block", `{"entry":"Evil.TEST","reason":"spam"}`, &le); c != 200 || le.Entry != "evil.test" || le.EntryType != "domain" || le.PodID != "envelopd" {
		t.Fatalf("create: %d %+v", c, le)
	}
	if c := e.do(e.key, "GET", "/v0/pods/envelopd/lists/send/block/evil.test", nil, &le); c != 200 || le.Entry != "evil.test" {
		t.Errorf("the pod's list is the organisation's: %d %+v", c, le)
	}
	if c := e.do(e.key, "POST", "/v0/inboxes/shop@shop.test/lists/send/allow", `{"entry":"ok@buyer.test"}`, &le); c != 200 || le.EntryType != "email" || le.InboxID != "shop@shop.test" {
		t.Errorf("inbox create: %d %+v", c, le)
	}
	var l struct {
		Count   int            `json:"count"`
		Entries []listEntryObj `json:"entries"`
	}
	if c := e.do(e.key, "GET", "/v0/inboxes/shop@shop.test/lists/send/allow", nil, &l); c != 200 || l.Count != 1 || l.Entries[0].Entry != "ok@buyer.test" {
		t.Errorf("list: %d %+v", c, l)
	}
	for _, bad := range []string{`{"entry":"*.evil.test"}`, `{"entry":"a b@c.test"}`, `{"entry":"localhost"}`, `{"entry":""}`, `{"entry":"@x.test"}`} {
		if c := e.do(e.key, "POST", "/v0/lists/receive/block", bad, &le); c != 400 || le.Name != "ValidationError" {
			t.Errorf("entry %s: %d %+v", bad, c, le)
		}
	}
	if c := e.do(e.key, "POST", "/v0/lists/sideways/block", `{"entry":"a.test"}`, &le); c != 400 {
		t.Errorf("bad direction: %d", c)
	}
	if c := e.do(e.key, "GET", "/v0/lists/receive/block", nil, &l); c != 200 || l.Count != 0 {
		t.Errorf("bad entries were written: %+v", l)
	}
	// Sends: the inbox's send list decides (allow ok@buyer.test only).
	var er listEntryObj
	if c := e.do(e.key, "POST", "/v0/inboxes/shop@shop.test/messages/send", map[string]any{"to": "other@buyer.test", "subject": "x", "text": "x"}, &er); c != 403 || er.Name != "MessageRejectedError" {
		t.Errorf("send to a recipient off the allow list: %d %+v", c, er)
	}
	if c := e.do(e.key, "POST", "/v0/inboxes/shop@shop.test/messages/send", map[string]any{"to": "OK@buyer.test", "subject": "x", "text": "x"}, nil); c != 200 {
		t.Errorf("send to an allowed recipient: %d", c)
	}
	if c := e.do(e.key, "DELETE", "/v0/inboxes/shop@shop.test/lists/send/allow/ok@buyer.test", nil, nil); c != 204 {
		t.Errorf("delete: %d", c)
	}
	// Now the organisation's block list decides.
	if c := e.do(e.key, "POST", "/v0/inboxes/shop@shop.test/messages/send", map[string]any{"to": "x@evil.test", "cc": "y@buyer.test", "subject": "x", "text": "x"}, &er); c != 403 || er.Name != "MessageRejectedError" {
		t.Errorf("send to a blocked domain: %d %+v", c, er)
	}
	if q, _ := e.st.Queue(t.Context(), ""); len(q) != 1 {
		t.Errorf("queue: %d entries, want the one allowed send", len(q))
	}
	// A scoped key manages its inboxes' lists, not the organisation's.
	scoped := e.newKey([]string{"shop@shop.test"})
	if c := e.do(scoped, "POST", "/v0/lists/send/block", `{"entry":"a.test"}`, nil); c != 403 {
		t.Errorf("scoped organisation list: %d", c)
	}
	if c := e.do(scoped, "GET", "/v0/inboxes/shop@shop.test/lists/send/block", nil, nil); c != 200 {
		t.Errorf("scoped inbox list: %d", c)
	}
}

// TestListsInbound: mail the receive lists refuse is stored and listed
// with the envelopd label blocked (AgentMail marks it so); in a thread
// the inbox has written in, the reply lists decide instead.
func TestListsInbound(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.createInbox("shop", "shop.test")
	if c := e.do(e.key, "POST", "/v0/lists/receive/block", `{"entry":"evil.test"}`, nil); c != 200 {
		t.Fatal(c)
	}
	if c := e.do(e.key, "POST", "/v0/inboxes/shop@shop.test/lists/reply/allow", `{"entry":"friend@evil.test"}`, nil); c != 200 {
		t.Fatal(c)
	}
	put := func(n int, from, inReplyTo string) {
		t.Helper()
		mid := fmt.Sprintf("in%d@x.test", n)
		hdr := ""
		if inReplyTo != "" {
			hdr = "In-Reply-To: <" + inReplyTo + ">\r\n"
		}
		raw := fmt.Sprintf("From: %s\r\nTo: shop@shop.test\r\nSubject: hello %d\r\nMessage-ID: <%s>\r\n%s\r\nx\r\n", from, n, mid, hdr)
		in := &store.Incoming{Direction: store.DirIn, Raw: []byte(raw), MessageID: mid, Sender: from,
			Recipients: []string{"shop@shop.test"}, Subject: fmt.Sprintf("hello %d", n), ReceivedAt: time.Now()}
		if inReplyTo != "" {
			in.InReplyTo = []string{inReplyTo}
		}
		if _, err := e.st.Ingest(context.Background(), in); err != nil {
			t.Fatal(err)
		}
	}
	put(1, "spam@Evil.test", "")
	put(2, "ok@good.test", "")
	// The shop writes to friend@evil.test; friend's answer is a reply: the
	// inbox's reply allow list lets it through although evil.test is
	// blocked for new mail.
	var sent struct {
		MessageID string `json:"message_id"`
	}
	if c := e.do(e.key, "POST", "/v0/inboxes/shop@shop.test/messages/send", map[string]any{"to": "friend@evil.test", "subject": "hi", "text": "x"}, &sent); c != 200 {
		t.Fatal(c)
	}
	put(3, "friend@evil.test", strings.Trim(sent.MessageID, "<>"))
	put(4, "other@evil.test", strings.Trim(sent.MessageID, "<>")) // a reply, not on the allow list
	var l struct {
		Messages []struct {
			Subject string   `json:"subject"`
			Labels  []string `json:"labels"`
		} `json:"messages"`
	}
	if c := e.do(e.key, "GET", "/v0/inboxes/shop@shop.test/messages?labels=received&ascending=true", nil, &l); c != 200 || len(l.Messages) != 4 {
		t.Fatalf("list: %d %+v", c, l)
	}
	want := map[string]bool{"hello 1": true, "hello 2": false, "hello 3": false, "hello 4": true}
	for _, m := range l.Messages {
		if slices.Contains(m.Labels, "blocked") != want[m.Subject] {
			t.Errorf("%s: labels %v, blocked want %v", m.Subject, m.Labels, want[m.Subject])
		}
	}
	if c := e.do(e.key, "GET", "/v0/inboxes/shop@shop.test/messages?labels=blocked", nil, &l); c != 200 || len(l.Messages) != 2 {
		t.Errorf("labels=blocked: %d %+v", c, l)
	}
	if c := e.do(e.key, "PATCH", "/v0/inboxes/shop@shop.test/messages/in1@x.test", `{"remove_labels":["blocked"]}`, nil); c != 400 {
		t.Errorf("removing blocked: %d", c)
	}
}
