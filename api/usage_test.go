package api_test

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/envelopd/envelopd/store"
)

type usagePoint struct {
	Timestamp time.Time `json:"timestamp"`
	Value     int64     `json:"value"`
}

// TestUsage: metrics.queryUsage counts what each inbox and the
// organisation hold at the end of each period (messages, bytes,
// threads; inboxes and the pod), per scope, for a scoped key its
// inboxes only; bad parameters are 400.
func TestUsage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.createInbox("a", "shop.test")
	e.createInbox("b", "shop.test")
	now := time.Now().UTC()
	sizes := map[string]int64{}
	in := func(subject, rcpt string, at time.Time) {
		mid := strings.ReplaceAll(subject, " ", "-") + "@buyer.test"
		raw := fmt.Sprintf("From: b@buyer.test\r\nTo: %s\r\nSubject: %s\r\nMessage-ID: <%s>\r\n\r\nbody\r\n", rcpt, subject, mid)
		if _, err := e.st.Ingest(context.Background(), &store.Incoming{Direction: store.DirIn, Raw: []byte(raw), MessageID: mid,
			Sender: "b@buyer.test", Recipients: []string{rcpt}, Subject: subject, Status: store.StatusAccepted, ReceivedAt: at}); err != nil {
			t.Fatal(err)
		}
		sizes[rcpt] += int64(len(raw))
	}
	in("old one", "a@shop.test", now.Add(-5*time.Hour))
	in("new one", "a@shop.test", now)
	in("for b", "b@shop.test", now)
	query := func(key, path string, q url.Values) (map[string][]usagePoint, int) {
		var m map[string][]usagePoint
		c := e.do(key, "GET", path+"?"+q.Encode(), nil, &m)
		return m, c
	}
	// Ten one-hour periods ending now: points at start+1h … now.
	q := url.Values{"start": {now.Add(-10 * time.Hour).Format(time.RFC3339Nano)}, "end": {now.Format(time.RFC3339Nano)}, "period": {"3600"}}
	last := func(ps []usagePoint) int64 {
		if len(ps) == 0 {
			return -1
		}
		return ps[len(ps)-1].Value
	}
	keys := func(m map[string][]usagePoint) string {
		var ks []string
		for k := range m {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		return strings.Join(ks, ",")
	}
	m, c := query(e.key, "/v0/inboxes/a@shop.test/metrics/usage", q)
	if c != 200 || keys(m) != "message_count,storage_bytes,thread_count" || len(m["message_count"]) != 10 {
		t.Fatalf("inbox a: %d %+v", c, m)
	}
	if last(m["message_count"]) != 2 || last(m["thread_count"]) != 2 || last(m["storage_bytes"]) != sizes["a@shop.test"] {
		t.Errorf("inbox a now: %+v (want 2 messages, 2 threads, %d bytes)", m, sizes["a@shop.test"])
	}
	// The old message counts from the end of its hour's period on; the
	// new one only at the last point (its hour began after the others).
	ps := m["message_count"]
	if ps[0].Value != 0 || ps[len(ps)-2].Value != 1 || !ps[len(ps)-1].Timestamp.Equal(now) || !ps[0].Timestamp.Equal(now.Add(-9*time.Hour)) {
		t.Errorf("inbox a over time: %+v", ps)
	}
	m, c = query(e.key, "/v0/metrics/usage", q)
	if c != 200 || keys(m) != "domain_count,inbox_count,message_count,pod_count,storage_bytes,thread_count" {
		t.Fatalf("organisation: %d %+v", c, m)
	}
	if last(m["message_count"]) != 3 || last(m["storage_bytes"]) != sizes["a@shop.test"]+sizes["b@shop.test"] || last(m["inbox_count"]) != 2 ||
		last(m["pod_count"]) != 1 || len(m["domain_count"]) != 0 || m["domain_count"] == nil {
		t.Errorf("organisation now: %+v", m)
	}
	if m, c := query(e.key, "/v0/pods/envelopd/metrics/usage", q); c != 200 || keys(m) != "domain_count,inbox_count,message_count,storage_bytes,thread_count" || last(m["message_count"]) != 3 {
		t.Errorf("pod: %d %+v", c, m)
	}
	// A key scoped to b counts b.
	scoped := e.newKey([]string{"b@shop.test"})
	if m, c := query(scoped, "/v0/metrics/usage", q); c != 200 || last(m["message_count"]) != 1 || last(m["inbox_count"]) != 1 ||
		last(m["storage_bytes"]) != sizes["b@shop.test"] || len(m["domain_count"]) != 0 {
		t.Errorf("scoped to b: %d %+v", c, m)
	}
	if c := e.do(scoped, "GET", "/v0/inboxes/a@shop.test/metrics/usage?"+q.Encode(), nil, nil); c != 404 {
		t.Errorf("scoped to b, inbox a: %d", c)
	}
	if c := e.do(e.key, "GET", "/v0/pods/other/metrics/usage?"+q.Encode(), nil, nil); c != 404 {
		t.Errorf("another pod: %d", c)
	}
	// Types, as the SDKs send them; descending and limit.
	q2 := url.Values{"usage_types": {`["message_count"]`}, "descending": {"true"}, "limit": {"1"}}
	if m, c := query(e.key, "/v0/metrics/usage", q2); c != 200 || keys(m) != "message_count" || len(m["message_count"]) != 1 || m["message_count"][0].Value != 3 {
		t.Errorf("one type, descending, limit 1: %d %+v", c, m)
	}
	for _, bad := range []struct{ path, q string }{
		{"/v0/metrics/usage", "usage_types=nope"},
		{"/v0/metrics/usage", "usage_types=%5B1%5D"},
		{"/v0/inboxes/a@shop.test/metrics/usage", "usage_types=inbox_count"},
		{"/v0/pods/envelopd/metrics/usage", "usage_types=pod_count"},
		{"/v0/metrics/usage", "period=0"},
		{"/v0/metrics/usage", "period=1&start=2000-01-01T00:00:00Z"},
		{"/v0/metrics/usage", "start=2026-01-02T00:00:00Z&end=2026-01-01T00:00:00Z"},
		{"/v0/metrics/usage", "descending=maybe"},
	} {
		var er struct{ Name string }
		if c := e.do(e.key, "GET", bad.path+"?"+bad.q, nil, &er); c != 400 || er.Name != "ValidationError" {
			t.Errorf("%s?%s: %d %+v", bad.path, bad.q, c, er)
		}
	}
}
