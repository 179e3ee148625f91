package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestInteropAPIAbuse: a real `serve --http` under the attacks of the
// security table that need real processes and real concurrency:
//   - 30 wrong keys at once from one address (127.0.0.2): past the lockout
//     threshold (10) they are answered 429, and a valid key from another
//     address (127.0.0.1) is served;
//   - `envelopd apikey revoke`, run as another process, closes the key's
//     open websocket (1008) and disables its webhook, which `envelopd
//     webhook list --json` shows with its owner.
func TestInteropAPIAbuse(t *testing.T) {
	interop(t)
	srv := startAPIServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req := func(c *http.Client, method, path, key string, body any) (int, []byte) {
		t.Helper()
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = strings.NewReader(string(b))
		}
		r, _ := http.NewRequestWithContext(ctx, method, srv.url+path, rd)
		if key != "" {
			r.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := c.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	if c, b := req(http.DefaultClient, "POST", "/v0/inboxes", srv.key, map[string]string{"username": "bob", "domain": "shop.test"}); c != 200 {
		t.Fatalf("create inbox: %d %s", c, b)
	}

	// Concurrent guessing from 127.0.0.2.
	other := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext,
		MaxIdleConnsPerHost: 30}}
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	for i := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, _ := req(other, "GET", "/v0/inboxes", fmt.Sprintf("ek_%012x_%s", i, strings.Repeat("A", 43)), nil)
			mu.Lock()
			codes[c]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if codes[401] > 10 || codes[401]+codes[429] != 30 {
		t.Errorf("30 wrong keys at once: %v, want at most 10×401, the rest 429", codes)
	}
	if c, b := req(http.DefaultClient, "GET", "/v0/inboxes", srv.key, nil); c != 200 {
		t.Errorf("valid key from another address during the lockout: %d %s", c, b)
	}

	// Revocation by another process.
	out, err := exec.Command(srv.bin, "apikey", "create", "--db", srv.db, "--inbox", "bob@shop.test", "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var bob struct{ Key, ID string }
	if err := json.Unmarshal(out, &bob); err != nil {
		t.Fatal(err)
	}
	if c, b := req(http.DefaultClient, "POST", "/v0/webhooks", bob.Key, map[string]any{"url": "http://127.0.0.1:9/"}); c != 200 {
		t.Fatalf("create webhook: %d %s", c, b)
	}
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.url, "http")+"/v0?api_key="+url.QueryEscape(bob.Key), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	if err := ws.Write(ctx, websocket.MessageText, []byte(`{"type":"subscribe"}`)); err != nil {
		t.Fatal(err)
	}
	if _, b, err := ws.Read(ctx); err != nil || !strings.Contains(string(b), "subscribed") {
		t.Fatalf("subscribe: %s %v", b, err)
	}
	if out, err := exec.Command(srv.bin, "apikey", "revoke", bob.ID, "--db", srv.db).CombinedOutput(); err != nil {
		t.Fatalf("apikey revoke: %v %s", err, out)
	}
	for {
		_, _, err := ws.Read(ctx)
		if err != nil {
			if websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
				t.Errorf("websocket after revocation: %v, want close 1008", err)
			}
			break
		}
	}
	out, err = exec.Command(srv.bin, "webhook", "list", "--json", "--db", srv.db).Output()
	if err != nil {
		t.Fatal(err)
	}
	var w webhookRow
	if err := json.Unmarshal(out, &w); err != nil || w.State != "disabled" || w.DisabledReason != "key_revoked" || w.KeyID != bob.ID {
		t.Errorf("webhook list after revocation: %s %v", out, err)
	}
}
