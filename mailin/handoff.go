package mailin

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/envelopd/envelopd/internal/webhook"
	"github.com/envelopd/envelopd/message"
	"github.com/envelopd/envelopd/runner"
	"github.com/envelopd/envelopd/store"
)

// DeliverFunc hands one message (message.View JSON) to the agent. ev.ID is stable
// across retries so the receiver can deduplicate (delivery is at least once).
type DeliverFunc func(ctx context.Context, ev Event, payload []byte) error

// Event names one hand-off attempt of a stored message.
type Event struct {
	ID        string // "evt_DELIVERY_TARGET", stable across retries
	MessageID int64  // the stored message's row id ("id" in its message.View JSON)
	Target    string // "exec", "webhook"
	Attempt   int    // 1 for the first attempt
}

// HandoffStore is what a Handoff uses of the store: the hand-off log and
// the stored messages it hands off.
type HandoffStore interface {
	store.HandoffLog
	store.Reader
}

// Handoff delivers accepted messages to one target from the store's
// delivery log: at least once, in order of arrival, retried with capped
// exponential backoff and jitter, resumed after a restart.
type Handoff struct {
	Store   HandoffStore
	Target  string // "exec", "webhook", …: the name Ingest logged
	Deliver DeliverFunc
	// MinBackoff and MaxBackoff bound the retry delay (defaults 1 s, 1 h).
	MinBackoff, MaxBackoff time.Duration
	// DeliverTimeout bounds one delivery attempt (default
	// DefaultDeliverTimeout); an attempt that has started runs to the end
	// or to this timeout even when the context given to Run or RunOnce
	// ends.
	DeliverTimeout time.Duration
	// Lease is how long a claimed delivery is hidden from other workers
	// (default 5 min, at least twice DeliverTimeout): a worker killed
	// mid-delivery leaves its claim, and the delivery is retried when the
	// lease ends (at least once).
	Lease time.Duration
	Poll  time.Duration
	// Changed, when set, returns a channel closed when new messages may
	// have been stored (store MessagesChanged: on any node, for
	// Postgres), so that Run wakes at once instead of at the next Poll.
	Changed func() <-chan struct{}
	// Metrics, when set, counts claims and outcomes as "handoff_TARGET".
	Metrics *runner.Metrics
	Logger  *slog.Logger
}

// Run delivers until ctx ends, looking for due deliveries every Poll
// (default 250 ms) when idle.
func (h *Handoff) Run(ctx context.Context) error {
	return h.loop().Run(ctx)
}

// loop is the runner over h's deliveries: one at a time, in order of
// arrival.
func (h *Handoff) loop() *runner.Loop[store.Delivery] {
	poll := h.Poll
	if poll <= 0 {
		poll = 250 * time.Millisecond
	}
	return &runner.Loop[store.Delivery]{Name: "handoff_" + h.Target, Worker: handoffJobs{h}, Batch: 32, Parallel: 1,
		Interval: poll, Wake: h.Changed, Metrics: h.Metrics, Logger: h.Logger}
}

// claimLease is how long a claimed delivery is hidden from other workers;
// a started delivery is bounded by DeliverTimeout, which is shorter.
const claimLease = 5 * time.Minute

// lease is Lease, or claimLease, and never less than twice the delivery
// timeout, so that a claim outlives the attempt it covers.
func (h *Handoff) lease() time.Duration {
	l := h.Lease
	if l <= 0 {
		l = claimLease
	}
	return max(l, 2*h.deliverTimeout())
}

func (h *Handoff) deliverTimeout() time.Duration {
	if h.DeliverTimeout > 0 {
		return h.DeliverTimeout
	}
	return DefaultDeliverTimeout
}

// DefaultDeliverTimeout bounds one delivery attempt when
// Handoff.DeliverTimeout is zero.
const DefaultDeliverTimeout = 2 * time.Minute

// RunOnce attempts every delivery due now and returns how many it tried.
//
// A delivery that has started is not interrupted when ctx ends: it runs to
// completion (bounded by DeliverTimeout, and by the DeliverFunc's own
// timeout) and its outcome is recorded, so shutting down never kills an
// agent mid-message. Deliveries claimed but not yet started when ctx ends
// are released, pending and due at once, for the next run.
func (h *Handoff) RunOnce(ctx context.Context) (int, error) {
	tried, _, err := h.loop().Once(ctx)
	return tried, err
}

