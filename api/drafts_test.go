package api_test

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/envelopd/envelopd/store"
)

type draftObj struct {
	InboxID    string   `json:"inbox_id"`
	DraftID    string   `json:"draft_id"`
	ClientID   string   `json:"client_id"`
	Labels     []string `json:"labels"`
	To         []string `json:"to"`
	Subject    *string  `json:"subject"`
	Text       string   `json:"text"`
	SendStatus string   `json:"send_status"`
	SendAt     string   `json:"send_at"`
	Error      string   `json:"error"`
	Name       string   `json:"name"`
	Message    string   `json:"message"`
}

// TestDrafts: create, get, list, update, send now (a send repeated after
// a crash queues nothing twice), delete; bad input is a 4xx that writes
// nothing.
func TestDrafts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, false)
	e.createInbox("shop", "shop.test")
	var d draftObj
	if c := e.do(e.key, "POST", "/v0/inboxes/shop@shop.test/drafts", `{"to":"buyer@buyer.test","subject":"hello","text":"first","labels":["x"],"client_id":"c1"}`, &d); c != 200 ||
		!strings.HasPrefix(d.DraftID, "drf_") || d.InboxID != "shop@shop.test" || strings.Join(d.To, ",") != "buyer@buyer.test" || d.SendStatus != "" {
		t.Fatalf("create: %d %+v", c, d)
	}
	var again draftObj
	if e.do(e.key, "POST", "/v0/inboxes/shop@shop.test/drafts", `{"to":"other@buyer.test","client_id":"c1"}`, &again); again.DraftID != d.DraftID {
		t.Errorf("client_id repeat: %+v", again)
	}
	var up draftObj
	if c := e.do(e.key, "PATCH", "/v0/inboxes/shop@shop.test/drafts/"+d.DraftID, `{"text":"second"}`, &up); c != 200 || up.Text != "second" || *up.Subject != "hello" {
		t.Errorf("update: %d %+v", c, up)
	}
	var list struct {
		Count  int        `json:"count"`
		Drafts []draftObj `json:"drafts"`
	}
	if c := e.do(e.key, "GET", "/v0/drafts", nil, &list); c != 200 || list.Count != 1 || list.Drafts[0].DraftID != d.DraftID {
		t.Errorf("list: %d %+v", c, list)
	}
	// Bad input: 4xx, nothing written.
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	for _, tc := range []struct {
		name, method, path, body string
		code                     int
	}{
		{"send_at in the past", "POST", "/v0/inboxes/shop@shop.test/drafts", `{"to":"a@b.test","send_at":"` + past + `"}`, 400},
		{"send_at unparsable", "POST", "/v0/inboxes/shop@shop.test/drafts", `{"to":"a@b.test","send_at":"tomorrow"}`, 400},
		{"bad address", "POST", "/v0/inboxes/shop@shop.test/drafts", `{"to":"not an address"}`, 400},
		{"update send_at in the past", "PATCH", "/v0/inboxes/shop@shop.test/drafts/" + d.DraftID, `{"text":"third","send_at":"` + past + `"}`, 400},
		{"too large", "POST", "/v0/inboxes/shop@shop.test/drafts", `{"to":"a@b.test","text":"` + strings.Repeat("x", 2<<20) + `"}`, 413},
		{"other inbox", "GET", "/v0/inboxes/nope@shop.test/drafts/" + d.DraftID, ``, 404},
	} {
		var er draftObj
		if c := e.do(e.key, tc.method, tc.path, tc.body, &er); c != tc.code || er.Name == "" {
			t.Errorf("%s: %d %+v, want %d", tc.name, c, er, tc.code)
		}
	}
	if e.do(e.key, "GET", "/v0/drafts", nil, &list); list.Count != 1 {
		t.Errorf("bad input wrote a draft: %+v", list)
	}
	var got draftObj
	if e.do(e.key, "GET", "/v0/inboxes/shop@shop.test/drafts/"+d.DraftID, nil, &got); got.Text != "second" {
		t.Errorf("a refused update changed the draft: %+v", got)
	}
	// Send now; the draft is gone and its copy is queued once.
	var sent struct {
		MessageID string `json:"message_id"`
		QueueID   int64  `json:"queue_id"`
	}
	if c := e.do(e.key, "POST", "/v0/inboxes/shop@shop.test/drafts/"+d.DraftID+"/send", `{"add_labels":["y"]}`, &sent); c != 200 ||
		sent.MessageID != "<draft."+strings.TrimPrefix(d.DraftID, "drf_")+"@shop.test>" {
		t.Fatalf("send: %d %+v", c, sent)
	}
	if c := e.do(e.key, "GET", "/v0/inboxes/shop@shop.test/drafts/"+d.DraftID, nil, nil); c != 404 {
		t.Errorf("a sent draft is still there: %d", c)
	}
	// A crash after the queue took it and before the draft was deleted:
	// the draft is back; sending it again queues nothing new.
	ds := e.st.(store.DraftStore)
	raw := `{"to":["buyer@buyer.test"],"subject":"hello","text":"second","labels":["x"]}`
	now := time.Now().UTC()
	if _, _, err := ds.CreateDraft(ctx, store.Draft{ID: d.DraftID, Inbox: "shop@shop.test", Request: []byte(raw), CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	var resent struct {
		MessageID string `json:"message_id"`
		QueueID   int64  `json:"queue_id"`
	}
	if c := e.do(e.key, "POST", "/v0/inboxes/shop@shop.test/drafts/"+d.DraftID+"/send", nil, &resent); c != 200 || resent.QueueID != sent.QueueID {
		t.Errorf("resend: %d %+v, want queue entry %d", c, resent, sent.QueueID)
	}
	if q, err := e.st.Queue(ctx, ""); err != nil || len(q) != 1 {
		t.Errorf("queue: %d entries %v", len(q), err)
	}
	// Delete.
	var d2 draftObj
	e.do(e.key, "POST", "/v0/inboxes/shop@shop.test/drafts", `{"to":"buyer@buyer.test"}`, &d2)
	if c := e.do(e.key, "DELETE", "/v0/inboxes/shop@shop.test/drafts/"+d2.DraftID, nil, nil); c != 204 {
		t.Errorf("delete: %d", c)
	}
	if c := e.do(e.key, "DELETE", "/v0/inboxes/shop@shop.test/drafts/"+d2.DraftID, nil, nil); c != 404 {
		t.Errorf("second delete: %d", c)
	}
	// A scoped key sees its inboxes' drafts only.
	e.createInbox("b", "shop.test")
	scoped := e.newKey([]string{"b@shop.test"})
	var d3 draftObj
	e.do(e.key, "POST", "/v0/inboxes/shop@shop.test/drafts", `{"to":"buyer@buyer.test"}`, &d3)
	if c := e.do(scoped, "GET", "/v0/drafts/"+d3.DraftID, nil, nil); c != 404 {
		t.Errorf("scoped get of another inbox's draft: %d", c)
	}
	if e.do(scoped, "GET", "/v0/drafts", nil, &list); list.Count != 0 {
		t.Errorf("scoped list: %+v", list)
	}
}

// TestScheduledDrafts: a scheduled draft is sent by SendDueDrafts once
// due, exactly once; one the Envelopay rules refuse is marked failed
// (unless it was made with force).
func TestScheduledDrafts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, false)
	e.createInbox("shop", "shop.test")
	at := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	var d, bad draftObj
	if c := e.do(e.key, "POST", "/v0/inboxes/shop@shop.test/drafts", `{"to":"buyer@buyer.test","subject":"later","text":"hi","send_at":"`+at+`"}`, &d); c != 200 || d.SendStatus != "scheduled" || d.SendAt == "" {
		t.Fatalf("create: %d %+v", c, d)
	}
	// ACCEPT of an offer that does not exist: unknown_ref at send time.
	accept := `{\"v\":\"0.2.0\",\"type\":\"accept\",\"id\":\"acc_1\",\"offer_ref\":\"ofr_nope\",\"amount\":\"1\",\"token\":\"SOL\",\"chain\":\"solana\",\"proof\":{\"tx\":\"5x\"}}`
	if c := e.do(e.key, "POST", "/v0/inboxes/shop@shop.test/drafts", `{"to":"buyer@buyer.test","text":"`+accept+`","send_at":"`+at+`"}`, &bad); c != 200 {
		t.Fatalf("create: %d %+v", c, bad)
	}
	if n, err := e.svc.SendDueDrafts(ctx); err != nil || n != 0 {
		t.Errorf("sent before due: %d %v", n, err)
	}
	// Make both due (the store takes any time; the API only future ones).
	ds := e.st.(store.DraftStore)
	for _, id := range []string{d.DraftID, bad.DraftID} {
		sd, err := ds.DraftByID(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		sd.SendAt = time.Now().Add(-time.Second)
		if err := ds.UpdateDraft(ctx, sd); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := e.svc.SendDueDrafts(ctx); err != nil || n != 1 {
		t.Errorf("due: sent %d %v, want 1", n, err)
	}
	if n, _ := e.svc.SendDueDrafts(ctx); n != 0 {
		t.Errorf("sent again: %d", n)
	}
	if q, _ := e.st.Queue(ctx, ""); len(q) != 1 || q[0].MessageID != "draft."+strings.TrimPrefix(d.DraftID, "drf_")+"@shop.test" {
		t.Errorf("queue: %+v", q)
	}
	var f draftObj
	if e.do(e.key, "GET", "/v0/drafts/"+bad.DraftID, nil, &f); f.SendStatus != "failed" || !strings.Contains(f.Error, "unknown_ref") || f.SendAt != "" {
		t.Errorf("refused draft: %+v", f)
	}
	// Sent by hand with force it goes.
	if c := e.do(e.key, "POST", "/v0/inboxes/shop@shop.test/drafts/"+bad.DraftID+"/send?force=true", nil, nil); c != 200 {
		t.Errorf("forced send: %d", c)
	}
}

// TestDraftAttachments: a draft's attachments are checked when given,
// kept with the draft, served by drafts.get_attachment (inbox,
// organisation and pod routes, with a download URL) and sent with it;
// bad ones are a 400 that writes nothing.
func TestDraftAttachments(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.createInbox("shop", "shop.test")
	e.createInbox("other", "shop.test")
	content := "hello attachment"
	att := `{"filename":"a.txt","content_type":"text/plain","content":"` + base64.StdEncoding.EncodeToString([]byte(content)) + `"}`
	type attObj struct {
		AttachmentID string `json:"attachment_id"`
		Filename     string `json:"filename"`
		Size         int    `json:"size"`
		ContentType  string `json:"content_type"`
		DownloadURL  string `json:"download_url"`
		Name         string `json:"name"`
	}
	var d struct {
		DraftID     string   `json:"draft_id"`
		Attachments []attObj `json:"attachments"`
	}
	if c := e.do(e.key, "POST", "/v0/inboxes/shop@shop.test/drafts", `{"to":"buyer@buyer.test","subject":"with file","text":"see","attachments":[`+att+`]}`, &d); c != 200 ||
		len(d.Attachments) != 1 || d.Attachments[0] != (attObj{AttachmentID: "att_1", Filename: "a.txt", Size: len(content), ContentType: "text/plain"}) {
		t.Fatalf("create: %d %+v", c, d)
	}
	var first attObj
	for _, path := range []string{"/v0/inboxes/shop@shop.test/drafts/", "/v0/drafts/", "/v0/pods/envelopd/drafts/"} {
		var a attObj
		if c := e.do(e.key, "GET", path+d.DraftID+"/attachments/att_1", nil, &a); c != 200 || a.AttachmentID != "att_1" ||
			a.Size != len(content) || a.Filename != "a.txt" || !strings.HasPrefix(a.DownloadURL, e.srv.URL+"/v0/download/") {
			t.Errorf("get attachment %s: %d %+v", path, c, a)
		}
		first = a
	}
	resp, err := http.Get(first.DownloadURL)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(got) != content || resp.Header.Get("Content-Type") != "text/plain" {
		t.Errorf("download: %d %q %q", resp.StatusCode, got, resp.Header.Get("Content-Type"))
	}
	scoped := e.newKey([]string{"other@shop.test"})
	for _, tc := range []struct {
		name, key, path string
	}{
		{"no such attachment", e.key, "/v0/drafts/" + d.DraftID + "/attachments/att_2"},
		{"no such draft", e.key, "/v0/drafts/drf_0000000000000000/attachments/att_1"},
		{"another inbox's route", e.key, "/v0/inboxes/other@shop.test/drafts/" + d.DraftID + "/attachments/att_1"},
		{"a key of another inbox", scoped, "/v0/drafts/" + d.DraftID + "/attachments/att_1"},
	} {
		var er attObj
		if c := e.do(tc.key, "GET", tc.path, nil, &er); c != 404 || er.Name != "NotFoundError" {
			t.Errorf("%s: %d %+v", tc.name, c, er)
		}
	}
	// Bad attachments: 400, nothing written or changed.
	for _, tc := range []struct{ name, method, path, a string }{
		{"not base64", "POST", "/v0/inboxes/shop@shop.test/drafts", `{"filename":"x","content":"!!!"}`},
		{"by URL", "POST", "/v0/inboxes/shop@shop.test/drafts", `{"filename":"x","url":"https://example.com/x"}`},
		{"CR LF in a filename", "POST", "/v0/inboxes/shop@shop.test/drafts", `{"filename":"x\r\nBcc: a@b.test","content":""}`},
		{"update, not base64", "PATCH", "/v0/inboxes/shop@shop.test/drafts/" + d.DraftID, `{"filename":"x","content":"%%"}`},
	} {
		var er attObj
		if c := e.do(e.key, tc.method, tc.path, `{"to":"buyer@buyer.test","text":"changed","attachments":[`+tc.a+`]}`, &er); c != 400 || er.Name != "ValidationError" {
			t.Errorf("%s: %d %+v", tc.name, c, er)
		}
	}
	var list struct {
		Count int `json:"count"`
	}
	if e.do(e.key, "GET", "/v0/drafts", nil, &list); list.Count != 1 {
		t.Errorf("bad attachments wrote a draft: %+v", list)
	}
	var again struct {
		Text        string   `json:"text"`
		Attachments []attObj `json:"attachments"`
	}
	if e.do(e.key, "GET", "/v0/drafts/"+d.DraftID, nil, &again); again.Text != "see" || len(again.Attachments) != 1 {
		t.Errorf("a refused update changed the draft: %+v", again)
	}
	// Sent with the draft; the draft's download URL then ends.
	var sent struct {
		MessageID string `json:"message_id"`
	}
	if c := e.do(e.key, "POST", "/v0/inboxes/shop@shop.test/drafts/"+d.DraftID+"/send", nil, &sent); c != 200 {
		t.Fatalf("send: %d", c)
	}
	var m struct {
		Attachments []attObj `json:"attachments"`
	}
	if c := e.do(e.key, "GET", "/v0/inboxes/shop@shop.test/messages/"+url.PathEscape(sent.MessageID), nil, &m); c != 200 ||
		len(m.Attachments) != 1 || m.Attachments[0].Filename != "a.txt" || m.Attachments[0].Size != len(content) {
		t.Errorf("sent copy: %d %+v", c, m)
	}
	if resp, err := http.Get(first.DownloadURL); err != nil || resp.StatusCode != 404 {
		t.Errorf("download after send: %v %v", resp.StatusCode, err)
	} else {
		resp.Body.Close()
	}
}
