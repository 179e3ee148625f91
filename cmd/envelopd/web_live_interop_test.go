package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/fetch"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/envelopd/envelopd/internal/evmfake"
	"github.com/envelopd/envelopd/internal/pgtest"
)

// TestInteropWebLive drives the web inbox in Chromium while mail arrives
// during a list load: the list's answer is held in the browser (the
// DevTools Fetch domain, at the response stage: the server has answered
// without the new mail) while the mail's event reaches the page; the page
// must still show the mail, with no later event to help. Then 200
// navigations (thread → list, another inbox → this one, a tap on the
// current inbox), each list answer held a random 0–400 ms and one mail
// arriving at a random moment: every mail shows up without a reload.
func TestInteropWebLive(t *testing.T) {
	interop(t, "chromium")
	testWebLive(t, "")
}

// TestInteropPostgresWebLive is TestInteropWebLive on Postgres.
func TestInteropPostgresWebLive(t *testing.T) {
	interop(t, "chromium")
	testWebLive(t, pgtest.Schema(t))
}

// webNavigations is how many navigations the live check makes
// (ENVELOPD_WEB_NAVIGATIONS, default 200).
func webNavigations() int {
	var n int
	if _, err := fmt.Sscan(os.Getenv("ENVELOPD_WEB_NAVIGATIONS"), &n); err != nil || n <= 0 {
		return 200
	}
	return n
}

// chromiumOptions are the flags of a headless Chromium for the web tests.
func chromiumOptions(t *testing.T, w, h int) []chromedp.ExecAllocatorOption {
	chromium, _ := exec.LookPath("chromium")
	return []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.WindowSize(w, h),
	}
}

