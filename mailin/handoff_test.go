package mailin

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/envelopd/envelopd/message"
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
	h := &Handoff{Store: ts.store, Target: "exec", Deliver: ExecDeliver(cmd, 10*time.Second, nil),
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
		p.Handler = HandlerFunc(func(ctx context.Context, a *message.Analysis, out store.Outcome) error {
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

// TestHandoffStartedDeliveryOutlivesCancel: cancelling the worker context
// (poll exiting, serve on SIGTERM) while an exec runs lets the exec finish
// and records its outcome: done on success, pending for a retry on
// failure (at least once). Nothing is killed.
func TestHandoffStartedDeliveryOutlivesCancel(t *testing.T) {
	for _, tc := range []struct {
		name     string
		exit     string // shell statement ending the exec
		wantDone bool
	}{
		{"succeeds", "exit 0", true},
		{"fails", "exit 3", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, SMTPConfig{}, func(p *Pipeline) { p.Handoff = []string{"exec"} })
			ts.deliver(t, "../testdata/flows/replay/01-pay.eml")
			dir := t.TempDir()
			started, finished := filepath.Join(dir, "started"), filepath.Join(dir, "finished")
			cmd := `touch ` + started + `; sleep 0.5; cat > ` + finished + `; ` + tc.exit
			h := &Handoff{Store: ts.store, Target: "exec", Deliver: ExecDeliver(cmd, 10*time.Second, nil),
				MinBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond, Poll: time.Hour}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- h.Run(ctx) }()
			deadline := time.Now().Add(10 * time.Second)
			for {
				if _, err := os.Stat(started); err == nil {
					break
				}
				if time.Now().After(deadline) {
					cancel()
					t.Fatal("exec never started")
				}
				time.Sleep(5 * time.Millisecond)
			}
			cancel()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("Run did not return after cancel")
			}
			b, err := os.ReadFile(finished)
			if err != nil {
				t.Fatalf("the exec was killed when the worker stopped: %v", err)
			}
			if !strings.Contains(string(b), `"type":"pay"`) {
				t.Errorf("exec read %q, want the message JSON", b)
			}
			time.Sleep(10 * time.Millisecond) // past the retry backoff
			again := &Handoff{Store: ts.store, Target: "exec", Deliver: func(context.Context, Event, []byte) error { return nil }}
			n, err := again.RunOnce(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{true: 0, false: 1}[tc.wantDone]; n != want {
				t.Errorf("next run handed off %d, want %d (done=%v)", n, want, tc.wantDone)
			}
		})
	}
}

// TestHandoffCancelledBeforeStartReleases: a delivery claimed but not yet
// started when the context ends is not attempted and stays due at once,
// not hidden for the claim lease.
func TestHandoffCancelledBeforeStartReleases(t *testing.T) {
	ts := startServer(t, SMTPConfig{}, func(p *Pipeline) { p.Handoff = []string{"exec"} })
	ts.deliver(t, "../testdata/flows/replay/01-pay.eml")
	ctx, cancel := context.WithCancel(context.Background())
	var calls atomic.Int32
	h := &Handoff{Store: ts.store, Target: "exec", Deliver: func(context.Context, Event, []byte) error {
		calls.Add(1)
		return nil
	}}
	// Cancelled after the claim: wrap the store so the claim succeeds and
	// the context ends right after.
	h.Store = cancelAfterClaim{Store: ts.store, cancel: cancel}
	if n, err := h.RunOnce(ctx); n != 0 || err == nil {
		t.Fatalf("cancelled run: %d tried, %v; want 0 and the context error", n, err)
	}
	if calls.Load() != 0 {
		t.Fatal("a delivery started after the context ended")
	}
	h.Store = ts.store
	if n, err := h.RunOnce(context.Background()); n != 1 || err != nil || calls.Load() != 1 {
		t.Fatalf("next run: %d tried, %v, %d calls; want the released delivery at once", n, err, calls.Load())
	}
}

type cancelAfterClaim struct {
	store.Store
	cancel func()
}

func (c cancelAfterClaim) ClaimDeliveries(ctx context.Context, target string, now time.Time, lease time.Duration, limit int) ([]store.Delivery, error) {
	ds, err := c.Store.ClaimDeliveries(ctx, target, now, lease, limit)
	c.cancel()
	return ds, err
}

// TestHandoffRunDueOncePerRun: a delivery that fails while RunDue runs is
// not tried again in the same pass, however soon its retry falls due;
// RunOnce in the same loop would try it again.
func TestHandoffRunDueOncePerRun(t *testing.T) {
	ts := startServer(t, SMTPConfig{}, func(p *Pipeline) { p.Handoff = []string{"exec"} })
	ts.deliver(t, "../testdata/flows/replay/01-pay.eml")
	var calls atomic.Int32
	h := &Handoff{Store: ts.store, Target: "exec", MinBackoff: time.Nanosecond, MaxBackoff: time.Nanosecond,
		Deliver: func(context.Context, Event, []byte) error {
			calls.Add(1)
			time.Sleep(time.Millisecond) // past the retry's due time
			return errors.New("agent down")
		}}
	start := time.Now()
	for range 5 {
		if n, err := h.RunDue(context.Background(), start); err != nil || n == 0 {
			break
		}
	}
	if got := calls.Load(); got != 1 {
		t.Fatalf("RunDue passes tried the delivery %d times, want 1", got)
	}
	if n, err := h.RunOnce(context.Background()); n != 1 || err != nil || calls.Load() != 2 {
		t.Fatalf("the next run: %d tried, %v, %d calls; want the retry", n, err, calls.Load())
	}
}
