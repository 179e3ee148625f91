package api_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/envelopd/envelopd/api"
)

type headerNames struct {
	HeaderNames []string `json:"header_names"`
}

type validationErr struct {
	Name    string `json:"name"`
	Message string `json:"message"`
	Errors  []struct {
		Code  string `json:"code"`
		Field string `json:"field"`
	} `json:"errors"`
}

// TestWebhookHeaders: custom delivery headers are set at create and by
// updateHeaders, read back by name only (values are write-only), on the
// organisation's, the inbox's and the pod's routes; a scoped key only on
// its own webhooks; bad or reserved headers are a 400 naming them with a
// stable code, and nothing is written.
func TestWebhookHeaders(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.createInbox("a", "shop.test")
	e.createInbox("b", "shop.test")
	var w webhookObj
	if c := e.do(e.key, "POST", "/v0/webhooks", `{"url":"https://agent.test/h","inbox_ids":["a@shop.test"],"headers":{"X-Token":"s3cret value","Authorization":"Bearer t"}}`, &w); c != 200 {
		t.Fatalf("create: %d", c)
	}
	names := func(key, path string) (headerNames, int) {
		var n headerNames
		c := e.do(key, "GET", path, nil, &n)
		return n, c
	}
	if n, c := names(e.key, "/v0/webhooks/"+w.WebhookID+"/headers"); c != 200 || strings.Join(n.HeaderNames, ",") != "Authorization,X-Token" {
		t.Errorf("get headers: %d %+v", c, n)
	}
	var raw map[string]any
	e.do(e.key, "GET", "/v0/webhooks/"+w.WebhookID, nil, &raw)
	if _, ok := raw["headers"]; ok {
		t.Errorf("a webhook shows its header values: %v", raw)
	}
	// Set one (replacing case-insensitively), remove one.
	if c := e.do(e.key, "PATCH", "/v0/webhooks/"+w.WebhookID+"/headers", `{"headers":{"x-token":"new"},"remove_headers":["AUTHORIZATION"]}`, nil); c != 204 {
		t.Errorf("update headers: %d", c)
	}
	for _, p := range []string{"/v0/webhooks/", "/v0/inboxes/a@shop.test/webhooks/", "/v0/pods/envelopd/webhooks/"} {
		if n, c := names(e.key, p+w.WebhookID+"/headers"); c != 200 || strings.Join(n.HeaderNames, ",") != "x-token" {
			t.Errorf("%s…/headers after update: %d %+v", p, c, n)
		}
	}
	if _, c := names(e.key, "/v0/inboxes/b@shop.test/webhooks/"+w.WebhookID+"/headers"); c != 404 {
		t.Errorf("through another inbox: %d", c)
	}
	if _, c := names(e.key, "/v0/pods/other/webhooks/"+w.WebhookID+"/headers"); c != 404 {
		t.Errorf("through another pod: %d", c)
	}
	// A scoped key: its inbox's webhook, not another's.
	scopedA, scopedB := e.newKey([]string{"a@shop.test"}), e.newKey([]string{"b@shop.test"})
	if c := e.do(scopedA, "PATCH", "/v0/webhooks/"+w.WebhookID+"/headers", `{"headers":{"X-A":"1"}}`, nil); c != 204 {
		t.Errorf("scoped key on its webhook: %d", c)
	}
	if _, c := names(scopedB, "/v0/webhooks/"+w.WebhookID+"/headers"); c != 404 {
		t.Errorf("scoped key reads another inbox's webhook headers: %d", c)
	}
	if c := e.do(scopedB, "PATCH", "/v0/webhooks/"+w.WebhookID+"/headers", `{"headers":{"X-B":"1"}}`, nil); c != 404 {
		t.Errorf("scoped key changes another inbox's webhook headers: %d", c)
	}
	// Bad input: 400 with the code and the header named; nothing written.
	long := strings.Repeat("v", 1100)
	for _, tc := range []struct{ body, code, field string }{
		{`{"headers":{"Host":"evil.test"}}`, "reserved_header", "headers.Host"},
		{`{"headers":{"content-length":"0"}}`, "reserved_header", "headers.content-length"},
		{`{"headers":{"Content-Type":"text/plain"}}`, "reserved_header", "headers.Content-Type"},
		{`{"headers":{"Transfer-Encoding":"chunked"}}`, "reserved_header", "headers.Transfer-Encoding"},
		{`{"headers":{"Connection":"close"}}`, "reserved_header", "headers.Connection"},
		{`{"headers":{"svix-signature":"v1,x"}}`, "reserved_header", "headers.svix-signature"},
		{`{"headers":{"Webhook-Id":"1"}}`, "reserved_header", "headers.Webhook-Id"},
		{`{"headers":{"User-Agent":"x"}}`, "reserved_header", "headers.User-Agent"},
		{`{"headers":{"X-Bad Name":"1"}}`, "invalid_header_name", "headers.X-Bad Name"},
		{`{"headers":{"X-Colon:":"1"}}`, "invalid_header_name", "headers.X-Colon:"},
		{`{"headers":{"X-CRLF":"a\r\nInjected: 1"}}`, "invalid_header_value", "headers.X-CRLF"},
		{`{"headers":{"X-LF":"a\nb"}}`, "invalid_header_value", "headers.X-LF"},
		{`{"headers":{"X-NUL":"a\u0000b"}}`, "invalid_header_value", "headers.X-NUL"},
		{`{"headers":{"X-Empty":""}}`, "invalid_header_value", "headers.X-Empty"},
		{`{"headers":{"X-Space":" padded"}}`, "invalid_header_value", "headers.X-Space"},
		{`{"headers":{"X-UTF8":"é"}}`, "invalid_header_value", "headers.X-UTF8"},
		{`{"headers":{"X-Long":"` + long + `"}}`, "header_too_long", "headers.X-Long"},
		{`{"headers":{"X-Dup":"1","x-dup":"2"}}`, "duplicate_header", "headers.x-dup"},
		{`{"headers":{"X-A":"1"},"remove_headers":["x-a"]}`, "duplicate_header", "headers.X-A"},
		{`{"headers":{}}`, "invalid_field", "headers"},
		{`{}`, "invalid_field", "headers"},
	} {
		var er validationErr
		if c := e.do(e.key, "PATCH", "/v0/webhooks/"+w.WebhookID+"/headers", tc.body, &er); c != 400 || er.Name != "ValidationError" ||
			len(er.Errors) != 1 || er.Errors[0].Code != tc.code || er.Errors[0].Field != tc.field {
			t.Errorf("%.80s: %d %+v, want 400 %s %s", tc.body, c, er, tc.code, tc.field)
		}
	}
	// The bound on their number (16 by default).
	many := map[string]map[string]string{"headers": {}}
	for i := 0; i < 15; i++ {
		many["headers"]["X-H"+strings.Repeat("i", i+1)] = "1"
	}
	var er validationErr
	if c := e.do(e.key, "PATCH", "/v0/webhooks/"+w.WebhookID+"/headers", many, &er); c != 400 || er.Errors[0].Code != "too_many_headers" {
		t.Errorf("17 headers: %d %+v", c, er)
	}
	if n, _ := names(e.key, "/v0/webhooks/"+w.WebhookID+"/headers"); strings.Join(n.HeaderNames, ",") != "X-A,x-token" {
		t.Errorf("after refused updates: %+v", n)
	}
	if c := e.do(e.key, "POST", "/v0/webhooks", `{"url":"https://agent.test/h","headers":{"Host":"x"}}`, &er); c != 400 || er.Errors[0].Code != "reserved_header" {
		t.Errorf("create with a reserved header: %d %+v", c, er)
	}
	if c := e.do(e.key, "PATCH", "/v0/webhooks/wh_none/headers", `{"headers":{"X-A":"1"}}`, nil); c != 404 {
		t.Errorf("unknown webhook: %d", c)
	}
}

