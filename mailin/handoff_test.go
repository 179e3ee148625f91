package mailin

import (
	"context"
	"encoding/json"
	"github.com/envelopd/envelopd/store"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestHandoffExecRetriedUntilItSucceeds(t *testing.T) {
	ts := startServer(t, SMTPConfig{}, func(p *Pipeline) { p.Handoff = []string{"exec"} })
	ts.deliver(t, "../testdata/flows/replay/01-pay.eml")
	dir := t.TempDir()
	// Fails the first time, then writes the message JSON to out.json.
	cmd := `test -f ` + dir + `/tried || { touch ` + dir + `/tried; exit 3; }; cat > ` + dir + `/out.json`
	h := &Handoff{Store: ts.store, Target: "exec", Deliver: ExecDeliver(cmd, 10*time.Second),
		MinBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond}
	ctx := context.Background()
	if n, err := h.RunOnce(ctx); n != 1 || err != nil {
		t.Fatalf("first round: %d deliveries, %v", n, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "out.json")); err == nil {
		t.Fatal("the failing exec wrote its output")
	}
	time.Sleep(10 * time.Millisecond)
	if n, err := h.RunOnce(ctx); n != 1 || err != nil {
		t.Fatalf("retry round: %d deliveries, %v", n, err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "out.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		ID     int64  `json:"id"`
		Type   string `json:"type"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal(b, &v); err != nil || v.ID != 1 || v.Type != "pay" || v.Status != "accepted" {
		t.Errorf("exec got %s (%v)", b, err)
	}
	time.Sleep(10 * time.Millisecond)
	if n, _ := h.RunOnce(ctx); n != 0 {
		t.Errorf("a delivered message was handed off again (%d)", n)
	}
}

func TestHandoffWebhookSigned(t *testing.T) {
	var calls atomic.Int32
	var gotSig, gotTS, gotID string
	var gotBody []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.WriteHeader(503)
			return
		}
		gotSig, gotTS, gotID = r.Header.Get("Envelopd-Signature"), r.Header.Get("Envelopd-Timestamp"), r.Header.Get("Envelopd-Event-Id")
		gotBody, _ = io.ReadAll(r.Body)
	}))
	defer srv.Close()
	ts := startServer(t, SMTPConfig{}, func(p *Pipeline) { p.Handoff = []string{"webhook"} })
	ts.deliver(t, "../testdata/flows/replay/01-pay.eml")
	h := &Handoff{Store: ts.store, Target: "webhook", Deliver: WebhookDeliver(srv.Client(), srv.URL, "s3cret"),
		MinBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond}
	ctx := context.Background()
	h.RunOnce(ctx)
	time.Sleep(10 * time.Millisecond)
	h.RunOnce(ctx)
	if calls.Load() != 2 {
		t.Fatalf("webhook called %d times, want 2 (503 then 200)", calls.Load())
	}
	if want := "t=" + gotTS + ",v1=" + WebhookSignature("s3cret", gotTS, gotBody); gotSig != want {
		t.Errorf("signature %q, want %q", gotSig, want)
	}
	if !strings.HasPrefix(gotID, "evt_") || !strings.Contains(string(gotBody), `"type":"pay"`) {
		t.Errorf("event id %q body %s", gotID, gotBody)
	}
}

func TestPipelineHandlerCalledAfterCommit(t *testing.T) {
	type call struct {
		id     int64
		status string
		typ    string
	}
	var calls []call
	var ts *testServer
	ts = startServer(t, SMTPConfig{}, func(p *Pipeline) {
		p.Handler = HandlerFunc(func(ctx context.Context, a *Analysis, out store.Outcome) error {
			// Already durable: the store can read it back.
			if _, err := ts.store.Message(ctx, out.ID); err != nil {
				t.Errorf("handler ran before message %d was readable: %v", out.ID, err)
			}
			calls = append(calls, call{out.ID, out.Status, a.Result.Type})
			return nil
		})
	})
	ts.deliver(t, "../testdata/flows/replay/01-pay.eml")
	ts.deliver(t, "../testdata/flows/replay/01-pay.eml") // redelivery: no call
	ts.deliver(t, "../testdata/flows/replay/02-pay-same-proof.eml")
	if len(calls) != 2 || calls[0].status != "accepted" || calls[1].status != "duplicate" ||
		calls[0].typ != "pay" || calls[1].typ != "pay" || calls[1].id <= calls[0].id {
		t.Errorf("handler calls %v, want an accepted PAY then a duplicate PAY", calls)
	}
}
