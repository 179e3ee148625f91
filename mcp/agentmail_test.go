package mcp_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/envelopd/envelopd/api"
)

// toolErrName calls a tool that must fail and returns the error's name.
func toolErrName(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) string {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return "protocol: " + err.Error()
	}
	if !res.IsError {
		t.Fatalf("%s: no error: %s", name, text(res))
	}
	var e api.Error
	json.Unmarshal([]byte(text(res)), &e)
	return e.Name
}

// TestAgentMailTools: AgentMail's MCP tools, with its names and
// camelCase arguments, over a relay: inboxes, messages (send, reply,
// forward, search, labels), threads (search, labels, attachments,
// delete), drafts (create … send, scheduled) and lists.
func TestAgentMailTools(t *testing.T) {
	f := newFixture(t)
	cs := connect(t, f.cfg)
	call[json.RawMessage](t, cs, "create_inbox", map[string]any{"username": "shop", "domain": "shop.test", "displayName": "Shop", "clientId": "s"})
	call[json.RawMessage](t, cs, "create_inbox", map[string]any{"username": "bob", "domain": "buyer.test"})
	if b := call[api.Inbox](t, cs, "get_inbox", map[string]any{"inboxId": shop}); b.DisplayName != "Shop" {
		t.Errorf("get_inbox: %+v", b)
	}
	if b := call[api.Inbox](t, cs, "update_inbox", map[string]any{"inboxId": shop, "displayName": "The Shop"}); b.DisplayName != "The Shop" {
		t.Errorf("update_inbox: %+v", b)
	}
	if l := call[api.ListInboxes](t, cs, "search_inboxes", map[string]any{"q": "the sh"}); l.Count != 1 || l.Inboxes[0].InboxID != shop {
		t.Errorf("search_inboxes: %+v", l)
	}
	sent := call[api.SendResult](t, cs, "send_message", map[string]any{"inboxId": bob, "to": []string{shop}, "subject": "Quarterly invoice",
		"text": "see attached", "attachments": []map[string]any{{"filename": "a.txt", "contentType": "text/plain", "content": base64.StdEncoding.EncodeToString([]byte("hello"))}}})
	// The Envelopay reference's way: TYPE | note, then the JSON.
	call[api.SendResult](t, cs, "send_message", map[string]any{"inboxId": bob, "to": []string{shop},
		"text": "WHICH | what do you take?\n{\"v\":\"0.2.0\",\"type\":\"which\",\"id\":\"wh_1\"}"})
	var got api.ListMessages
	deadline := time.Now().Add(10 * time.Second)
	for got.Count < 2 && time.Now().Before(deadline) {
		got = call[api.ListMessages](t, cs, "list_messages", map[string]any{"inboxId": shop, "labels": []string{"received"}})
		time.Sleep(20 * time.Millisecond)
	}
	if got.Count != 2 {
		t.Fatalf("received: %+v", got)
	}
	var inv, which api.Message
	for _, m := range got.Messages {
		if m.Subject == "Quarterly invoice" {
			inv = m
		} else {
			which = m
		}
	}
	if which.Subject != "WHICH | what do you take?" {
		t.Errorf("the first line is the subject: %q", which.Subject)
	}
	if s := call[api.ListMessages](t, cs, "search_messages", map[string]any{"inboxId": shop, "q": "quarter"}); s.Count != 1 || s.Messages[0].Subject != "Quarterly invoice" {
		t.Errorf("search_messages: %+v", s)
	}
	if s := call[api.ListThreads](t, cs, "search_threads", map[string]any{"inboxId": shop, "q": "invoice"}); s.Count != 1 {
		t.Errorf("search_threads: %+v", s)
	}
	m := call[api.Message](t, cs, "get_message", map[string]any{"inboxId": shop, "messageId": inv.MessageID})
	if len(m.Attachments) != 1 {
		t.Fatalf("attachments: %+v", m.Attachments)
	}
	if a := call[api.Attachment](t, cs, "get_attachment", map[string]any{"inboxId": shop, "threadId": inv.ThreadID, "attachmentId": m.Attachments[0].AttachmentID}); a.Size != 5 || a.DownloadURL == "" {
		t.Errorf("get_attachment: %+v", a)
	}
	if u := call[api.UpdateMessageResult](t, cs, "update_message", map[string]any{"inboxId": shop, "messageId": inv.MessageID, "addLabels": []string{"billing"}}); !strings.Contains(strings.Join(u.Labels, ","), "billing") {
		t.Errorf("update_message: %+v", u)
	}
	call[json.RawMessage](t, cs, "update_thread", map[string]any{"inboxId": shop, "threadId": inv.ThreadID, "addLabels": []string{"t1"}})
	call[api.SendResult](t, cs, "reply_to_message", map[string]any{"inboxId": shop, "messageId": inv.MessageID, "text": "thanks"})
	call[api.SendResult](t, cs, "forward_message", map[string]any{"inboxId": shop, "messageId": inv.MessageID, "to": []string{bob}})
	if n := toolErrName(t, cs, "reply_to_message", map[string]any{"inboxId": shop, "messageId": inv.MessageID, "replyAll": true, "to": []string{bob}}); n != "ValidationError" {
		t.Errorf("replyAll with to: %s", n)
	}
	// Drafts.
	d := call[api.DraftObject](t, cs, "create_draft", map[string]any{"inboxId": shop, "to": []string{bob}, "subject": "later", "text": "one"})
	if d = call[api.DraftObject](t, cs, "update_draft", map[string]any{"inboxId": shop, "draftId": d.DraftID, "text": "two"}); d.Text != "two" {
		t.Errorf("update_draft: %+v", d)
	}
	if l := call[api.ListDrafts](t, cs, "list_drafts", map[string]any{"inboxId": shop}); l.Count != 1 {
		t.Errorf("list_drafts: %+v", l)
	}
	if g := call[api.DraftObject](t, cs, "get_draft", map[string]any{"inboxId": shop, "draftId": d.DraftID}); *g.Subject != "later" {
		t.Errorf("get_draft: %+v", g)
	}
	if u := call[api.DraftObject](t, cs, "update_draft", map[string]any{"inboxId": shop, "draftId": d.DraftID,
		"attachments": []map[string]any{{"filename": "a.txt", "contentType": "text/plain", "content": "aGVsbG8="}}}); len(u.Attachments) != 1 || u.Attachments[0].Size != 5 {
		t.Errorf("update_draft with an attachment: %+v", u)
	}
	if a := call[api.Attachment](t, cs, "get_draft_attachment", map[string]any{"inboxId": shop, "draftId": d.DraftID, "attachmentId": "att_1"}); a.Filename != "a.txt" || a.Size != 5 || !strings.HasPrefix(a.DownloadURL, "/v0/download/") {
		t.Errorf("get_draft_attachment: %+v", a)
	}
	if n := toolErrName(t, cs, "get_draft_attachment", map[string]any{"inboxId": shop, "draftId": d.DraftID, "attachmentId": "att_2"}); n != "NotFoundError" {
		t.Errorf("get_draft_attachment of a missing one: %s", n)
	}
	if r := call[api.SendResult](t, cs, "send_draft", map[string]any{"inboxId": shop, "draftId": d.DraftID}); !strings.HasPrefix(r.MessageID, "<draft.") {
		t.Errorf("send_draft: %+v", r)
	}
	d2 := call[api.DraftObject](t, cs, "create_draft", map[string]any{"inboxId": shop, "to": []string{bob}, "sendAt": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
	if d2.SendStatus != "scheduled" {
		t.Errorf("scheduled draft: %+v", d2)
	}
	call[json.RawMessage](t, cs, "delete_draft", map[string]any{"inboxId": shop, "draftId": d2.DraftID})
	if n := toolErrName(t, cs, "create_draft", map[string]any{"inboxId": shop, "sendAt": "soon"}); n != "ValidationError" {
		t.Errorf("bad sendAt: %s", n)
	}
	// Lists.
	call[api.ListEntryObject](t, cs, "create_list_entry", map[string]any{"inboxId": shop, "direction": "send", "listType": "block", "entry": "buyer.test"})
	if e := call[api.ListEntryObject](t, cs, "get_list_entry", map[string]any{"inboxId": shop, "direction": "send", "listType": "block", "entry": "buyer.test"}); e.EntryType != "domain" {
		t.Errorf("get_list_entry: %+v", e)
	}
	if l := call[api.ListEntriesObject](t, cs, "list_list_entries", map[string]any{"inboxId": shop, "direction": "send", "listType": "block"}); l.Count != 1 {
		t.Errorf("list_list_entries: %+v", l)
	}
	if n := toolErrName(t, cs, "send_message", map[string]any{"inboxId": shop, "to": []string{bob}, "text": "x"}); n != "MessageRejectedError" {
		t.Errorf("send to a blocked domain: %s", n)
	}
	call[json.RawMessage](t, cs, "delete_list_entry", map[string]any{"inboxId": shop, "direction": "send", "listType": "block", "entry": "buyer.test"})
	call[json.RawMessage](t, cs, "delete_thread", map[string]any{"inboxId": shop, "threadId": inv.ThreadID})
	if n := toolErrName(t, cs, "get_thread", map[string]any{"inboxId": shop, "threadId": inv.ThreadID}); n != "NotFoundError" {
		t.Errorf("deleted thread: %s", n)
	}
	_ = sent
	tmp := call[struct{ Inbox api.Inbox }](t, cs, "create_inbox", map[string]any{"username": "tmp", "domain": "shop.test"})
	call[json.RawMessage](t, cs, "delete_inbox", map[string]any{"inboxId": tmp.Inbox.InboxID})
	if n := toolErrName(t, cs, "get_inbox", map[string]any{"inboxId": tmp.Inbox.InboxID}); n != "NotFoundError" {
		t.Errorf("deleted inbox: %s", n)
	}
}
