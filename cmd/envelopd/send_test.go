package main

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/envelopd/envelopd/dkim"
	"github.com/envelopd/envelopd/message"
	"github.com/envelopd/envelopd/parse"
	"github.com/envelopd/envelopd/store"
)

const cliData = "../../testdata/mailout/cli/"

// capture is an in-process SMTP server on loopback that keeps what it gets.
type capture struct {
	mu   sync.Mutex
	msgs [][]byte
	Addr string
}

type captureSession struct {
	c *capture
}

func (s *captureSession) Mail(string, *smtp.MailOptions) error { return nil }
func (s *captureSession) Rcpt(string, *smtp.RcptOptions) error { return nil }
func (s *captureSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.c.mu.Lock()
	s.c.msgs = append(s.c.msgs, b)
	s.c.mu.Unlock()
	return nil
}
func (s *captureSession) Reset()        {}
func (s *captureSession) Logout() error { return nil }

func startCapture(t *testing.T) *capture {
	c := &capture{}
	srv := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return &captureSession{c}, nil }))
	srv.Domain = "mx.lab.test"
	srv.MaxMessageBytes = 1 << 20
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	srv.ErrorLog = log.New(io.Discard, "", 0)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.Addr = l.Addr().String()
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return c
}

func (c *capture) last(t *testing.T, n int) []byte {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.msgs) != n {
		t.Fatalf("capture server holds %d messages, want %d", len(c.msgs), n)
	}
	return c.msgs[n-1]
}

// dkimSetup writes an Ed25519 key for domain and the static key file that
// verifies it.
func dkimSetup(t *testing.T, dir, domain string) (keyFile string, v *dkim.Verifier) {
	k, err := dkim.GenerateKey("ed25519")
	if err != nil {
		t.Fatal(err)
	}
	pemb, err := dkim.MarshalKeyPEM(k)
	if err != nil {
		t.Fatal(err)
	}
	keyFile = filepath.Join(dir, domain+".pem")
	if err := os.WriteFile(keyFile, pemb, 0o600); err != nil {
		t.Fatal(err)
	}
	line, err := dkim.TXTRecord(domain, "ed1", k.Public())
	if err != nil {
		t.Fatal(err)
	}
	r := dkim.NewStaticResolver()
	name, txt, _ := strings.Cut(line, " ")
	r.Add(name, txt)
	return keyFile, &dkim.Verifier{Resolver: r}
}

func verifyDKIM(t *testing.T, v *dkim.Verifier, raw []byte) {
	t.Helper()
	res, err := v.Verify(context.Background(), raw)
	if err != nil || len(res) != 1 || !dkim.AllPass(res) {
		t.Fatalf("DKIM: %+v %v", res, err)
	}
}

