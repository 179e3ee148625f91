package api_test

import (
	"testing"
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
