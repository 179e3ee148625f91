package api_test

import (
	"fmt"
	"strings"
	"testing"
)

// TestBatchMessages: batch-get and batch-update take messages of one
// inbox by id, answer in the order asked, leave out the ids the inbox
// does not hold (count < limit), and refuse bad input with a 400 that
// changes nothing.
func TestBatchMessages(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.createInbox("shop", "shop.test")
	e.createInbox("other", "shop.test")
	e.ingest(3, "shop@shop.test")
	ids := []string{"<m00002@buyer.test>", "<nope@buyer.test>", "<m00000@buyer.test>"}
	var got struct {
		Limit    int `json:"limit"`
		Count    int `json:"count"`
		Messages []struct {
			MessageID string  `json:"message_id"`
			Subject   string  `json:"subject"`
			Text      *string `json:"text"`
		} `json:"messages"`
	}
	if c := e.do(e.key, "POST", "/v0/inboxes/shop@shop.test/messages/batch-get", map[string]any{"message_ids": ids}, &got); c != 200 ||
		got.Limit != 3 || got.Count != 2 || len(got.Messages) != 2 || got.Messages[0].MessageID != ids[0] || got.Messages[1].MessageID != ids[2] ||
		got.Messages[0].Subject != "hello 2" || got.Messages[0].Text != nil {
		t.Errorf("batch-get: %d %+v", c, got)
	}
	// Another inbox's messages are missing, not an error.
	if e.do(e.key, "POST", "/v0/inboxes/other@shop.test/messages/batch-get", map[string]any{"message_ids": ids}, &got); got.Count != 0 || got.Limit != 3 {
		t.Errorf("batch-get in another inbox: %+v", got)
	}
	type update struct {
		MessageID string   `json:"message_id"`
		Labels    []string `json:"labels"`
	}
	var upd struct {
		Limit   int      `json:"limit"`
		Count   int      `json:"count"`
		Updates []update `json:"updates"`
	}
	if c := e.do(e.key, "POST", "/v0/inboxes/shop@shop.test/messages/batch-update",
		map[string]any{"message_ids": ids, "add_labels": []string{"vip", "paid"}}, &upd); c != 200 ||
		upd.Limit != 3 || upd.Count != 2 || fmt.Sprint(upd.Updates) != "[{<m00002@buyer.test> [received accepted paid vip]} {<m00000@buyer.test> [received accepted paid vip]}]" {
		t.Errorf("batch-update: %d %+v", c, upd)
	}
	if c := e.do(e.key, "POST", "/v0/inboxes/shop@shop.test/messages/batch-update",
		map[string]any{"message_ids": ids[:1], "remove_labels": "paid"}, &upd); c != 200 || fmt.Sprint(upd.Updates) != "[{<m00002@buyer.test> [received accepted vip]}]" {
		t.Errorf("batch-update remove: %d %+v", c, upd)
	}
	many := make([]string, 51)
	for i := range many {
		many[i] = fmt.Sprintf("<x%d@buyer.test>", i)
	}
	for _, tc := range []struct {
		name, path string
		body       any
	}{
		{"get, no ids", "batch-get", map[string]any{"message_ids": []string{}}},
		{"get, a repeated id", "batch-get", map[string]any{"message_ids": []string{ids[0], ids[0]}}},
		{"get, over 500", "batch-get", map[string]any{"message_ids": strings.Split(strings.Repeat("<a@b.test>,", 501), ",")[:501]}},
		{"update, over 50", "batch-update", map[string]any{"message_ids": many, "add_labels": "x"}},
		{"update, no labels", "batch-update", map[string]any{"message_ids": ids}},
		{"update, a reserved label", "batch-update", map[string]any{"message_ids": ids, "add_labels": "sent"}},
		{"update, a repeated id", "batch-update", map[string]any{"message_ids": []string{ids[2], ids[2]}, "add_labels": "x"}},
		{"update, ids not a list", "batch-update", `{"message_ids":"<m00000@buyer.test>","add_labels":"x"}`},
	} {
		var er struct{ Name, Message string }
		if c := e.do(e.key, "POST", "/v0/inboxes/shop@shop.test/messages/"+tc.path, tc.body, &er); c != 400 || er.Name != "ValidationError" {
			t.Errorf("%s: %d %+v", tc.name, c, er)
		}
	}
	var m struct {
		Labels []string `json:"labels"`
	}
	if e.do(e.key, "GET", "/v0/inboxes/shop@shop.test/messages/<m00000@buyer.test>", nil, &m); strings.Join(m.Labels, " ") != "received accepted paid vip" {
		t.Errorf("a refused update changed labels: %q", m.Labels)
	}
	// A scoped key sees only its inboxes.
	scoped := e.newKey([]string{"other@shop.test"})
	if c := e.do(scoped, "POST", "/v0/inboxes/shop@shop.test/messages/batch-get", map[string]any{"message_ids": ids}, nil); c != 404 {
		t.Errorf("batch-get with another inbox's key: %d", c)
	}
}
