package api_test

import (
	"fmt"
	"net/url"
	"os"
	"strconv"
	"testing"
)

// benchN is the store size of the list benchmarks
// (ENVELOPD_API_BENCH_N, default 20000).
func benchN() int {
	if n, err := strconv.Atoi(os.Getenv("ENVELOPD_API_BENCH_N")); err == nil && n > 0 {
		return n
	}
	return 20000
}

// BenchmarkAPI: list messages and threads (first page and a deep page,
// reached by its page token) and get a thread, over HTTP, on a store of
// benchN messages in one inbox.
func BenchmarkAPI(b *testing.B) {
	e := newEnv(b, false)
	n := benchN()
	e.ingest(n, "shop@shop.test")
	deep := func(kind string) string {
		// Walk to about 90% of the list to get a deep page's token.
		tok := ""
		for walked := 0; walked < n*9/10; walked += 1000 {
			var l struct {
				NextPageToken string `json:"next_page_token"`
			}
			p := "/v0/inboxes/shop@shop.test/" + kind + "?limit=1000"
			if tok != "" {
				p += "&page_token=" + url.QueryEscape(tok)
			}
			e.do(e.key, "GET", p, nil, &l)
			tok = l.NextPageToken
		}
		return tok
	}
	var first struct {
		Threads []struct {
			ThreadID string `json:"thread_id"`
		} `json:"threads"`
	}
	e.do(e.key, "GET", "/v0/inboxes/shop@shop.test/threads?limit=1", nil, &first)
	cases := []struct{ name, path string }{
		{"messages/first", "/v0/inboxes/shop@shop.test/messages?limit=50"},
		{"messages/deep", "/v0/inboxes/shop@shop.test/messages?limit=50&page_token=" + url.QueryEscape(deep("messages"))},
		{"threads/first", "/v0/inboxes/shop@shop.test/threads?limit=50"},
		{"threads/deep", "/v0/inboxes/shop@shop.test/threads?limit=50&page_token=" + url.QueryEscape(deep("threads"))},
		{"thread/get", "/v0/inboxes/shop@shop.test/threads/" + first.Threads[0].ThreadID},
	}
	for _, c := range cases {
		b.Run(fmt.Sprintf("%s/n=%d", c.name, n), func(b *testing.B) {
			for b.Loop() {
				if code := e.do(e.key, "GET", c.path, nil, nil); code != 200 {
					b.Fatalf("%s: %d", c.path, code)
				}
			}
		})
	}
}

// BenchmarkSend: POST …/messages/send from 10 concurrent clients (each
// message composed, DKIM-signed, checked, stored and queued durably);
// /webhooks: the same with another tenant's webhooks at their limits
// (32, each with 16 event types), which a send must not pay for: the
// fan-out is not in its transaction.
func BenchmarkSend(b *testing.B) {
	b.Run("plain", func(b *testing.B) { benchSend(b, 0) })
	b.Run("webhooks", func(b *testing.B) { benchSend(b, 32) })
}

func benchSend(b *testing.B, hooks int) {
	e := newEnv(b, false)
	e.createInbox("shop", "shop.test")
	types := make([]string, 16)
	for i := range types {
		types[i] = fmt.Sprintf("message.x%d", i)
	}
	types[0] = "message.sent"
	tenant := e.newKey(nil)
	for range hooks {
		if code := e.do(tenant, "POST", "/v0/webhooks", map[string]any{"url": "http://127.0.0.1:9/", "event_types": types}, nil); code != 200 {
			b.Fatalf("webhook: %d", code)
		}
	}
	b.ResetTimer()
	b.SetParallelism(5) // × GOMAXPROCS clients
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			body := fmt.Sprintf(`{"to":"c%d@buyer.test","subject":"Invoice %d","text":"total 42.00"}`, i%100, i)
			if code := e.do(e.key, "POST", "/v0/inboxes/shop@shop.test/messages/send", body, nil); code != 200 {
				b.Errorf("send: %d", code)
				return
			}
		}
	})
}
