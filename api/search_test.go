package api_test

import (
	"net/url"
	"strings"
	"testing"
)

// TestSearch: messages, threads and inboxes search over the full-text
// index; hostile or oversized queries are 400, never an index error.
func TestSearch(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.createInbox("shop", "shop.test")
	e.createInbox("bob", "buyer.test")
	for _, subj := range []string{"Invoice for March", "Lunch on Friday", "invoices overdue"} {
		if c := e.do(e.key, "POST", "/v0/inboxes/shop@shop.test/messages/send", map[string]any{"to": "x@elsewhere.test", "subject": subj, "text": "t"}, nil); c != 200 {
			t.Fatalf("send: %d", c)
		}
	}
	var ms struct {
		Count         int    `json:"count"`
		NextPageToken string `json:"next_page_token"`
		Messages      []struct {
			Subject string `json:"subject"`
		} `json:"messages"`
	}
	if c := e.do(e.key, "GET", "/v0/inboxes/shop@shop.test/messages/search?q=invoice", nil, &ms); c != 200 || ms.Count != 2 {
		t.Errorf("messages: %d %+v", c, ms)
	}
	if c := e.do(e.key, "GET", "/v0/inboxes/shop@shop.test/messages/search?q=invoice&limit=1", nil, &ms); c != 200 || ms.Count != 1 || ms.NextPageToken == "" {
		t.Errorf("page 1: %d %+v", c, ms)
	}
	if c := e.do(e.key, "GET", "/v0/inboxes/shop@shop.test/messages/search?q=invoice&limit=1&page_token="+url.QueryEscape(ms.NextPageToken), nil, &ms); c != 200 || ms.Count != 1 || ms.Messages[0].Subject != "Invoice for March" {
		t.Errorf("page 2: %d %+v", c, ms)
	}
	var ts struct {
		Count int `json:"count"`
	}
	if c := e.do(e.key, "GET", "/v0/threads/search?q=lunch+friday", nil, &ts); c != 200 || ts.Count != 1 {
		t.Errorf("threads: %d %+v", c, ts)
	}
	if c := e.do(e.key, "GET", "/v0/inboxes/shop@shop.test/threads/search?q=nothing", nil, &ts); c != 200 || ts.Count != 0 {
		t.Errorf("threads, no match: %d %+v", c, ts)
	}
	var is struct {
		Count   int `json:"count"`
		Inboxes []struct {
			InboxID string `json:"inbox_id"`
		} `json:"inboxes"`
	}
	if c := e.do(e.key, "GET", "/v0/inboxes/search?q=bu", nil, &is); c != 200 || is.Count != 1 || is.Inboxes[0].InboxID != "bob@buyer.test" {
		t.Errorf("inboxes: %d %+v", c, is)
	}
	for _, q := range []string{"", `"*`, `"*" : ^`, "***", strings.Repeat("a", 257), "a&limit=101"} {
		var er struct{ Name string }
		if c := e.do(e.key, "GET", "/v0/inboxes/shop@shop.test/messages/search?q="+strings.ReplaceAll(url.QueryEscape(q), "%26limit%3D101", "&limit=101"), nil, &er); c != 400 || er.Name != "ValidationError" {
			t.Errorf("q %q: %d %+v", q, c, er)
		}
	}
	if c := e.do(e.key, "GET", "/v0/inboxes/shop@shop.test/messages/search?q="+url.QueryEscape(`"invoice"* ^ (`), nil, &ms); c != 200 || ms.Count != 2 {
		t.Errorf("FTS syntax is taken as words (invoice): %d %+v", c, ms)
	}
}