func testWebLive(t *testing.T, db string) {
	// A rail on base (an in-process node answering one USDC transfer),
	// down at first: a PAY's payment waits, pending, until it is up.
	node := evmfake.Start(t, "usdc-transfer.json")
	node.SetDown(true)
	srv := startAPIServerArgs(t, db, []string{"--relay", "--domain", "shop.test", "--domain", "buyer.test", "--sign-local",
		"--rail", "base=" + node.URL, "--wallet", "base=0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed", "--confirmations", "base=3"})
	c := webClient{t, srv}
	const SHOP, BOB = "shop@shop.test", "bob@buyer.test"
	c.do("POST", "/v0/inboxes", map[string]string{"username": "shop", "domain": "shop.test", "display_name": "Shop"}, nil)
	c.do("POST", "/v0/inboxes", map[string]string{"username": "bob", "domain": "buyer.test", "display_name": "Bob"}, nil)
	send := func(subject string) {
		c.do("POST", "/v0/inboxes/"+BOB+"/messages/send", map[string]any{"to": SHOP, "subject": subject, "text": "hello"}, nil)
	}
	// listed waits until the API lists subject in the shop's inbox.
	listed := func(subject string) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; {
			var l struct {
				Count int `json:"count"`
			}
			c.do("GET", "/v0/inboxes/"+SHOP+"/messages?q="+strings.ReplaceAll(subject, " ", "+"), nil, &l)
			if l.Count > 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%q never reached the shop's inbox", subject)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	actx, cancel := chromedp.NewExecAllocator(context.Background(), chromiumOptions(t, 1280, 860)...)
	defer cancel()
	bctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel := context.WithTimeout(bctx, 15*time.Minute)
	defer cancel()

	// The list's answers (GET …/messages?…) are paused at the response
	// stage: hold says for how long; a held answer is announced on paused
	// and continued after hold, or when release is closed, whichever is
	// first.
	var hold atomic.Int64 // nanoseconds; 0: no hold
	var relMu sync.Mutex
	release := make(chan struct{})
	paused := make(chan struct{}, 16)
	var mu sync.Mutex
	var problems []string
	if err := chromedp.Listen(bctx, func(ev any) {
		switch e := ev.(type) {
		case *fetch.EventRequestPaused:
			d := time.Duration(hold.Load())
			relMu.Lock()
			rel := release
			relMu.Unlock()
			go func() {
				if d > 0 && strings.Contains(e.Request.URL, "/messages?") {
					select {
					case paused <- struct{}{}:
					default:
					}
					select {
					case <-time.After(d):
					case <-rel:
					case <-ctx.Done():
					}
				}
				chromedp.Call(ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: e.RequestID})
			}()
		case *cdpruntime.EventExceptionThrown:
			mu.Lock()
			problems = append(problems, fmt.Sprintf("exception: %s", e.ExceptionDetails.Text))
			mu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	run := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("%s: %v (browser problems: %q)", what, err, problems)
		}
	}
	goTo := func(h string) chromedp.Action[chromedp.Void] {
		return chromedp.Evaluate[chromedp.Void](fmt.Sprintf("location.hash = %q", h))
	}
	poll := func(expr string, opts ...chromedp.PollOption) chromedp.Action[chromedp.Void] {
		return chromedp.Poll[chromedp.Void](expr, opts...)
	}
	inList := func(subject string) string {
		return fmt.Sprintf(`location.hash === "#/i/shop%%40shop.test" && [...document.querySelectorAll("#list li")].some((e) => e.textContent.includes(%q))`, subject)
	}
	lastEvent := func() string {
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.dataset.lastEvent || ""`))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}

	run("open", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{
			{URLPattern: "*/v0/inboxes/*", RequestStage: fetch.RequestStageResponse}}})
		return err
	}), chromedp.Navigate(srv.url+"/"), chromedp.WaitVisible(chromedp.CSS("#login")))
	run("log in", chromedp.SetValue(chromedp.CSS("#key"), srv.key), chromedp.Click(chromedp.CSS(`#login button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#inboxes a[href="#/i/shop%40shop.test"]`)))
	send("first mail")
	listed("first mail")
	run("shop inbox", goTo("#/i/shop%40shop.test"), poll(inList("first mail")),
		poll(`document.getElementById("live").textContent === "live"`))

	// The race: back from a thread to the list; the list's answer is
	// held while a mail arrives and its event reaches the page.
	run("thread", chromedp.Click(chromedp.CSS(`#list li a`)), chromedp.WaitVisible(chromedp.CSS("#timeline .step")))
	hold.Store(int64(10 * time.Second))
	before := lastEvent()
	run("back to the list", goTo("#/i/shop%40shop.test"))
	select {
	case <-paused:
	case <-time.After(30 * time.Second):
		t.Fatal("the list's answer was not held")
	}
	send("arrives while the list loads")
	listed("arrives while the list loads")
	run("event seen while the answer is held", poll(fmt.Sprintf(`(document.body.dataset.lastEvent || "") !== %q`, before)))
	hold.Store(0)
	relMu.Lock()
	close(release)
	release = make(chan struct{})
	relMu.Unlock()
	run("the mail that arrived during the load is shown", poll(inList("arrives while the list loads"), chromedp.WithPollingTimeout(10*time.Second)))

	// A payment's state as it lands: pending while the node is down,
	// verified once it is up — in the open list, with no navigation.
	const tx = "0x2e8fb1fc86185752427960708abce56e55c7511c82adcf4dd9dbfe30ccffdd34"
	c.do("POST", "/v0/inboxes/"+BOB+"/messages/send", map[string]any{"to": SHOP, "text": mustJSON(map[string]any{"v": "0.2.0", "type": "pay", "id": "pay_live",
		"note": "paid live", "amount": "30000000", "token": "USDC", "chain": "base", "proof": map[string]any{"tx": tx}})}, nil)
	payRow := `[...document.querySelectorAll("#list li")].find((e) => e.textContent.includes("paid live"))`
	run("payment pending", poll(payRow+`?.querySelector(".badge.pay-pending")`, chromedp.WithPollingTimeout(30*time.Second)))
	node.SetDown(false)
	run("payment verified, live", poll(payRow+`?.querySelector(".badge.pay-verified")`, chromedp.WithPollingTimeout(60*time.Second)))
	if got := browserValue(t, ctx, "verified badge", chromedp.Steps(), chromedp.Evaluate[[]string](`(() => {
		const b = `+payRow+`.querySelector(".badge.pay-verified");
		return [b.textContent, b.querySelector("[data-href]")?.dataset.href || "", `+payRow+`.querySelector(".money").textContent];
	})()`)); got[0] != "Paid: the chain shows the money payment verified tx ↗" || got[1] != "https://basescan.org/tx/"+tx || got[2] != "30 USDC on base" {
		t.Errorf("verified payment in the list: %q", got)
	}

	// 200 navigations, mail at random moments.
	n := webNavigations()
	start := time.Now()
	for i := range n {
		switch i % 3 {
		case 0:
			run("to a thread", chromedp.Click(chromedp.CSS(`#list li a`)), chromedp.WaitVisible(chromedp.CSS("#timeline .step")))
		case 1:
			run("to bob's inbox", goTo("#/i/bob%40buyer.test"), poll(`location.hash === "#/i/bob%40buyer.test" && document.getElementById("list") !== null`))
		}
		hold.Store(int64(rand.N(400 * time.Millisecond)))
		subject := fmt.Sprintf("live %d", i)
		done := make(chan struct{})
		go func() {
			defer close(done)
			time.Sleep(rand.N(500 * time.Millisecond))
			send(subject)
		}()
		if i%3 == 2 {
			// A tap on the current inbox loads it again.
			run("tap the current inbox", chromedp.Click(chromedp.CSS(`#inboxes a[href="#/i/shop%40shop.test"]`)))
		} else {
			run("to the list", goTo("#/i/shop%40shop.test"))
		}
		<-done
		run(fmt.Sprintf("navigation %d: %q shown", i, subject), poll(inList(subject), chromedp.WithPollingTimeout(15*time.Second)))
	}
	t.Logf("%d navigations with mail arriving at random moments: none lost (%v)", n, time.Since(start).Round(time.Second))
	mu.Lock()
	defer mu.Unlock()
	for _, p := range problems {
		t.Errorf("browser: %s", p)
	}
}
