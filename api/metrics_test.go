package api_test

import (
	"net/url"
	"testing"
	"time"
)

// TestMetrics: metrics.query counts the event log per type and period;
// an inbox's and a scoped key's metrics are their inboxes'; bad
// parameters are 400.
func TestMetrics(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.createInbox("a", "shop.test")
	e.createInbox("b", "shop.test")
	for _, from := range []string{"a", "a", "b"} {
		if c := e.do(e.key, "POST", "/v0/inboxes/"+from+"@shop.test/messages/send", map[string]any{"to": "x@buyer.test", "subject": "s", "text": "t"}, nil); c != 200 {
			t.Fatalf("send: %d", c)
		}
	}
	type bucket struct {
		Timestamp time.Time `json:"timestamp"`
		Count     int64     `json:"count"`
	}
	total := func(key, path string) (map[string][]bucket, int) {
		var m map[string][]bucket
		q := url.Values{"event_types": {"message.sent", "message.bounced"}, "period": {"1d"},
			"start": {time.Now().Add(-48 * time.Hour).UTC().Format(time.RFC3339)}, "end": {time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}}
		c := e.do(key, "GET", path+"?"+q.Encode(), nil, &m)
		return m, c
	}
	sum := func(bs []bucket) (n int64) {
		for _, b := range bs {
			n += b.Count
		}
		return n
	}
	if m, c := total(e.key, "/v0/metrics"); c != 200 || sum(m["message.sent"]) != 3 || m["message.bounced"] == nil || len(m["message.bounced"]) != 0 || len(m) != 2 {
		t.Errorf("organisation: %d %+v", c, m)
	}
	if m, c := total(e.key, "/v0/inboxes/a@shop.test/metrics"); c != 200 || sum(m["message.sent"]) != 2 {
		t.Errorf("inbox a: %d %+v", c, m)
	}
	if m, c := total(e.newKey([]string{"b@shop.test"}), "/v0/pods/envelopd/metrics"); c != 200 || sum(m["message.sent"]) != 1 {
		t.Errorf("scoped to b: %d %+v", c, m)
	}
	// The TypeScript SDK's metrics.queryEvents path.
	if m, c := total(e.key, "/v0/inboxes/a@shop.test/metrics/events"); c != 200 || sum(m["message.sent"]) != 2 {
		t.Errorf("inbox a, metrics/events: %d %+v", c, m)
	}
	if m, c := total(e.key, "/v0/pods/envelopd/metrics/events"); c != 200 || sum(m["message.sent"]) != 3 {
		t.Errorf("pod, metrics/events: %d %+v", c, m)
	}
	var arr map[string][]bucket
	if c := e.do(e.key, "GET", "/v0/metrics?event_types="+url.QueryEscape(`["message.sent"]`), nil, &arr); c != 200 || sum(arr["message.sent"]) != 3 || len(arr) != 1 {
		t.Errorf("event_types as a JSON array (the Python SDK's form): %d %+v", c, arr)
	}
	for _, q := range []string{"event_types=message.nope", "event_types=%5B1%5D", "period=1y", "period=0s", "start=yesterday", "start=2026-01-02T00:00:00Z&end=2026-01-01T00:00:00Z", "period=1s&start=2000-01-01T00:00:00Z"} {
		var er struct{ Name string }
		if c := e.do(e.key, "GET", "/v0/metrics?"+q, nil, &er); c != 400 || er.Name != "ValidationError" {
			t.Errorf("%s: %d %+v", q, c, er)
		}
	}
}