// RunDue is RunOnce for the deliveries due at by: one whose retry falls
// due while it runs (its own failures' backoff) waits for the next run, so
// a caller looping until nothing is tried hands each delivery off at most
// once (`envelopd poll --once`).
func (h *Handoff) RunDue(ctx context.Context, by time.Time) (int, error) {
	l := h.loop()
	l.Now = func() time.Time { return by }
	tried, _, err := l.Once(ctx)
	return tried, err
}

// handoffJobs is the hand-off as a runner.Worker.
type handoffJobs struct{ h *Handoff }

// Claim leases the due deliveries; the claim is not cut short by
// cancellation (a claim committed but reported as cancelled would hide
// its deliveries for the whole lease).
func (j handoffJobs) Claim(ctx context.Context, now time.Time, limit int) ([]store.Delivery, error) {
	return j.h.Store.ClaimDeliveries(context.WithoutCancel(ctx), j.h.Target, now, j.h.lease(), limit)
}

// Attempt hands one claimed delivery to the agent and records the
// outcome: done, or pending with backoff (at least once). A started
// delivery outlives ctx.
func (j handoffJobs) Attempt(ctx context.Context, d store.Delivery) (runner.Outcome, error) {
	return j.h.deliverOne(context.WithoutCancel(ctx), d)
}

// Release puts claimed but unattempted deliveries back, due now, so the
// next run need not wait out the claim lease.
func (j handoffJobs) Release(ctx context.Context, ds []store.Delivery) {
	for _, d := range ds {
		if err := j.h.Store.DeliveryRelease(ctx, d.ID, time.Now()); err != nil {
			j.h.log().Warn("hand-off release", "target", j.h.Target, "message", d.MessageID, "err", err)
		}
	}
}

// deliverOne hands one claimed delivery to the agent and records the
// outcome: done, or pending with backoff (at least once).
func (h *Handoff) deliverOne(ctx context.Context, d store.Delivery) (runner.Outcome, error) {
	m, err := h.Store.MessageInfo(ctx, d.MessageID)
	if err != nil {
		return runner.Retried, err
	}
	payload, err := message.View(m)
	if err != nil {
		return runner.Retried, err
	}
	ev := Event{ID: fmt.Sprintf("evt_%d_%s", d.ID, h.Target), MessageID: d.MessageID, Target: h.Target, Attempt: d.Attempts}
	dctx, cancel := context.WithTimeout(ctx, h.deliverTimeout())
	err = h.Deliver(dctx, ev, payload)
	cancel()
	if err != nil {
		next := time.Now().Add(h.backoff(d.Attempts))
		h.log().Warn("hand-off failed; will retry", "target", h.Target, "message", d.MessageID, "attempt", d.Attempts, "next", next, "err", err)
		return runner.Retried, h.Store.DeliveryRetry(ctx, d.ID, next, err.Error())
	}
	return runner.Succeeded, h.Store.DeliveryDone(ctx, d.ID)
}

// backoff is the wait after the attempts-th failed hand-off: MinBackoff
// (default 1 s) doubled per attempt up to MaxBackoff (default 1 h), the
// upper half drawn at random ([d/2, d)).
func (h *Handoff) backoff(attempts int) time.Duration {
	b := runner.Backoff{Initial: h.MinBackoff, Max: h.MaxBackoff, Jitter: 0.5}
	return b.Or(time.Second, time.Hour).Delay(attempts)
}

func (h *Handoff) log() *slog.Logger {
	if h.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return h.Logger
}

