package api_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/envelopd/envelopd/store"
)

func (e *env) post(key, path, idem, body string) (int, string, http.Header) {
	e.t.Helper()
	req, _ := http.NewRequest("POST", e.srv.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	if idem != "" {
		req.Header.Set("Idempotency-Key", idem)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.createInbox("shop", "shop.test")
	ctx := context.Background()
	const path = "/v0/inboxes/shop@shop.test/messages/send"
	body := `{"to":"b@buyer.test","subject":"once","text":"x"}`
	c1, r1, h1 := e.post(e.key, path, "k-1", body)
	c2, r2, h2 := e.post(e.key, path, "k-1", body)
	if c1 != 200 || c2 != 200 || r1 != r2 || h1.Get("Idempotent-Replayed") != "" || h2.Get("Idempotent-Replayed") != "true" {
		t.Errorf("repeat: %d %s / %d %s %v", c1, r1, c2, r2, h2)
	}
	if c, r, _ := e.post(e.key, path, "k-1", `{"to":"b@buyer.test","subject":"other","text":"x"}`); c != 409 || !strings.Contains(r, "IdempotencyError") {
		t.Errorf("same key, other body: %d %s", c, r)
	}
	// Keys are per API key: another key's k-1 is another request.
	if c, r, _ := e.post(e.newKey(nil), path, "k-1", body); c != 200 || r == r1 {
		t.Errorf("other API key: %d %s", c, r)
	}
	// A failed request releases its key.
	if c, _, _ := e.post(e.key, path, "k-2", `{"to":"not an address","text":"x"}`); c != 400 {
		t.Errorf("bad request: %d", c)
	}
	if c, _, _ := e.post(e.key, path, "k-2", body); c != 200 {
		t.Errorf("fixed retry with the released key: %d", c)
	}
	if c, _, _ := e.post(e.key, path, strings.Repeat("x", 300), body); c != 400 {
		t.Errorf("oversize key: %d", c)
	}
	// Concurrent requests with one key: exactly one message queued, every
	// answer is the first's or a 409.
	var wg sync.WaitGroup
	answers := make([]string, 8)
	codes := make([]int, 8)
	for i := range answers {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			codes[i], answers[i], _ = e.post(e.key, path, "k-race", `{"to":"c@buyer.test","subject":"race","text":"x"}`)
		}(i)
	}
	wg.Wait()
	first := ""
	for i := range answers {
		switch {
		case codes[i] == 409:
		case codes[i] == 200 && (first == "" || first == answers[i]):
			first = answers[i]
		default:
			t.Errorf("race answer %d: %d %s", i, codes[i], answers[i])
		}
	}
	q, err := e.st.Queue(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, x := range q {
		for _, r := range x.Recipients {
			n[r.Rcpt]++
		}
	}
	// b: k-1, the other key's k-1, k-2; c: k-race once.
	if n["b@buyer.test"] != 3 || n["c@buyer.test"] != 1 {
		t.Errorf("queued: %v", n)
	}
	// Replies take the key too.
	ms, err := e.st.Messages(ctx, store.Filter{})
	if err != nil || len(ms) == 0 {
		t.Fatal(ms, err)
	}
	rp := "/v0/inboxes/shop@shop.test/messages/" + ms[0].MessageID + "/reply"
	c1, r1, _ = e.post(e.key, rp, "r-1", `{"text":"re"}`)
	c2, r2, h2 = e.post(e.key, rp, "r-1", `{"text":"re"}`)
	if c1 != 200 || r1 != r2 || h2.Get("Idempotent-Replayed") != "true" {
		t.Errorf("reply repeat: %d %s / %d %s", c1, r1, c2, r2)
	}
}