// TestSendOrderReplyFulfill is the README walk-through: Alice composes a
// PAY, sends an ORDER; the worker's envelopd stores it and replies FULFILL;
// both mails are DKIM-signed, thread, and show in the queue and the thread.
func TestSendOrderReplyFulfill(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	srv := startCapture(t)
	aliceKey, aliceV := dkimSetup(t, dir, "alice.test")
	workerKey, workerV := dkimSetup(t, dir, "example.test")
	aliceDB, workerDB := filepath.Join(dir, "alice.db"), filepath.Join(dir, "worker.db")
	smtpURL := "smtp://" + srv.Addr

	// compose prints a signed PAY that parses back valid.
	code, out, errs := runCmd(t, "", "compose", "--from", "alice@alice.test", "--to", "friend@example.test",
		"--type", "PAY", "--note", "Dinner split", "--json", cliData+"pay.json",
		"--dkim-key", aliceKey, "--dkim-selector", "ed1", "--dkim-domain", "alice.test")
	if code != 0 {
		t.Fatalf("compose: %d %s", code, errs)
	}
	r := parse.Parse([]byte(out), parse.Options{})
	if !r.Valid || r.Type != "pay" || r.Subject != "PAY | Dinner split" {
		t.Fatalf("composed PAY: valid=%v type=%q subject=%q %v", r.Valid, r.Type, r.Subject, r.Errors)
	}
	verifyDKIM(t, aliceV, []byte(out))

	// send: the ORDER is queued, delivered and stored in Alice's thread.
	code, out, errs = runCmd(t, "", "send", "--db", aliceDB, "--smtp-url", smtpURL, "--format", "json",
		"--from", "Alice <alice@alice.test>", "--to", "worker@example.test", "--type", "ORDER", "--note", "Review PR #417",
		"--json", cliData+"order.json", "--dkim-key", aliceKey, "--dkim-selector", "ed1", "--dkim-domain", "alice.test")
	if code != 0 {
		t.Fatalf("send: %d %s %s", code, out, errs)
	}
	var sent sendResult
	if err := json.Unmarshal([]byte(out), &sent); err != nil {
		t.Fatalf("send output %q: %v", out, err)
	}
	if sent.Status != "sent" || sent.Type != "order" || sent.EnvelopayID != "ord_4vJ9" || len(sent.Recipients) != 1 ||
		sent.Recipients[0].Rcpt != "worker@example.test" || sent.Recipients[0].Attempts != 1 {
		t.Fatalf("send result %+v", sent)
	}
	orderRaw := srv.last(t, 1)
	verifyDKIM(t, aliceV, orderRaw)

	// The worker's envelopd receives the ORDER (as serve would store it).
	wst, err := store.OpenSQLite(ctx, workerDB)
	if err != nil {
		t.Fatal(err)
	}
	a := message.Analyze(ctx, orderRaw, message.AnalyzeOptions{Verifier: aliceV})
	oc, err := wst.Ingest(ctx, message.Incoming(a, orderRaw, store.DirIn))
	if err != nil || oc.Status != store.StatusAccepted {
		t.Fatalf("ingest ORDER: %+v %v", oc, err)
	}
	wst.Close()

	// reply: FULFILL threads under the ORDER with order_ref filled.
	code, out, errs = runCmd(t, "", "reply", strconv.FormatInt(oc.ID, 10), "--type", "FULFILL", "--note", "Approved with 2 comments",
		"--json", cliData+"fulfill.json", "--db", workerDB, "--smtp-url", smtpURL, "--format", "json",
		"--dkim-key", workerKey, "--dkim-selector", "ed1", "--dkim-domain", "example.test")
	if code != 0 {
		t.Fatalf("reply: %d %s %s", code, out, errs)
	}
	fulRaw := srv.last(t, 2)
	verifyDKIM(t, workerV, fulRaw)
	fr := parse.Parse(fulRaw, parse.Options{})
	var body map[string]any
	json.Unmarshal(fr.Body, &body)
	if !fr.Valid || fr.Type != "fulfill" || body["order_ref"] != "ord_4vJ9" ||
		!slices.Equal(fr.InReplyTo, []string{sent.MessageID}) || !slices.Equal(fr.References, []string{sent.MessageID}) ||
		!slices.Equal(fr.To, []string{"alice@alice.test"}) || !slices.Equal(fr.From, []string{"worker@example.test"}) {
		t.Fatalf("FULFILL: valid=%v type=%s body=%s irt=%v refs=%v from=%v to=%v", fr.Valid, fr.Type, fr.Body, fr.InReplyTo, fr.References, fr.From, fr.To)
	}

	// The worker's thread holds both directions; the queue shows the send.
	wst, err = store.OpenSQLite(ctx, workerDB)
	if err != nil {
		t.Fatal(err)
	}
	thread, err := wst.Thread(ctx, sent.MessageID)
	wst.Close()
	if err != nil || len(thread) != 2 || thread[0].Direction != store.DirIn || thread[1].Direction != store.DirOut ||
		thread[1].Type != "fulfill" || thread[0].ThreadID != thread[1].ThreadID {
		t.Fatalf("thread: %+v %v", thread, err)
	}
	code, out, _ = runCmd(t, "", "queue", "--json", "--db", workerDB)
	var q store.QueueEntry
	if code != 0 || strings.Count(out, "\n") != 1 || json.Unmarshal([]byte(out), &q) != nil ||
		q.Kind != "send" || len(q.Recipients) != 1 || q.Recipients[0].State != "sent" || q.Recipients[0].Rcpt != "alice@alice.test" ||
		!strings.Contains(out, `"next_attempt_at":null`) {
		t.Fatalf("queue --json: %d %q", code, out)
	}
	code, out, _ = runCmd(t, "", "queue", "--db", workerDB)
	if code != 0 || !strings.Contains(out, "alice@alice.test") || !strings.Contains(out, "sent") {
		t.Fatalf("queue: %d %q", code, out)
	}
}