// ExecDeliver runs command with sh -c per message, the message.View JSON on stdin,
// in the environment env (see ExecEnv: never envelopd's own, which holds
// its secrets; nil is an empty one, sh then uses its default PATH) plus ENVELOPD_EVENT_ID (stable across retries),
// ENVELOPD_MESSAGE_ID (the stored message's row id, "id" in the JSON, which
// `envelopd thread`, `reply` and `handoff` take) and ENVELOPD_ATTEMPT. A
// non-zero exit is a failure.
func ExecDeliver(command string, timeout time.Duration, env []string) DeliverFunc {
	return func(ctx context.Context, ev Event, payload []byte) error {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
		cmd.Stdin = bytes.NewReader(payload)
		cmd.Env = append(slices.Clip(env),
			"ENVELOPD_EVENT_ID="+ev.ID,
			"ENVELOPD_MESSAGE_ID="+strconv.FormatInt(ev.MessageID, 10),
			"ENVELOPD_ATTEMPT="+strconv.Itoa(ev.Attempt))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			tail := stderr.Bytes()
			if len(tail) > 200 {
				tail = tail[len(tail)-200:]
			}
			return fmt.Errorf("exec %q: %v: %s", command, err, bytes.TrimSpace(tail))
		}
		return nil
	}
}

// ExecEnvAllowed are the variables of envelopd's own environment an --exec
// command inherits: an allow-list, not a deny-list, because envelopd's
// environment carries secrets (ENVELOPD_SMTP_PASSWORD,
// ENVELOPD_IMAP_PASSWORD, and whatever the operator's shell holds) that
// the agent must not see. LC_* (every locale category) is allowed too.
var ExecEnvAllowed = []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR"}

// ExecSecretEnv are envelopd's own secret variables, which ExecEnv never
// passes on, even when asked to.
var ExecSecretEnv = []string{IMAPPasswordEnv, "ENVELOPD_SMTP_PASSWORD"}

// ExecEnv builds the environment of an --exec command from envelopd's own
// environ (os.Environ()): the ExecEnvAllowed variables, the variables
// named in pass (the operator's --exec-env, e.g. an API key the agent
// needs), and the fixed pairs in set (ENVELOPD_DB=…). Every other variable,
// including envelopd's own ENVELOPD_* ones, is left out. Naming a secret
// of ExecSecretEnv in pass is an error.
func ExecEnv(environ, pass, set []string) ([]string, error) {
	want := map[string]bool{}
	for _, n := range ExecEnvAllowed {
		want[n] = true
	}
	for _, n := range pass {
		if n == "" || strings.ContainsAny(n, "= ") {
			return nil, fmt.Errorf("mailin: --exec-env %q: want a variable name", n)
		}
		if slices.Contains(ExecSecretEnv, n) {
			return nil, fmt.Errorf("mailin: --exec-env %s: envelopd's own secret is never passed to the agent", n)
		}
		want[n] = true
	}
	var out []string
	for _, kv := range environ {
		k, _, ok := strings.Cut(kv, "=")
		if ok && (want[k] || strings.HasPrefix(k, "LC_")) && !slices.Contains(ExecSecretEnv, k) {
			out = append(out, kv)
		}
	}
	return append(out, set...), nil
}

// WebhookDeliver POSTs the message.View JSON to url. Headers: Envelopd-Event-Id
// (stable across retries), Envelopd-Timestamp (Unix seconds) and, when
// secret is set, Envelopd-Signature: "t=TIMESTAMP,v1=HEX" where HEX is
// HMAC-SHA256(secret, TIMESTAMP + "." + body). Any 2xx is success.
func WebhookDeliver(client *http.Client, url, secret string) DeliverFunc {
	return func(ctx context.Context, ev Event, payload []byte) error {
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		hdr := map[string]string{"Envelopd-Event-Id": ev.ID, "Envelopd-Timestamp": ts}
		if secret != "" {
			hdr["Envelopd-Signature"] = "t=" + ts + ",v1=" + WebhookSignature(secret, ts, payload)
		}
		code, err := webhook.Post(ctx, client, url, payload, hdr)
		if err != nil {
			return err
		}
		if code/100 != 2 {
			return fmt.Errorf("webhook %s: HTTP %d", url, code)
		}
		return nil
	}
}

// WebhookSignature is hex HMAC-SHA256(secret, timestamp + "." + body), for
// receivers to recompute.
func WebhookSignature(secret, timestamp string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(timestamp))
	m.Write([]byte("."))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}
