package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/envelopd/envelopd/internal/pgtest"
)

// TestPostgresHTTPAPI: `envelopd serve --db postgres://… --http` serves
// the HTTP API (and /mcp) from Postgres end to end: a key made by
// `envelopd apikey create` on the same database, two inboxes, a send
// delivered locally (relay mode), the lists, the thread, the raw bytes
// with their DKIM-Signature, and an idempotent replay. Then the
// reference shop's urllib calls (testdata/api/shop.py) when python3 is
// there (required under ENVELOPD_INTEROP=1). It skips without Postgres
// and fails under ENVELOPD_INTEROP=1 when none can be started.
func TestPostgresHTTPAPI(t *testing.T) {
	dsn := pgtest.Schema(t)
	srv := startAPIServerDB(t, dsn)
	call := func(method, path string, body any, hdr map[string]string, out any) int {
		t.Helper()
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, _ := http.NewRequest(method, srv.url+path, rd)
		req.Header.Set("Authorization", "Bearer "+srv.key)
		req.Header.Set("Content-Type", "application/json")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		if out != nil {
			if p, ok := out.(*[]byte); ok {
				*p = data
			} else if err := json.Unmarshal(data, out); err != nil {
				t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, data, err)
			}
		}
		if resp.StatusCode >= 300 && resp.StatusCode != 404 {
			t.Logf("%s %s: %d %s", method, path, resp.StatusCode, data)
		}
		return resp.StatusCode
	}
	q := url.PathEscape

	// Inboxes; a second create with the same client_id is the first.
	var shop, buyer struct {
		InboxID string `json:"inbox_id"`
	}
	if c := call("POST", "/v0/inboxes", map[string]string{"username": "store", "client_id": "c1"}, nil, &shop); c != 200 || shop.InboxID != "store@shop.test" {
		t.Fatalf("create inbox: %d %+v", c, shop)
	}
	if c := call("POST", "/v0/inboxes", map[string]string{"username": "store", "client_id": "c1"}, nil, &shop); c != 200 || shop.InboxID != "store@shop.test" {
		t.Fatalf("create inbox again (client_id): %d %+v", c, shop)
	}
	if c := call("POST", "/v0/inboxes", map[string]string{"username": "alice", "domain": "buyer.test"}, nil, &buyer); c != 200 || buyer.InboxID != "alice@buyer.test" {
		t.Fatalf("create inbox: %d %+v", c, buyer)
	}
	var inboxes struct {
		Count int `json:"count"`
	}
	if c := call("GET", "/v0/inboxes", nil, nil, &inboxes); c != 200 || inboxes.Count != 2 {
		t.Fatalf("list inboxes: %d count %d, want 2", c, inboxes.Count)
	}

	// Send (with an Idempotency-Key), delivered locally to the buyer.
	order := `{"v":"0.2.0","type":"order","id":"ord_pg","task":{"description":"The Encrypted Commons, epub"}}`
	sendBody := map[string]any{"to": shop.InboxID, "subject": "ORDER | The Encrypted Commons", "text": order}
	var sent, again struct {
		MessageID string `json:"message_id"`
		ThreadID  string `json:"thread_id"`
	}
	idem := map[string]string{"Idempotency-Key": "pg-1"}
	if c := call("POST", "/v0/inboxes/"+q(buyer.InboxID)+"/messages/send", sendBody, idem, &sent); c != 200 || !strings.HasPrefix(sent.MessageID, "<") {
		t.Fatalf("send: %d %+v", c, sent)
	}
	if c := call("POST", "/v0/inboxes/"+q(buyer.InboxID)+"/messages/send", sendBody, idem, &again); c != 200 || again != sent {
		t.Fatalf("send replayed with its Idempotency-Key: %d %+v, want %+v", c, again, sent)
	}
	if c := call("POST", "/v0/inboxes/"+q(buyer.InboxID)+"/messages/send", map[string]any{"to": shop.InboxID, "subject": "other", "text": "x"}, idem, nil); c != 409 && c != 422 {
		t.Errorf("same Idempotency-Key, another body: %d, want 409/422", c)
	}

	type msg struct {
		MessageID string   `json:"message_id"`
		ThreadID  string   `json:"thread_id"`
		Subject   string   `json:"subject"`
		Labels    []string `json:"labels"`
		Envelopay struct {
			Type  string `json:"type"`
			Valid bool   `json:"valid"`
		} `json:"envelopay"`
	}
	var list struct {
		Count    int   `json:"count"`
		Messages []msg `json:"messages"`
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		list.Messages = nil
		if c := call("GET", "/v0/inboxes/"+q(shop.InboxID)+"/messages", nil, nil, &list); c != 200 {
			t.Fatalf("list messages: %d", c)
		}
		if list.Count > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if list.Count != 1 || list.Messages[0].MessageID != sent.MessageID || list.Messages[0].Envelopay.Type != "order" ||
		!list.Messages[0].Envelopay.Valid || !strings.Contains(strings.Join(list.Messages[0].Labels, " "), "received") {
		t.Fatalf("the shop's messages: %+v, want the ORDER %s once, received", list, sent.MessageID)
	}
	var sentList struct {
		Count int `json:"count"`
	}
	if c := call("GET", "/v0/inboxes/"+q(buyer.InboxID)+"/messages?labels=sent", nil, nil, &sentList); c != 200 || sentList.Count != 1 {
		t.Errorf("the buyer's sent messages: %d count %d, want 1 (the replay sent nothing)", c, sentList.Count)
	}

	// The thread, org-wide and per inbox.
	var threads struct {
		Count   int `json:"count"`
		Threads []struct {
			ThreadID string `json:"thread_id"`
		} `json:"threads"`
	}
	if c := call("GET", "/v0/inboxes/"+q(shop.InboxID)+"/threads", nil, nil, &threads); c != 200 || threads.Count != 1 {
		t.Fatalf("threads: %d %+v", c, threads)
	}
	var thread struct {
		ThreadID     string `json:"thread_id"`
		MessageCount int    `json:"message_count"`
		Messages     []msg  `json:"messages"`
	}
	if c := call("GET", "/v0/inboxes/"+q(shop.InboxID)+"/threads/"+q(threads.Threads[0].ThreadID), nil, nil, &thread); c != 200 ||
		len(thread.Messages) != 1 || thread.Messages[0].Subject != "ORDER | The Encrypted Commons" {
		t.Fatalf("get thread: %d %+v", c, thread)
	}
	if c := call("GET", "/v0/threads", nil, nil, &threads); c != 200 || threads.Count != 2 {
		t.Errorf("org-wide threads: %d count %d, want 2 (the buyer's and the shop's)", c, threads.Count)
	}

	// Raw: the exact stored bytes, DKIM-signed by the buyer's domain.
	var raw struct {
		Size        int    `json:"size"`
		DownloadURL string `json:"download_url"`
	}
	if c := call("GET", "/v0/inboxes/"+q(shop.InboxID)+"/messages/"+q(sent.MessageID)+"/raw", nil, nil, &raw); c != 200 || raw.DownloadURL == "" {
		t.Fatalf("raw: %d %+v", c, raw)
	}
	var eml []byte
	if c := call("GET", "/v0/inboxes/"+q(shop.InboxID)+"/messages/"+q(sent.MessageID)+"/raw?format=raw", nil, nil, &eml); c != 200 {
		t.Fatalf("raw bytes: %d", c)
	}
	head, _, _ := bytes.Cut(eml, []byte("\r\n\r\n"))
	if len(eml) != raw.Size || !bytes.HasPrefix(eml, []byte("DKIM-Signature:")) || !bytes.Contains(head, []byte("d=buyer.test")) {
		t.Fatalf("raw: %d bytes (size %d): %.200q", len(eml), raw.Size, eml)
	}
	if c := call("GET", "/v0/inboxes/"+q(shop.InboxID)+"/messages/"+q("<nope@x>"), nil, nil, nil); c != 404 {
		t.Errorf("unknown message: %d, want 404", c)
	}

	// /mcp on the same server and store: the tools are listed.
	var rpc []byte
	init := map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-06-18", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "pgtest", "version": "1"}}}
	if c := call("POST", "/mcp", init, map[string]string{"Accept": "application/json, text/event-stream"}, &rpc); c != 200 || !bytes.Contains(rpc, []byte("envelopd")) {
		t.Errorf("/mcp initialize: %d %s", c, rpc)
	}

	// The reference shop's urllib calls (testdata/api/shop.py) on a
	// fresh schema.
	if _, err := exec.LookPath("python3"); err != nil {
		if os.Getenv("ENVELOPD_INTEROP") == "1" {
			t.Fatalf("python3: %v", err)
		}
		return
	}
	t.Run("shop.py", func(t *testing.T) {
		srv := startAPIServerDB(t, pgtest.Schema(t))
		script, _ := filepath.Abs("../../testdata/api/shop.py")
		cmd := exec.Command("python3", script)
		cmd.Env = append(os.Environ(), "ENVELOPD_API_URL="+srv.url, "ENVELOPD_API_KEY="+srv.key)
		out, err := cmd.CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "ok" {
			t.Fatalf("shop.py on Postgres: %v\n%s", err, out)
		}
	})
}
