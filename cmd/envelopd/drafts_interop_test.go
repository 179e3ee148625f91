package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/envelopd/envelopd/internal/pgtest"
	"github.com/envelopd/envelopd/store"
)

// httpAddr waits for n's "http api" log line and returns its base URL.
func (n *pgNode) httpAddr(t *testing.T) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, l := range strings.Split(n.logs(), "\n") {
			var v struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal([]byte(l), &v) == nil && v.Msg == "http api" && v.Addr != "" {
				return "http://" + v.Addr
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no http api address: %s", n.logs())
	return ""
}

// apiCall makes one API request with key and decodes the answer into out.
func apiCall(t *testing.T, key, method, url string, body any, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %d %s", method, url, resp.StatusCode, b)
		}
	}
	return resp.StatusCode
}

// TestInteropPostgresScheduledDrafts: two `envelopd serve --http` nodes
// on one Postgres database. Drafts scheduled 2 s ahead are each sent
// exactly once although the node that claims them is killed with
// SIGKILL around their send time (the other node is stopped meanwhile,
// so the killed one is the only claimer); a draft whose lease is held
// by a node that died before sending it is sent by the survivor once the
// lease ends.
func TestInteropPostgresScheduledDrafts(t *testing.T) {
	interop(t)
	ctx := context.Background()
	dsn := pgtest.Schema(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "envelopd")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "apikey", "create", "--db", dsn).Output()
	if err != nil {
		t.Fatalf("apikey create: %v", err)
	}
	key := strings.TrimSpace(string(out))
	flags := []string{"--relay", "--domain", "shop.test", "--domain", "buyer.test", "--sign-local", "--http", "127.0.0.1:0", "--submit-timeout", "2s"}
	n1, n2 := startPGNode(t, bin, dsn, flags...), startPGNode(t, bin, dsn, flags...)
	u1, u2 := n1.httpAddr(t), n2.httpAddr(t)
	for _, in := range []map[string]string{{"username": "shop", "domain": "shop.test"}, {"username": "bob", "domain": "buyer.test"}} {
		if c := apiCall(t, key, "POST", u1+"/v0/inboxes", in, nil); c != 200 {
			t.Fatalf("create inbox: %d", c)
		}
	}
	const n = 4
	due := time.Now().Add(2 * time.Second)
	for i := range n {
		var d struct {
			DraftID string `json:"draft_id"`
		}
		if c := apiCall(t, key, "POST", u1+"/v0/inboxes/shop@shop.test/drafts", map[string]any{"to": "bob@buyer.test",
			"subject": fmt.Sprintf("scheduled %d", i), "text": "later", "send_at": due.UTC().Format(time.RFC3339Nano)}, &d); c != 200 {
			t.Fatalf("create draft: %d", c)
		}
	}
	// A node that claimed a draft and died before sending it: the lease
	// (3 s) is held in the database, nobody sends it before it ends.
	st, err := store.OpenPostgres(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now().UTC()
	held := store.Draft{ID: "drf_held0000000000", Inbox: "shop@shop.test", Request: []byte(`{"to":["bob@buyer.test"],"subject":"held","text":"x"}`),
		SendAt: now.Add(-time.Second), Status: store.DraftScheduled, CreatedAt: now, UpdatedAt: now}
	if _, _, err := st.CreateDraft(ctx, held); err != nil {
		t.Fatal(err)
	}
	if c, err := st.ClaimDueDrafts(ctx, time.Now(), 3*time.Second, 10); err != nil || len(c) != 1 {
		t.Fatalf("claim as the dead node: %v %v", c, err)
	}
	// Node 2 is stopped: node 1 alone claims the scheduled drafts; it is
	// killed just after they fall due (its 1 s tick claims them within
	// that second).
	n2.cmd.Process.Signal(syscall.SIGSTOP)
	time.Sleep(time.Until(due.Add(1100 * time.Millisecond)))
	n1.kill()
	n2.cmd.Process.Signal(syscall.SIGCONT)

	subjects := func() map[string]int {
		var l struct {
			Messages []struct {
				Subject string `json:"subject"`
			} `json:"messages"`
		}
		apiCall(t, key, "GET", u2+"/v0/inboxes/bob@buyer.test/messages?labels=received&limit=100", nil, &l)
		got := map[string]int{}
		for _, m := range l.Messages {
			got[m.Subject]++
		}
		return got
	}
	deadline := time.Now().Add(90 * time.Second)
	for len(subjects()) < n+1 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(3 * time.Second) // a second send would have arrived by now
	got := subjects()
	want := map[string]int{"held": 1}
	for i := range n {
		want[fmt.Sprintf("scheduled %d", i)] = 1
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("received %v, want each once: %v\nnode 1: %s\nnode 2: %s", got, want, n1.logs(), n2.logs())
	}
	var l struct {
		Count int `json:"count"`
	}
	if apiCall(t, key, "GET", u2+"/v0/drafts", nil, &l); l.Count != 0 {
		t.Errorf("%d drafts left", l.Count)
	}
	q, err := st.Queue(ctx, "")
	if err != nil || len(q) != n+1 {
		t.Errorf("queue: %d entries (want %d) %v", len(q), n+1, err)
	}
}