func TestSendCommandErrors(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "e.db")
	if st, err := store.OpenSQLite(context.Background(), db); err != nil {
		t.Fatal(err)
	} else {
		st.Close()
	}
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"refused", []string{"send", "--db", db, "--from", "a@alice.test", "--to", "b@example.test", "--type", "PAY", "--json", cliData + "pay-missing-proof.json"}, 1, "missing_field (proof)"},
		{"compose refused", []string{"compose", "--from", "a@alice.test", "--to", "b@example.test", "--type", "REFUND"}, 1, "unknown_type"},
		{"bad url", []string{"send", "--db", db, "--smtp-url", "http://x", "--from", "a@alice.test", "--to", "b@example.test", "--type", "WHICH"}, 2, "scheme must be smtps or smtp"},
		{"password in url", []string{"send", "--db", db, "--smtp-url", "smtp://u:hunter2@mail.example.test", "--from", "a@alice.test", "--to", "b@example.test", "--type", "WHICH"}, 2, "not in the url"},
		{"bad format", []string{"send", "--db", db, "--format", "xml", "--from", "a@alice.test", "--to", "b@example.test", "--type", "WHICH"}, 2, "--format"},
		{"queue retry missing", []string{"queue", "retry", "999", "--db", db}, 1, "not found"},
		{"queue drop bad id", []string{"queue", "drop", "x", "--db", db}, 2, "bad id"},
		{"reply missing", []string{"reply", "12345", "--type", "FULFILL", "--db", db}, 2, "not found"},
		{"reply no id", []string{"reply", "--type", "FULFILL", "--db", db}, 2, "usage"},
		{"negative submit timeout", []string{"serve", "--db", db, "--smtp", "127.0.0.1:0", "--submit-timeout", "-1s"}, 2, "--submit-timeout must not be negative"},
		{"oops-from off the signing domains", []string{"serve", "--db", db, "--smtp", "127.0.0.1:0", "--oops-from", "x@elsewhere.test"}, 2, "--oops-from x@elsewhere.test is not at a signing domain"},
		{"negative oops limit", []string{"serve", "--db", db, "--smtp", "127.0.0.1:0", "--oops-rate-per-hour", "-1"}, 2, "must not be negative"},
		{"bad --dns", []string{"serve", "--db", db, "--smtp", "127.0.0.1:0", "--dns", "host:port"}, 2, "--dns: authdns: bad server address"},
		{"arc-trust without sender auth", []string{"serve", "--db", db, "--smtp", "127.0.0.1:0", "--sender-auth=false", "--arc-trust", "list.test"}, 2, "need --sender-auth"},
		{"arc-seal without relay", []string{"serve", "--db", db, "--smtp", "127.0.0.1:0", "--arc-seal"}, 2, "--arc-seal need --relay"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errs := runCmd(t, "", tc.args...)
			if code != tc.code || !strings.Contains(errs, tc.stderr) || strings.Contains(errs, "hunter2") {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, errs, tc.code, tc.stderr)
			}
		})
	}
}

// TestSendQueuesWithoutSmarthost: without --smtp-url the message is only
// queued (pending) for serve/poll, and queue drop gives it up.
func TestSendQueuesWithoutSmarthost(t *testing.T) {
	db := filepath.Join(t.TempDir(), "q.db")
	code, out, errs := runCmd(t, "", "send", "--db", db, "--format", "json", "--from", "a@alice.test", "--to", "b@example.test", "--type", "WHICH")
	var res sendResult
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Status != "pending" || !strings.Contains(errs, "queued only") {
		t.Fatalf("send: %d %q %q", code, out, errs)
	}
	if code, out, _ := runCmd(t, "", "queue", "drop", strconv.FormatInt(res.QueueID, 10), "--db", db); code != 0 || !strings.Contains(out, "dropped") {
		t.Fatalf("drop: %d %q", code, out)
	}
	code, out, _ = runCmd(t, "", "queue", "--json", "--state", "dropped", "--db", db)
	var q store.QueueEntry
	if code != 0 || json.Unmarshal([]byte(out), &q) != nil || q.ID != res.QueueID || q.Recipients[0].State != "dropped" {
		t.Fatalf("queue: %d %q", code, out)
	}
}
