package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/audits"
	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/emulation"
	cdplog "github.com/chromedp/cdproto/log"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/envelopd/envelopd/internal/pgtest"
	"github.com/envelopd/envelopd/store"
)

// webClient calls the HTTP API of a test server.
type webClient struct {
	t   *testing.T
	srv apiServer
}

func (c webClient) do(method, path string, body any, out any) int {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, c.srv.url+path, rd)
	req.Header.Set("Authorization", "Bearer "+c.srv.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil {
		if b, ok := out.(*[]byte); ok {
			*b = data
		} else if err := json.Unmarshal(data, out); err != nil {
			c.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, data)
		}
	}
	if resp.StatusCode >= 300 {
		c.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, data)
	}
	return resp.StatusCode
}

type webMsg struct {
	MessageID string `json:"message_id"`
	ThreadID  string `json:"thread_id"`
	Envelopay struct {
		ID     int64  `json:"id"`
		Type   string `json:"type"`
		Status string `json:"status"`
	} `json:"envelopay"`
}

// received waits until inbox has received the n-th message of type typ.
func (c webClient) received(inbox, typ string, n int) webMsg {
	c.t.Helper()
	for i := 0; i < 400; i++ {
		var l struct {
			Messages []webMsg `json:"messages"`
		}
		c.do("GET", "/v0/inboxes/"+inbox+"/messages?labels=received&ascending=true&limit=1000&type="+typ, nil, &l)
		if len(l.Messages) >= n {
			return l.Messages[n-1]
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.t.Fatalf("no %s #%d in %s", typ, n, inbox)
	return webMsg{}
}

func (c webClient) reply(inbox string, to webMsg, body map[string]any, force bool) {
	c.t.Helper()
	b, _ := json.Marshal(body)
	q := ""
	if force {
		q = "?force=true"
	}
	c.do("POST", "/v0/inboxes/"+inbox+"/messages/"+url.PathEscape(to.MessageID)+"/reply"+q, map[string]any{"text": string(b)}, nil)
}

// bulkMessages is how many messages the shop's inbox holds before the
// exchange (ENVELOPD_WEB_BULK, default 20000): the first paint is
// measured on an inbox of that size.
func bulkMessages(t *testing.T) int {
	if v := os.Getenv("ENVELOPD_WEB_BULK"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("ENVELOPD_WEB_BULK: %v", err)
		}
		return n
	}
	return 20000
}

// fillShop stores n received messages in the relay mailbox
// shop@shop.test, through the store's own Ingest.
func fillShop(t *testing.T, db string, n int) {
	ctx := context.Background()
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.EnsureMailbox(ctx, "shop@shop.test"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	per := (n + 7) / 8
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w * per; i < min(n, (w+1)*per); i++ {
				mid := fmt.Sprintf("bulk%07d@buyer%d.test", i, i%50)
				from := fmt.Sprintf("agent%d@buyer%d.test", i%50, i%50)
				subj := fmt.Sprintf("status report %d", i)
				raw := fmt.Sprintf("From: %s\r\nTo: shop@shop.test\r\nSubject: %s\r\nMessage-ID: <%s>\r\nDate: Mon, 5 Jan 2026 10:00:00 +0000\r\n\r\nreport %d\r\n", from, subj, mid, i)
				if _, err := st.Ingest(ctx, &store.Incoming{Mailbox: "shop@shop.test", Direction: store.DirIn, Raw: []byte(raw),
					MessageID: mid, Sender: from, Recipients: []string{"shop@shop.test"}, Subject: subj,
					Status: store.StatusAccepted, ReceivedAt: time.Unix(1767607200+int64(i), 0)}); err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestInteropWebInbox: the web inbox in Debian's chromium (headless,
// driven over the DevTools protocol by chromedp) against a real `envelopd
// serve --relay --http`: log in, see a live message arrive, follow an
// Envelopay exchange as a thread timeline, follow a typed ref, filter by
// duplicate, download the raw mail and compare its bytes with the stored
// ones. Screenshots of the inbox, a thread and a phone-sized inbox are
// written to $ENVELOPD_ARTIFACTS (default: a temporary directory) and, with
// ENVELOPD_SCREENSHOTS=1, to docs/img/ for the README.
func TestInteropWebInbox(t *testing.T) {
	interop(t, "chromium")
	testWebInbox(t, "", bulkMessages(t))
}

// TestInteropPostgresWebInbox is TestInteropWebInbox with the store on
// Postgres (2,000 stored messages unless ENVELOPD_WEB_BULK says; its
// screenshots go to $ENVELOPD_ARTIFACTS only).
func TestInteropPostgresWebInbox(t *testing.T) {
	interop(t, "chromium")
	bulk := 2000
	if os.Getenv("ENVELOPD_WEB_BULK") != "" {
		bulk = bulkMessages(t)
	}
	testWebInbox(t, pgtest.Schema(t), bulk)
}

func testWebInbox(t *testing.T, db string, bulk int) {
	chromium, _ := exec.LookPath("chromium")
	// Hand-offs to a command, held for value-bearing mail until its
	// payment is verified (no rail: never): the page's hold/release acts
	// on them.
	srv := startAPIServerArgs(t, db, []string{"--relay", "--domain", "shop.test", "--domain", "buyer.test", "--sign-local", "--exec", "true", "--handoff-verified"}, func(db string) {
		start := time.Now()
		fillShop(t, db, bulk)
		t.Logf("stored %d messages in shop@shop.test in %v", bulk, time.Since(start).Round(time.Millisecond))
	})
	c := webClient{t, srv}
	const SHOP, BOB = "shop@shop.test", "bob@buyer.test"
	c.do("POST", "/v0/inboxes", map[string]string{"username": "bob", "domain": "buyer.test", "display_name": "Bob"}, nil)
	// The shop's inbox exists once the index has caught up with the bulk.
	indexed := time.Now()
	for i := 0; ; i++ {
		var l struct {
			Count int `json:"count"`
		}
		c.do("GET", "/v0/inboxes", nil, &l)
		if l.Count == 2 {
			break
		}
		if i > max(600, bulk/100) { // the index catches up at ≈ 20,000 messages/s
			t.Fatal("the shop's inbox did not appear")
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("inbox index caught up in %v", time.Since(indexed).Round(time.Millisecond))

	artifacts := os.Getenv("ENVELOPD_ARTIFACTS")
	if artifacts == "" {
		artifacts = t.TempDir()
	}
	if err := os.MkdirAll(artifacts, 0o755); err != nil {
		t.Fatal(err)
	}
	shot := func(ctx context.Context, name string) {
		t.Helper()
		png := browserValue(t, ctx, "screenshot "+name, chromedp.Steps(chromedp.Sleep(300*time.Millisecond)), chromedp.CaptureScreenshot())
		dirs := []string{artifacts}
		if os.Getenv("ENVELOPD_SCREENSHOTS") == "1" && db == "" {
			dirs = append(dirs, "../../docs/img")
		}
		for _, d := range dirs {
			if err := os.WriteFile(filepath.Join(d, name), png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}

	dl := t.TempDir()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.WindowSize(1280, 860),
	}
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	bctx, cancel := chromedp.NewContext(actx)
	defer cancel()

	// Any script error or CSP violation (an Audits issue, or a console
	// message) fails the test.
	var mu sync.Mutex
	var problems []string
	downloads := make(chan string, 4)
	if err := chromedp.Listen(bctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *cdpruntime.EventExceptionThrown:
			d := e.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			problems = append(problems, fmt.Sprintf("exception at %s:%d: %s", d.URL, d.LineNumber+1, msg))
		case *cdplog.EventEntryAdded:
			if strings.Contains(e.Entry.Text, "Content Security Policy") || strings.Contains(e.Entry.Text, "Content-Security-Policy") {
				problems = append(problems, "CSP: "+e.Entry.Text)
			}
		case *audits.EventIssueAdded:
			if d := e.Issue.Details; e.Issue.Code == audits.InspectorIssueCodeContentSecurityPolicyIssue && d != nil && d.ContentSecurityPolicyIssueDetails != nil {
				v := d.ContentSecurityPolicyIssueDetails
				problems = append(problems, fmt.Sprintf("CSP: %s refused by %s (%s)", v.BlockedURL, v.ViolatedDirective, v.ContentSecurityPolicyViolationType))
			}
		case *browser.EventDownloadProgress:
			if e.State == browser.DownloadProgressStateCompleted {
				select {
				case downloads <- e.GUID:
				default:
				}
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(bctx, 240*time.Second)
	defer cancel()
	run := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			dctx, cancel := context.WithTimeout(bctx, 5*time.Second)
			defer cancel()
			if png, err := chromedp.Run(dctx, chromedp.CaptureScreenshot()); err == nil {
				os.WriteFile(filepath.Join(artifacts, "failure.png"), png, 0o644)
			}
			if h, err := chromedp.Run(dctx, chromedp.Evaluate[string](`location.hash`)); err == nil {
				t.Logf("page at %s when %s failed", h, what)
			}
			mu.Lock()
			t.Fatalf("%s: %v (browser problems: %q)", what, err, problems)
		}
	}
	// go sets the page's hash (a same-document navigation: no load event).
	goTo := func(h string) chromedp.Action[chromedp.Void] {
		return chromedp.Evaluate[chromedp.Void](fmt.Sprintf("location.hash = %q", h))
	}
	poll := func(expr string) chromedp.Action[chromedp.Void] { return chromedp.Poll[chromedp.Void](expr) }
	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }
	text := func(sel string) string {
		t.Helper()
		return browserValue(t, ctx, "text of "+sel, chromedp.Steps(), chromedp.Text(css(sel)))
	}
	count := func(sel string) int {
		t.Helper()
		return browserValue(t, ctx, "count "+sel, chromedp.Steps(), chromedp.Evaluate[int](fmt.Sprintf("document.querySelectorAll(%q).length", sel)))
	}

	// Log in (a wrong key is tried last: a failed key slows the IP's
	// later requests, authguard's throttle).
	run("open", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		if _, err := chromedp.Call(ctx, audits.Enable, struct{}{}); err != nil {
			return err
		}
		if _, err := chromedp.Call(ctx, cdplog.Enable, struct{}{}); err != nil {
			return err
		}
		// The person is not in UTC: a draft's send_at typed in local
		// time must reach the API as the right instant.
		_, err := chromedp.Call(ctx, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: webZone})
		return err
	}), chromedp.Navigate(srv.url+"/"), chromedp.WaitVisible(css("#login")))
	run("log in", chromedp.SetValue(css("#key"), srv.key), chromedp.Click(css(`#login button[type="submit"]`)),
		chromedp.WaitVisible(css(`#inboxes a[href="#/i/shop%40shop.test"]`)))
	run("inbox", chromedp.Click(css(`#inboxes a[href="#/i/shop%40shop.test"]`)), chromedp.WaitVisible(css("#list li")))
	if n := count("#list li"); n != 50 {
		t.Errorf("first page: %d rows, want 50", n)
	}

	// First paint of the inbox: a fresh load of the page (key in the
	// tab's sessionStorage) until the list is in the DOM, from navigation
	// start (performance.mark "inbox-painted").
	var paints []float64
	for i := 0; i < 3; i++ {
		ms := browserValue(t, ctx, "reload", chromedp.Steps(chromedp.Reload(), chromedp.WaitVisible(css("#list li"))),
			chromedp.Evaluate[float64](`performance.getEntriesByName("inbox-painted")[0].startTime`))
		paints = append(paints, ms)
	}
	t.Logf("timings of the last load: %s", browserValue(t, ctx, "timings", chromedp.Steps(), chromedp.Evaluate[string](`(() => {
		const n = performance.getEntriesByType("navigation")[0];
		const r = performance.getEntriesByType("resource").map((e) => e.name.replace(location.origin, "") + " " + Math.round(e.startTime) + "+" + Math.round(e.duration));
		return "response " + Math.round(n.responseEnd) + ", dom interactive " + Math.round(n.domInteractive) + ", resources: " + r.join(", ");
	})()`)))
	t.Logf("first paint of an inbox of %d messages: %.0f ms, %.0f ms, %.0f ms (navigation start → first page in the DOM)", bulk, paints[0], paints[1], paints[2])
	os.WriteFile(filepath.Join(artifacts, "first-paint.txt"), []byte(fmt.Sprintf("messages=%d first_paint_ms=%.0f,%.0f,%.0f\n", bulk, paints[0], paints[1], paints[2])), 0o644)

	// Live: a WHICH sent now shows up without a reload.
	run("live on", poll(`document.getElementById("live").textContent !== ""`))
	// The list follows the API's websocket ("live"; "polling" would mean
	// the fallback every 2 s).
	run("websocket subscribed", poll(`document.getElementById("live").textContent === "live"`))
	c.do("POST", "/v0/inboxes/"+BOB+"/messages/send", map[string]any{"to": SHOP, "subject": "WHICH | what do you sell?", "text": ""}, nil)
	run("live message", poll(`(document.querySelector("#list li") || {}).textContent?.includes("what do you sell?")`))
	if mode := text("#live"); mode != "live" {
		t.Errorf("live updates: %q after the message, want live (the websocket)", mode)
	}
	// The rest of the exchange, through the API.
	w := c.received(SHOP, "which", 1)
	c.reply(SHOP, w, map[string]any{"v": "0.2.0", "type": "methods", "id": "mth_1", "note": "SOL accepted",
		"rails": []any{map[string]any{"chain": "solana", "token": "SOL", "wallet": "6dL6n77jJFWq4bu3cQp57H8rMUPEXu7uYN1XApPxpUif", "price": "500000000"}}}, false)
	m := c.received(BOB, "methods", 1)
	c.reply(BOB, m, map[string]any{"v": "0.2.0", "type": "order", "id": "ord_1", "note": "review PR #417", "task": map[string]any{"description": "Review PR #417"}}, false)
	o := c.received(SHOP, "order", 1)
	c.reply(SHOP, o, map[string]any{"v": "0.2.0", "type": "fulfill", "id": "ful_1", "order_ref": "ord_1", "note": "approved", "result": map[string]any{"summary": "Approved"}}, false)
	f := c.received(BOB, "fulfill", 1)
	pay := map[string]any{"v": "0.2.0", "type": "pay", "id": "pay_1", "amount": "500000000", "token": "SOL", "chain": "solana", "note": "for ord_1", "proof": map[string]any{"tx": "5xQ7webinterop"}}
	c.reply(BOB, f, pay, false)
	c.received(SHOP, "pay", 1)
	pay["id"] = "pay_2"
	c.reply(BOB, f, pay, true)
	dup := c.received(SHOP, "pay", 2)
	if dup.Envelopay.Status != "duplicate" {
		t.Fatalf("replayed PAY: status %s, want duplicate", dup.Envelopay.Status)
	}
	// OFFER → ACCEPT in a thread of their own.
	c.do("POST", "/v0/inboxes/"+BOB+"/messages/send", map[string]any{"to": SHOP, "text": mustJSON(map[string]any{"v": "0.2.0", "type": "offer", "id": "ofr_1",
		"note": "1 SOL for 30 USDC", "give": map[string]any{"amount": "1000000000", "token": "SOL", "chain": "solana", "to": "6dL6n77jJFWq4bu3cQp57H8rMUPEXu7uYN1XApPxpUif", "proof": map[string]any{"tx": "4vJ9offer"}},
		"want": map[string]any{"amount": "30000000", "token": "USDC", "chain": "base"}, "wallet": "0x1a2B"})}, nil)
	of := c.received(SHOP, "offer", 1)
	// The OFFER shows up in the open list; its thread, open, shows the
	// ACCEPT as it arrives.
	run("offer live", poll(`document.querySelector("#list").textContent.includes("1 SOL for 30 USDC")`),
		chromedp.Click(chromedp.Search(`//ol[@id="list"]/li[contains(., "1 SOL for 30 USDC")]/a`)),
		chromedp.WaitVisible(css(`.step[data-eid="ofr_1"]`)))
	c.reply(SHOP, of, map[string]any{"v": "0.2.0", "type": "accept", "id": "acc_1", "offer_ref": "ofr_1", "amount": "30000000", "token": "USDC", "chain": "base", "note": "30 USDC sent", "proof": map[string]any{"tx": "0x8c7d"}}, false)
	c.received(BOB, "accept", 1)
	run("accept live in the thread", poll(`document.querySelector('.step[data-eid="acc_1"]') !== null && document.querySelectorAll("#timeline .step").length === 2`))

	// Amounts in the token's units: USDC (6 decimals), ETH (18), a token
	// the registry does not know (raw); the smallest units on hover.
	run("list for amounts", goTo("#/i/shop%40shop.test"), poll(`location.hash === "#/i/shop%40shop.test" && document.querySelector("#list li")`))
	for i, p := range []struct{ id, amount, token, want, title string }{
		{"pay_eth", "10000000000000000", "ETH", "0.01 ETH on base", "10000000000000000 ETH (smallest units on base)"},
		{"pay_usdc", "30000000", "USDC", "30 USDC on base", "30000000 USDC (smallest units on base)"},
		{"pay_unknown", "123450000", "0x00000000000000000000000000000000000000aa", "123450000 0x00000000000000000000000000000000000000aa on base", "token not in the registry: amount in smallest units"},
	} {
		c.do("POST", "/v0/inboxes/"+BOB+"/messages/send", map[string]any{"to": SHOP, "text": mustJSON(map[string]any{"v": "0.2.0", "type": "pay", "id": p.id,
			"note": "amount " + p.id, "amount": p.amount, "token": p.token, "chain": "base", "proof": map[string]any{"tx": fmt.Sprintf("0x%064x", 1000+i)}})}, nil)
		row := `//ol[@id="list"]/li[contains(., "amount ` + p.id + `")]`
		run("amount "+p.id, chromedp.WaitVisible(chromedp.Search(row)))
		got := browserValue(t, ctx, "amount of "+p.id, chromedp.Steps(), chromedp.Evaluate[[]string](fmt.Sprintf(`(() => {
			const e = [...document.querySelectorAll("#list li")].find((li) => li.textContent.includes(%q)).querySelector(".money");
			return [e.textContent, e.title, e.dataset.raw];
		})()`, "amount "+p.id)))
		if got[0] != p.want || got[1] != p.title || got[2] != p.amount {
			t.Errorf("%s: shown %q (title %q, raw %q), want %q (title %q)", p.id, got[0], got[1], got[2], p.want, p.title)
		}
	}

	// What the filters cost on this inbox (logged: a measurement, not an
	// assertion).
	for _, q := range []string{"", "labels=duplicate", "type=pay", "error=duplicate_proof", "q=sell", "sender=bob%40buyer.test", "labels=accepted", "sender=agent7%40buyer7.test", "q=report"} {
		start := time.Now()
		c.do("GET", "/v0/inboxes/"+SHOP+"/messages?limit=50&"+q, nil, nil)
		t.Logf("GET messages?%s on %d messages: %v", q, bulk, time.Since(start).Round(100*time.Microsecond))
	}

	// Every step is in the list.
	run("list", goTo("#/i/shop%40shop.test"), poll(`location.hash === "#/i/shop%40shop.test" && document.querySelector("#list li")`),
		chromedp.WaitVisible(css(`#list li[data-status="duplicate"]`)))
	run("settle", poll(`!document.querySelector("#list li.fresh")`))
	shot(ctx, "web-inbox.png")

	// The thread as a timeline; a typed ref jumps to its step.
	run("open thread", chromedp.Click(chromedp.Search(`//ol[@id="list"]/li[contains(., "what do you sell?")]/a`)),
		chromedp.WaitVisible(css("#timeline .step")))
	if got := strings.Join(strings.Fields(text(".chain")), " "); got != "WHICH METHODS ORDER FULFILL PAY PAY OOPS" {
		t.Errorf("timeline: %q", got)
	}
	run("typed ref", chromedp.Click(css(`a.ref[data-ref="order_ref"]`)), chromedp.WaitVisible(css(`.step.focus[data-eid="ord_1"]`)))
	if proof := text(fmt.Sprintf(`#step-%d .check`, dup.Envelopay.ID)); !strings.Contains(proof, "proof seen before (duplicate_proof)") {
		t.Errorf("replayed PAY's proof check: %q", proof)
	}
	// Its payment is a duplicate (never checked): a badge and a check line.
	if pay := text(fmt.Sprintf(`#step-%d .check.bad:last-of-type`, dup.Envelopay.ID)); !strings.Contains(pay, "✗ payment duplicate") {
		t.Errorf("replayed PAY's payment check: %q", pay)
	}
	if badge := text(fmt.Sprintf(`#step-%d .badge.pay-duplicate`, dup.Envelopay.ID)); !strings.HasPrefix(badge, "Proof used before: not checked again payment duplicate") {
		t.Errorf("replayed PAY's payment badge: %q", badge)
	}
	// Every code in words, the code beside; the duplicate links to the
	// PAY it repeats.
	if badge := text(fmt.Sprintf(`#step-%d .badge.code-duplicate_proof`, dup.Envelopay.ID)); !strings.HasPrefix(badge, "This payment proof was presented before duplicate_proof") {
		t.Errorf("duplicate_proof badge: %q", badge)
	}
	first := c.received(SHOP, "pay", 1)
	run("duplicate → earlier", chromedp.Click(css(fmt.Sprintf(`#step-%d .check a.dupref`, dup.Envelopay.ID))),
		chromedp.WaitVisible(css(fmt.Sprintf(`#step-%d.focus`, first.Envelopay.ID))))
	// The PAY's amount in SOL (9 decimals), its payment unverified (no
	// rail) with a link to the transaction on solana's explorer.
	payStep := fmt.Sprintf("#step-%d", first.Envelopay.ID)
	if got := text(payStep + " .fields .money"); got != "0.5 SOL on solana" {
		t.Errorf("PAY amount: %q, want 0.5 SOL on solana", got)
	}
	if href := browserValue(t, ctx, "explorer link", chromedp.Steps(), chromedp.Evaluate[string](`document.querySelector(`+strconv.Quote(payStep+" a.explorer")+`)?.href || ""`)); href != "https://explorer.solana.com/tx/5xQ7webinterop" {
		t.Errorf("explorer link: %q", href)
	}
	run("fulfill", goTo("#/i/shop%40shop.test"), poll(`location.hash === "#/i/shop%40shop.test" && document.querySelector("#list li")`),
		chromedp.Click(chromedp.Search(`//ol[@id="list"]/li[contains(., "what do you sell?")]/a`)),
		chromedp.WaitVisible(css("#timeline .step")), chromedp.Evaluate[chromedp.Void](`document.querySelector(".chain li:nth-child(4) a").click()`),
		chromedp.WaitVisible(css(`.step.focus[data-eid="ful_1"]`)))
	run("thread top", chromedp.EmulateViewport(1280, 1800), goTo("#/t/shop%40shop.test/"+url.PathEscape(w.ThreadID)),
		poll(`document.querySelectorAll("#timeline .step").length === 7 && !document.querySelector(".step.focus")`),
		chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`))
	shot(ctx, "web-thread.png")
	run("window", chromedp.EmulateViewport(1280, 860))

	// OFFER ↔ ACCEPT amount check.
	run("offer thread", goTo("#/i/shop%40shop.test"), poll(`location.hash === "#/i/shop%40shop.test" && document.querySelector("#list li")`),
		chromedp.Click(chromedp.Search(`//ol[@id="list"]/li[contains(., "1 SOL for 30 USDC")]/a`)),
		chromedp.WaitVisible(css(`.step[data-eid="acc_1"]`)))
	if check := text(`.step[data-eid="acc_1"] .check`); !strings.Contains(check, "✓ pays 30 USDC on base = the OFFER's want 30 USDC on base") {
		t.Errorf("ACCEPT amount check: %q", check)
	}
	run("offer ref", chromedp.Click(css(`.step[data-eid="acc_1"] a.ref[data-ref="offer_ref"]`)), chromedp.WaitVisible(css(`.step.focus[data-eid="ofr_1"]`)))

	// The Error filter's placeholder does not look filled in.
	ph := browserValue(t, ctx, "placeholder", chromedp.Steps(goTo("#/i/shop%40shop.test"), poll(`location.hash === "#/i/shop%40shop.test" && document.querySelector("#list li")`)), chromedp.Evaluate[[]string](`(() => {
		const i = document.querySelector('#filters input[name="error"]');
		return [i.placeholder, i.value, getComputedStyle(i, "::placeholder").fontStyle];
	})()`))
	if ph[0] != "any code" || ph[1] != "" || ph[2] != "italic" {
		t.Errorf("Error filter: placeholder %q value %q style %q", ph[0], ph[1], ph[2])
	}

	// Filter by duplicate: the one replayed PAY.
	run("filter", goTo("#/i/shop%40shop.test"), poll(`location.hash === "#/i/shop%40shop.test" && document.querySelector("#list li")`),
		chromedp.SetValue(css(`select[name="status"]`), "duplicate"), chromedp.Click(css(`#filters button[type="submit"]`)),
		poll(`location.hash.includes("status=duplicate") && document.querySelectorAll("#list li").length === 1`))
	if n := count(`#list li[data-status="duplicate"][data-id="` + strconv.FormatInt(dup.Envelopay.ID, 10) + `"]`); n != 1 {
		t.Errorf("duplicate filter: the replayed PAY is not the one row")
	}
	// Search over subject and note.
	run("search", goTo("#/i/shop%40shop.test?q=sell"),
		poll(`document.querySelectorAll("#list li").length === 1 && document.querySelector("#list li").textContent.includes("what do you sell?")`))

	// Raw source one click away, and the .eml download: the exact bytes.
	var want []byte
	c.do("GET", fmt.Sprintf("/v0/inboxes/%s/messages/%d/raw?format=raw", SHOP, dup.Envelopay.ID), nil, &want)
	step := fmt.Sprintf("#step-%d", dup.Envelopay.ID)
	run("dup thread", goTo("#/i/shop%40shop.test?status=duplicate"), chromedp.WaitVisible(css(`#list li[data-status="duplicate"]`)),
		chromedp.Click(css(`#list li[data-status="duplicate"] a`)), chromedp.WaitVisible(css(step+".focus")),
		chromedp.Click(css(step+` [data-action="Source"]`)), chromedp.WaitVisible(css(step+" pre.source")))
	if src := text(step + " pre.source"); !strings.Contains(src, "DKIM-Signature:") || !strings.Contains(src, `"pay_2"`) {
		t.Errorf("raw source view: %.200q", src)
	}
	run("download", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
			Behavior: browser.SetDownloadBehaviorBehaviorAllowAndName, DownloadPath: dl, EventsEnabled: ptrTo(true)})
		return err
	}), chromedp.Click(css(step+` [data-action="download"]`)))
	select {
	case guid := <-downloads:
		got, err := os.ReadFile(filepath.Join(dl, guid))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) || len(want) == 0 {
			t.Errorf("downloaded .eml: %d bytes, differs from the stored %d bytes", len(got), len(want))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the .eml download did not complete")
	}

	// HTML mail: only in a sandboxed iframe; no script runs, nothing
	// remote loads (a probe server counts requests).
	var probes sync.WaitGroup
	var probeHits int
	probe := http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		probeHits++
		mu.Unlock()
	})}
	pl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	probes.Add(1)
	go func() { defer probes.Done(); probe.Serve(pl) }()
	defer func() { probe.Close(); probes.Wait() }()
	probeURL := "http://" + pl.Addr().String() + "/probe"
	c.do("POST", "/v0/inboxes/"+BOB+"/messages/send", map[string]any{"to": SHOP, "subject": "newsletter", "text": "plain part",
		"html": `<p>hello html</p><img src="` + probeURL + `.png"><script>parent.document.title = "pwned"; fetch("` + probeURL + `")</script>` +
			`<link rel="stylesheet" href="` + probeURL + `.css"><iframe src="` + probeURL + `.html"></iframe>`}, nil)
	// The relay delivers it to the shop asynchronously (and on Postgres a
	// commit becomes listable once older transactions end): wait until the
	// API's own search lists it before asking the page for it.
	for deadline := time.Now().Add(30 * time.Second); ; {
		var found struct {
			Count int `json:"count"`
		}
		c.do("GET", "/v0/inboxes/"+SHOP+"/messages?q=newsletter", nil, &found)
		if found.Count > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the newsletter never reached the shop's inbox (API search)")
		}
		time.Sleep(50 * time.Millisecond)
	}
	run("html mail", goTo("#/i/shop%40shop.test?q=newsletter"), poll(`document.querySelector("#list li")?.textContent.includes("newsletter")`),
		chromedp.Click(css(`#list li a`)), chromedp.WaitVisible(css(".step.focus")),
		chromedp.Click(css(`.step.focus [data-action="HTML"]`)), chromedp.WaitVisible(css(".step.focus iframe.html")), chromedp.Sleep(time.Second))
	frame := browserValue(t, ctx, "iframe", chromedp.Steps(), chromedp.Evaluate[[]string](`(() => {
		const f = document.querySelector(".step.focus iframe.html");
		return [f.getAttribute("sandbox"), String(f.contentDocument === null), document.title, f.srcdoc.slice(0, 200)];
	})()`))
	if frame[0] != "" || frame[1] != "true" || frame[2] != "envelopd inbox" || !strings.Contains(frame[3], "Content-Security-Policy") {
		t.Errorf("HTML iframe: sandbox %q, opaque origin %s, title %q, srcdoc %q", frame[0], frame[1], frame[2], frame[3])
	}
	// The page's own CSP refuses a remote image too; the browser reports
	// it, which shows that the watch for violations above hears them.
	run("page CSP", chromedp.Evaluate[chromedp.Void](`document.body.append(Object.assign(document.createElement("img"), {src: "`+probeURL+`-page.png"}))`),
		poll(`true`), chromedp.Sleep(500*time.Millisecond))
	mu.Lock()
	if probeHits != 0 {
		t.Errorf("the HTML part loaded %d remote resources", probeHits)
	}
	kept := problems[:0]
	for _, p := range problems {
		if !strings.Contains(p, probeURL) { // the blocked loads provoked above
			kept = append(kept, p)
		}
	}
	if len(problems) == len(kept) {
		t.Errorf("no CSP report for the page's blocked remote image")
	}
	problems = kept
	mu.Unlock()

	// Actions, with a key scoped to the shop's inbox: log in with it.
	apikey := func(inbox string) string {
		out, err := exec.Command(srv.bin, "apikey", "create", "--db", srv.db, "--inbox", inbox).Output()
		if err != nil {
			t.Fatalf("apikey create --inbox %s: %v", inbox, err)
		}
		return strings.TrimSpace(string(out))
	}
	login := func(key string) {
		t.Helper()
		run("log out", chromedp.Click(css("#logout")), chromedp.WaitVisible(css("#login")))
		run("log in", chromedp.SetValue(css("#key"), key), chromedp.Click(css(`#login button[type="submit"]`)),
			chromedp.WaitVisible(css(`#inboxes a`)))
	}
	login(apikey(SHOP))
	offerStep := fmt.Sprintf("#step-%d", of.Envelopay.ID)
	run("offer thread (scoped key)", goTo("#/t/shop%40shop.test/"+url.PathEscape(of.ThreadID)+"/"+strconv.FormatInt(of.Envelopay.ID, 10)),
		chromedp.WaitVisible(css(offerStep)))
	// Label.
	run("label", chromedp.Click(css(offerStep+` [data-action="Labels"]`)), chromedp.WaitVisible(css(offerStep+` input[name="label"]`)),
		chromedp.SetValue(css(offerStep+` input[name="label"]`), "needs-review"), chromedp.Click(css(offerStep+` [data-action="add-label"]`)),
		chromedp.WaitVisible(css(offerStep+` .badge.label[data-label="needs-review"]`)))
	var got struct {
		Labels []string `json:"labels"`
	}
	c.do("GET", "/v0/inboxes/"+SHOP+"/messages/"+url.PathEscape(of.MessageID), nil, &got)
	if !slices.Contains(got.Labels, "needs-review") {
		t.Errorf("label from the page: %v", got.Labels)
	}
	// Hold and release the OFFER's hand-off (held for its payment, which
	// no rail checks).
	run("hand-off", chromedp.Click(css(offerStep+` [data-action="Hand-off"]`)), chromedp.WaitVisible(css(offerStep+` .handoffs li[data-held="true"]`)))
	if h := text(offerStep + " .handoffs li"); h != "exec: held by payment (until the payment is verified)" {
		t.Errorf("hand-off before: %q", h)
	}
	run("hold", chromedp.Click(css(offerStep+` [data-action="hold"]`)),
		poll(`document.querySelector(`+strconv.Quote(offerStep+" .handoffs li")+`)?.textContent.startsWith("exec: held by person and payment")`))
	run("release", chromedp.Click(css(offerStep+` [data-action="release"]`)),
		poll(`document.querySelector(`+strconv.Quote(offerStep+" .handoffs li")+`)?.textContent === "exec: held by payment (until the payment is verified)"`))
	run("release again", chromedp.Click(css(offerStep+` [data-action="release"]`)),
		poll(`document.querySelector(`+strconv.Quote(offerStep+" .refused")+`)?.textContent.includes("HandoffStateError")`))
	// Reply: the type picker's template, checked before sending; an
	// invalid body is not sent; the API refuses a FULFILL of an unknown
	// ORDER and says force would send it; forced, it is sent.
	run("reply form", chromedp.Click(css(offerStep+` [data-action="Reply"]`)), chromedp.WaitVisible(css(offerStep+` select[name="type"]`)),
		chromedp.SetValue(css(offerStep+` select[name="type"]`), "oops"),
		chromedp.Evaluate[chromedp.Void](`document.querySelector(`+strconv.Quote(offerStep+` select[name="type"]`)+`).dispatchEvent(new Event("change"))`))
	if body := browserValue(t, ctx, "template", chromedp.Steps(), chromedp.Value(css(offerStep+` textarea`))); !strings.Contains(body, `"type": "oops"`) || !strings.Contains(body, `"ref": "ofr_1"`) {
		t.Errorf("OOPS template: %s", body)
	}
	run("invalid json", chromedp.SetValue(css(offerStep+` textarea`), `{"v":"0.2.0","type":"oops",`), chromedp.Click(css(offerStep+` [data-action="send"]`)),
		poll(`document.querySelector(`+strconv.Quote(offerStep+" .outcome")+`).textContent.includes("Not sent: fix these first.The body is not valid JSON")`))
	run("refused", chromedp.SetValue(css(offerStep+` select[name="type"]`), "fulfill"),
		chromedp.SetValue(css(offerStep+` textarea`), `{"v":"0.2.0","type":"fulfill","id":"ful_web","order_ref":"ord_nowhere","note":"from the page","result":{"summary":"done"}}`),
		chromedp.Click(css(offerStep+` [data-action="send"]`)), chromedp.WaitVisible(css(offerStep+` [data-action="force"]`)))
	if refused := text(offerStep + " .outcome"); !strings.Contains(refused, "ValidationError") || !strings.Contains(refused, "force: true") {
		t.Errorf("refused reply: %q", refused)
	}
	run("show the refusal", chromedp.Evaluate[chromedp.Void](`document.querySelector(`+strconv.Quote(offerStep+" .outcome")+`).scrollIntoView({block: "end"})`))
	shot(ctx, "web-actions.png")
	run("forced", chromedp.Click(css(offerStep+` [data-action="force"]`)),
		poll(`document.querySelector(`+strconv.Quote(offerStep+" .outcome")+`)?.textContent.includes("Sent FULFILL (forced: invalid, sent anyway)")`))
	webDraftsAndLists(t, c, ctx, run, shot, offerStep)
	// A key scoped to another inbox is refused, cleanly: the page says so.
	login(apikey(BOB))
	run("out of scope", goTo("#/t/shop%40shop.test/"+url.PathEscape(of.ThreadID)),
		poll(`document.querySelector("#pane .error")?.textContent.startsWith("NotFoundError: ")`))
	run("drafts out of scope", goTo("#/d/shop%40shop.test"),
		poll(`document.querySelector("#pane .error")?.textContent.startsWith("NotFoundError: ")`))
	run("lists out of scope", goTo("#/l/shop%40shop.test"),
		poll(`document.querySelectorAll(".list-form .refused").length === 6 && [...document.querySelectorAll(".list-form .refused")].every((e) => e.textContent.includes("NotFoundError"))`))
	login(srv.key)

	// A phone-sized window: one column, nothing wider than the screen.
	run("phone", chromedp.EmulateViewport(390, 844), goTo("#/i/shop%40shop.test"), poll(`location.hash === "#/i/shop%40shop.test" && document.querySelector("#list li")`))
	cols := browserValue(t, ctx, "phone layout", chromedp.Steps(), chromedp.Evaluate[string](`getComputedStyle(document.getElementById("shell")).gridTemplateColumns`))
	if strings.Contains(strings.TrimSpace(cols), " ") {
		t.Errorf("phone-sized window: shell columns %q, want one", cols)
	}
	if browserValue(t, ctx, "phone width", chromedp.Steps(), chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth`)) {
		t.Errorf("phone-sized window: the page scrolls sideways")
	}
	shot(ctx, "web-inbox-phone.png")
	// Tapping the inbox shown loads it again.
	loads := `performance.getEntriesByType("resource").filter((e) => e.name.includes("/messages?")).length`
	before := browserValue(t, ctx, "list loads", chromedp.Steps(), chromedp.Evaluate[int](loads))
	run("tap current", chromedp.Click(css(`#inboxes a.current`)), poll(fmt.Sprintf(`%s > %d && document.querySelector("#list li")`, loads, before)))
	// A page shorter than the screen: no blank band under the tabs.
	run("short page", goTo("#/i/shop%40shop.test?q=sell"), poll(`document.querySelectorAll("#list li").length === 1`))
	band := browserValue(t, ctx, "band", chromedp.Steps(), chromedp.Evaluate[float64](`document.getElementById("pane").getBoundingClientRect().top - document.querySelector("#inboxes ul").getBoundingClientRect().bottom`))
	if band > 20 {
		t.Errorf("phone: %.0f px between the inbox tabs and the pane", band)
	}
	// A thread: every address on one line, nothing sideways.
	run("phone thread", goTo("#/t/shop%40shop.test/"+url.PathEscape(w.ThreadID)), poll(`document.querySelectorAll("#timeline .step").length >= 7`))
	split := browserValue(t, ctx, "addresses", chromedp.Steps(), chromedp.Evaluate[[]string](`[...document.querySelectorAll(".step .who .addr")].filter((a) => {
		return a.getClientRects().length !== 1 || a.getBoundingClientRect().height > 1.8 * parseFloat(getComputedStyle(a).fontSize);
	}).map((a) => a.textContent)`))
	if n := count(".step .who .addr"); n == 0 || len(split) != 0 {
		t.Errorf("phone thread: %d addresses, broken over lines: %q", n, split)
	}
	if browserValue(t, ctx, "phone width", chromedp.Steps(), chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth`)) {
		wide := browserValue(t, ctx, "wide", chromedp.Steps(), chromedp.Evaluate[[]string](`[...document.querySelectorAll("body *")].filter((e) => e.getBoundingClientRect().right > window.innerWidth + 1).slice(0, 8).map((e) => e.tagName + "." + e.className + " " + Math.round(e.getBoundingClientRect().right) + " " + e.textContent.slice(0, 40)).concat([document.documentElement.scrollWidth + " > " + window.innerWidth]).concat([...document.querySelectorAll("body *")].filter((e) => e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).overflowX === "visible").slice(0, 6).map((e) => "overflowing " + e.tagName + "." + e.className + " " + e.scrollWidth + "/" + e.clientWidth))`))
		t.Errorf("phone-sized thread: the page scrolls sideways (%q)", wide)
	}
	shot(ctx, "web-thread-phone.png")
	// The drafts and the lists: nothing sideways either.
	for _, h := range []string{"#/d/shop%40shop.test", "#/d/shop%40shop.test/new", "#/l/shop%40shop.test"} {
		run("phone "+h, goTo(h), poll(`document.querySelector(".views a.current") && (document.querySelector("#drafts, #drafts-empty, .draft-form") || document.querySelectorAll(".list-form").length === 6)`))
		if browserValue(t, ctx, "phone width "+h, chromedp.Steps(), chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth`)) {
			t.Errorf("phone-sized %s: the page scrolls sideways", h)
		}
	}

	// Log out: the key leaves sessionStorage.
	run("log out", chromedp.Click(css("#logout")), chromedp.WaitVisible(css("#login")))
	if left := browserValue(t, ctx, "key after logout", chromedp.Steps(), chromedp.Evaluate[string](`sessionStorage.getItem("envelopd.api_key") || ""`)); left != "" {
		t.Errorf("key still in sessionStorage after logout")
	}
	run("wrong key", chromedp.SendKeys(css("#key"), "ek_000000000000_"+strings.Repeat("A", 43)), chromedp.Click(css(`#login button[type="submit"]`)),
		poll(`document.getElementById("login-error").textContent === "That key was refused."`))
	mu.Lock()
	defer mu.Unlock()
	for _, p := range problems {
		t.Errorf("browser: %s", p)
	}
}

// browserValue runs steps, then a, and returns a's value.
func browserValue[T any](t *testing.T, ctx context.Context, what string, steps chromedp.Action[chromedp.Void], a chromedp.Action[T]) T {
	t.Helper()
	if err := chromedp.Do(ctx, steps); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

func ptrTo[T any](v T) *T { return &v }

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