// TestWebhookHeadersDelivered: every delivery carries the webhook's
// custom headers, the signature still verifies, and the delivery's own
// headers are its own.
func TestWebhookHeadersDelivered(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.createInbox("a", "shop.test")
	got := make(chan http.Header, 4)
	var secret string
	verified := make(chan bool, 4)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		verified <- verifySvix(secret, r.Header, body)
		got <- r.Header.Clone()
		w.WriteHeader(204)
	}))
	defer recv.Close()
	var w webhookObj
	if c := e.do(e.key, "POST", "/v0/webhooks", map[string]any{"url": recv.URL, "event_types": []string{"message.received"},
		"headers": map[string]string{"X-Agent-Token": "tok 1", "Authorization": "Bearer abc"}}, &w); c != 200 {
		t.Fatalf("create: %d", c)
	}
	secret = w.Secret
	e.receive("hello", "a@shop.test")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if n, err := e.runOnce(ctx, &api.WebhookSender{Service: e.svc}); n != 1 || err != nil {
		t.Fatalf("run: %d %v", n, err)
	}
	h := <-got
	if !<-verified {
		t.Error("signature does not verify")
	}
	if h.Get("X-Agent-Token") != "tok 1" || h.Get("Authorization") != "Bearer abc" || h.Get("Content-Type") != "application/json" ||
		h.Get("User-Agent") != "envelopd" || !slices.Equal(h.Values("X-Agent-Token"), []string{"tok 1"}) {
		t.Errorf("delivered headers: %v", h)
	}
}
