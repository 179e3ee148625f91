package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// webZone is the browser's time zone in the web tests: not UTC (and not
// a whole hour off it), so a send_at typed in local time that reached
// the API unconverted would be seen.
const webZone = "Asia/Kolkata"

// webDraftsAndLists drives the drafts and the allow/block lists of the
// shop's inbox from the page, logged in with a key scoped to that inbox,
// with the reply form of offerStep open: save a reply as a draft, send it
// (refused, force offered, forced), write a new draft and schedule it in
// local time (sent by the server when due), refuse bad input, delete a
// draft; block a sender (its next mail is labelled blocked, shown in
// words), refuse a bad entry, remove the entry.
func webDraftsAndLists(t *testing.T, c webClient, ctx context.Context, run func(string, ...chromedp.Action[chromedp.Void]), shot func(context.Context, string), offerStep string) {
	t.Helper()
	const SHOP, BOB = "shop@shop.test", "bob@buyer.test"
	goTo := func(h string) chromedp.Action[chromedp.Void] {
		return chromedp.Evaluate[chromedp.Void](fmt.Sprintf("location.hash = %q", h))
	}
	poll := func(expr string) chromedp.Action[chromedp.Void] { return chromedp.Poll[chromedp.Void](expr) }
	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }
	has := func(sel, text string) chromedp.Action[chromedp.Void] {
		return poll(fmt.Sprintf(`document.querySelector(%q)?.textContent.includes(%q)`, sel, text))
	}
	value := func(what, expr string) string {
		t.Helper()
		return browserValue(t, ctx, what, chromedp.Steps(), chromedp.Evaluate[string](expr))
	}
	draftID := func() string {
		t.Helper()
		h := value("hash", `location.hash`)
		id := h[strings.LastIndex(h, "/")+1:]
		if !strings.HasPrefix(id, "drf_") {
			t.Fatalf("not at a draft: %s", h)
		}
		return id
	}
	type draft struct {
		DraftID    string     `json:"draft_id"`
		To         []string   `json:"to"`
		Subject    string     `json:"subject"`
		Text       string     `json:"text"`
		InReplyTo  string     `json:"in_reply_to"`
		SendStatus string     `json:"send_status"`
		SendAt     *time.Time `json:"send_at"`
	}
	// getDraft answers the draft and the status (c.do fails on a 404).
	getDraft := func(id string) (draft, int) {
		t.Helper()
		var d draft
		req, _ := http.NewRequest("GET", c.srv.url+"/v0/inboxes/"+SHOP+"/drafts/"+id, nil)
		req.Header.Set("Authorization", "Bearer "+c.srv.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
			t.Fatalf("GET draft %s: %d %v", id, resp.StatusCode, err)
		}
		return d, resp.StatusCode
	}
	// listed waits until the API lists one message at path.
	listed := func(path, failure string) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			var l struct {
				Count int `json:"count"`
			}
			c.do("GET", path, nil, &l)
			if l.Count == 1 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatal(failure)
			}
		}
	}
	zone, err := time.LoadLocation(webZone)
	if err != nil {
		t.Fatal(err)
	}
	// local is t as a datetime-local value in the browser's zone (which
	// drops ":00" seconds: SetValue reads the value back).
	local := func(at time.Time) string {
		if at.Second() == 0 {
			return at.In(zone).Format("2006-01-02T15:04")
		}
		return at.In(zone).Format("2006-01-02T15:04:05")
	}

	// Save the reply being written as a draft: a draft answering the OFFER
	// (once the reply forced before is in the timeline: its arrival
	// redraws the thread).
	run("forced reply shown", poll(`document.querySelector('#timeline .step[data-eid="ful_web"]')`))
	run("save as draft", chromedp.SetValue(css(offerStep+` textarea`), `{"v":"0.2.0","type":"fulfill","id":"ful_draft","order_ref":"ord_nowhere","note":"drafted","result":{"summary":"later"}}`),
		chromedp.Click(css(offerStep+` [data-action="save-draft"]`)), has(offerStep+" .outcome", "Saved as draft drf_"))
	run("open the draft", chromedp.Click(css(offerStep+` .outcome a.draftlink`)), chromedp.WaitVisible(css(`.draft-form textarea`)))
	id := draftID()
	if d, code := getDraft(id); code != 200 || d.InReplyTo == "" || !strings.Contains(d.Text, `"ful_draft"`) || d.SendStatus != "" {
		t.Errorf("draft saved from the reply form: %d %+v", code, d)
	}
	if got := value("reply draft", `document.querySelector(".draft-form").textContent`); !strings.Contains(got, "A reply to ") || !strings.Contains(got, "not scheduled") {
		t.Errorf("reply draft form: %q", got)
	}
	// Send now: the API refuses the invalid FULFILL and names force; forced, sent.
	run("send draft", chromedp.Click(css(`.draft-form [data-action="send-now"]`)), chromedp.WaitVisible(css(`.draft-form [data-action="force"]`)))
	if got := value("refusal", `document.querySelector(".draft-form .outcome").textContent`); !strings.Contains(got, "ValidationError") || !strings.Contains(got, "force: true") {
		t.Errorf("draft send refused: %q", got)
	}
	run("force draft", chromedp.Click(css(`.draft-form [data-action="force"]`)), has(".draft-form .outcome", "Sent FULFILL (forced: invalid, sent anyway)"))
	if _, code := getDraft(id); code != 404 {
		t.Errorf("a sent draft: GET %d, want 404", code)
	}

	// A new draft to Bob; bad input is refused as the API refuses it.
	run("new draft", goTo("#/d/shop%40shop.test"), chromedp.WaitVisible(css(`a.new-draft`)), chromedp.Click(css(`a.new-draft`)),
		chromedp.WaitVisible(css(`.draft-form input[name="to"]`)),
		chromedp.SetValue(css(`.draft-form input[name="to"]`), "not an address"),
		chromedp.SetValue(css(`.draft-form input[name="subject"]`), "scheduled hello"),
		chromedp.SetValue(css(`.draft-form textarea`), "hello from a draft"),
		chromedp.Click(css(`.draft-form [data-action="save"]`)), has(".draft-form .outcome .refused", "ValidationError"))
	if got := value("bad address", `document.querySelector(".draft-form .outcome").textContent`); !strings.Contains(got, "HTTP 400") {
		t.Errorf("bad address: %q", got)
	}
	// Scheduled an hour ahead, typed in the person's local time (the
	// browser's zone): the API gets that instant.
	at := time.Now().Add(time.Hour).Truncate(time.Second)
	run("schedule", chromedp.SetValue(css(`.draft-form input[name="to"]`), BOB),
		chromedp.SetValue(css(`.draft-form input[name="send_at"]`), local(at)),
		chromedp.Click(css(`.draft-form [data-action="save"]`)), poll(`/^#\/d\/shop%40shop\.test\/drf_/.test(location.hash)`),
		has(".draft-form .state", "scheduled for "+at.In(zone).Format("2006-01-02 15:04:05 UTC-07:00")))
	id = draftID()
	if d, code := getDraft(id); code != 200 || d.SendStatus != "scheduled" || d.SendAt == nil || !d.SendAt.Equal(at) || d.Subject != "scheduled hello" || len(d.To) != 1 || d.To[0] != BOB {
		t.Errorf("scheduled draft: %d %+v, want send_at %s", code, d, at.UTC().Format(time.RFC3339))
	}
	shot(ctx, "web-drafts.png")
	// In the past: refused.
	run("past", chromedp.SetValue(css(`.draft-form input[name="send_at"]`), local(time.Now().Add(-time.Hour))),
		chromedp.Click(css(`.draft-form [data-action="save"]`)), has(".draft-form .outcome .refused", "is in the past"))
	// In the list: scheduled, in local time.
	run("drafts list", goTo("#/d/shop%40shop.test"), poll(fmt.Sprintf(`document.querySelector('#drafts li[data-id=%q]')?.textContent.includes("scheduled for %s")`, id, at.In(zone).Format("2006-01-02 15:04:05 UTC-07:00"))))
	// The field emptied: not scheduled any more.
	run("unschedule", goTo("#/d/shop%40shop.test/"+id), chromedp.WaitVisible(css(`.draft-form input[name="send_at"]`)),
		chromedp.SetValue(css(`.draft-form input[name="send_at"]`), ""),
		chromedp.Click(css(`.draft-form [data-action="save"]`)), has(".draft-form .state", "not scheduled"))
	if d, code := getDraft(id); code != 200 || d.SendStatus != "" || d.SendAt != nil {
		t.Errorf("unscheduled draft: %d %+v", code, d)
	}
	// Due in two seconds: the server's worker sends it, the draft goes.
	soon := time.Now().Add(2 * time.Second).Truncate(time.Second).Add(time.Second)
	run("reschedule", goTo("#/d/shop%40shop.test/"+id), chromedp.WaitVisible(css(`.draft-form input[name="send_at"]`)),
		chromedp.SetValue(css(`.draft-form input[name="send_at"]`), local(soon)),
		chromedp.Click(css(`.draft-form [data-action="save"]`)), has(".draft-form .outcome", "Saved: scheduled for"))
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, code := getDraft(id); code == 404 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the scheduled draft was not sent")
		}
	}
	listed("/v0/inboxes/"+BOB+"/messages?q=scheduled", "the scheduled draft never reached Bob")
	// Delete.
	run("draft to delete", goTo("#/d/shop%40shop.test/new"), chromedp.WaitVisible(css(`.draft-form input[name="to"]`)),
		chromedp.SetValue(css(`.draft-form input[name="to"]`), BOB), chromedp.SetValue(css(`.draft-form textarea`), "never sent"),
		chromedp.Click(css(`.draft-form [data-action="save"]`)), poll(`/^#\/d\/shop%40shop\.test\/drf_/.test(location.hash) && document.querySelector('.draft-form [data-action="delete"]')`))
	id = draftID()
	run("delete", chromedp.Click(css(`.draft-form [data-action="delete"]`)), poll(`location.hash === "#/d/shop%40shop.test" && document.querySelector("#drafts-empty")`))
	if _, code := getDraft(id); code != 404 {
		t.Errorf("a deleted draft: GET %d, want 404", code)
	}

	// Lists: a bad entry refused; Bob blocked on receive; his next mail
	// is kept, labelled blocked, shown in words; the entry removed.
	recvBlock := `.list-form[data-list="receive-block"]`
	run("lists", goTo("#/l/shop%40shop.test"), poll(`document.querySelectorAll(".list-form").length === 6`))
	run("block bob", chromedp.SetValue(css(recvBlock+` input[name="entry"]`), "Bob@Buyer.test"),
		chromedp.SetValue(css(recvBlock+` input[name="reason"]`), "testing"), chromedp.Click(css(recvBlock+` [data-action="add-entry"]`)),
		chromedp.WaitVisible(css(recvBlock+` li[data-entry="bob@buyer.test"]`)))
	run("allow a domain to send to", chromedp.SetValue(css(`.list-form[data-list="send-allow"] input[name="entry"]`), "buyer.test"),
		chromedp.Click(css(`.list-form[data-list="send-allow"] [data-action="add-entry"]`)),
		chromedp.WaitVisible(css(`.list-form[data-list="send-allow"] li[data-entry="buyer.test"]`)))
	run("bad entry", chromedp.SetValue(css(recvBlock+` input[name="entry"]`), "*.buyer.test"), chromedp.Click(css(recvBlock+` [data-action="add-entry"]`)),
		has(recvBlock+" .outcome .refused", "neither an address"))
	if got := value("bad entry", `document.querySelector(`+strconv.Quote(recvBlock+" .outcome")+`).textContent`); !strings.Contains(got, "HTTP 400, ValidationError") {
		t.Errorf("bad entry: %q", got)
	}
	var entries struct {
		Entries []struct {
			Entry  string `json:"entry"`
			Reason string `json:"reason"`
		} `json:"entries"`
	}
	c.do("GET", "/v0/inboxes/"+SHOP+"/lists/receive/block", nil, &entries)
	if len(entries.Entries) != 1 || entries.Entries[0].Entry != "bob@buyer.test" || entries.Entries[0].Reason != "testing" {
		t.Errorf("receive block list after the page: %+v", entries.Entries)
	}
	shot(ctx, "web-lists.png")
	// The send allow list refuses a draft to another domain: the API's
	// MessageRejectedError, shown; nothing is sent, the draft stays.
	run("refused recipient", goTo("#/d/shop%40shop.test/new"), chromedp.WaitVisible(css(`.draft-form input[name="to"]`)),
		chromedp.SetValue(css(`.draft-form input[name="to"]`), "eve@elsewhere.test"), chromedp.SetValue(css(`.draft-form textarea`), "not allowed"),
		chromedp.Click(css(`.draft-form [data-action="save"]`)), poll(`/^#\/d\/shop%40shop\.test\/drf_/.test(location.hash) && document.querySelector('.draft-form [data-action="send-now"]')`),
		chromedp.Click(css(`.draft-form [data-action="send-now"]`)), has(".draft-form .outcome .refused", "HTTP 403, MessageRejectedError"))
	if got := value("refused recipient", `document.querySelector(".draft-form .outcome").textContent`); !strings.Contains(got, "eve@elsewhere.test") || strings.Contains(got, "force") {
		t.Errorf("refused recipient: %q", got)
	}
	run("delete refused", chromedp.Click(css(`.draft-form [data-action="delete"]`)), poll(`location.hash === "#/d/shop%40shop.test" && document.querySelector("#drafts-empty")`))
	c.do("POST", "/v0/inboxes/"+BOB+"/messages/send", map[string]any{"to": SHOP, "subject": "unwanted offer", "text": "buy now"}, nil)
	listed("/v0/inboxes/"+SHOP+"/messages?labels=blocked", "Bob's mail was not labelled blocked")
	run("blocked in the list", goTo("#/i/shop%40shop.test?status=blocked"), poll(`document.querySelectorAll("#list li").length === 1`),
		has("#list li .badge.blocked", "Blocked: the allow/block lists refuse this sender"), has("#list li .badge.blocked code", "blocked"))
	run("blocked in the thread", chromedp.Click(css(`#list li a`)), chromedp.WaitVisible(css(".step.focus .badge.blocked")))
	run("unblock", goTo("#/l/shop%40shop.test"), chromedp.WaitVisible(css(recvBlock+` li[data-entry="bob@buyer.test"]`)),
		chromedp.Click(css(recvBlock+` li[data-entry="bob@buyer.test"] [data-action="remove-entry"]`)),
		poll(`!document.querySelector(`+strconv.Quote(recvBlock+` li[data-entry="bob@buyer.test"]`)+`)`),
		chromedp.Click(css(`.list-form[data-list="send-allow"] li[data-entry="buyer.test"] [data-action="remove-entry"]`)),
		poll(`!document.querySelector('.list-form[data-list="send-allow"] li')`))
	entries.Entries = nil
	c.do("GET", "/v0/inboxes/"+SHOP+"/lists/receive/block", nil, &entries)
	if len(entries.Entries) != 0 {
		t.Errorf("receive block list after removal: %+v", entries.Entries)
	}
}
