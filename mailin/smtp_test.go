package mailin

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/store"
)

// testServer is an envelopd SMTP server on 127.0.0.1:0 over a temp store.
type testServer struct {
	addr  string
	store *store.SQLite
	srv   *SMTPServer
	p     *Pipeline
}

func startServer(t *testing.T, cfg SMTPConfig, tweak func(p *Pipeline)) *testServer {
	t.Helper()
	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, filepath.Join(t.TempDir(), "envelopd.db"))
	if err != nil {
		t.Fatal(err)
	}
	p := &Pipeline{Store: st}
	if tweak != nil {
		tweak(p)
	}
	if p.Store == store.Store(st) {
		p.Store = settlingStore{st, p}
	}
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	srv, err := NewSMTPServer(cfg, p)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	t.Cleanup(func() {
		srv.Close()
		st.Close()
	})
	return &testServer{addr: srv.Addr().String(), store: st, srv: srv, p: p}
}

// settlingStore is the test server's store: each ingest that owes a
// courtesy OOPS is followed by a pass of the owed-OOPS worker, as serve's
// worker woken by the commit does, so that a test reads the OOPS queued.
type settlingStore struct {
	*store.SQLite
	p *Pipeline
}

func (s settlingStore) Ingest(ctx context.Context, in *store.Incoming) (store.Outcome, error) {
	out, err := s.SQLite.Ingest(ctx, in)
	if err == nil && out.OOPS != nil && out.OOPS.Pending {
		if _, err := (&OOPSWorker{Pipeline: s.p, Store: s.SQLite}).RunOnce(ctx); err != nil {
			return out, err
		}
	}
	return out, err
}

// send delivers one message over a fresh SMTP session and returns the
// server's final reply (code and text) or the error.
func send(t *testing.T, addr, from string, to []string, msg []byte) (int, string, error) {
	t.Helper()
	c, err := smtp.Dial(addr)
	if err != nil {
		return 0, "", err
	}
	defer c.Close()
	if err := c.Hello("client.test"); err != nil {
		return 0, "", err
	}
	if err := c.Mail(from, nil); err != nil {
		return smtpCode(err), err.Error(), err
	}
	for _, r := range to {
		if err := c.Rcpt(r, nil); err != nil {
			return smtpCode(err), err.Error(), err
		}
	}
	w, err := c.Data()
	if err != nil {
		return smtpCode(err), err.Error(), err
	}
	if _, err := w.Write(msg); err != nil {
		return 0, "", err
	}
	resp, err := w.CloseWithResponse()
	if err != nil {
		return smtpCode(err), err.Error(), err
	}
	c.Quit()
	return 250, resp.StatusText, nil
}

func smtpCode(err error) int {
	var se *smtp.SMTPError
	if errors.As(err, &se) {
		return se.Code
	}
	return 0
}

func readEML(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// deliver sends a testdata file from its From to its To and expects 250.
func (ts *testServer) deliver(t *testing.T, path string) string {
	t.Helper()
	code, text, err := send(t, ts.addr, "sender@client.test", []string{"rcpt@server.test"}, readEML(t, path))
	if err != nil || code != 250 {
		t.Fatalf("%s: got %d %q %v, want 250", path, code, text, err)
	}
	return text
}

func (ts *testServer) all(t *testing.T) []store.Message {
	t.Helper()
	msgs, err := ts.store.Messages(context.Background(), store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

func codes(ps protocols.Problems) string {
	var s []string
	for _, p := range ps {
		s = append(s, string(p.Code))
	}
	return strings.Join(s, ",")
}

func TestSMTPStatuses(t *testing.T) {
	ts := startServer(t, SMTPConfig{}, nil)
	tests := []struct {
		file, status, errs string
	}{
		{"../testdata/flows/replay/01-pay.eml", store.StatusAccepted, ""},
		{"../testdata/flows/replay/02-pay-same-proof.eml", store.StatusDuplicate, "duplicate_proof"},
		{"../testdata/flows/replay/03-pay-same-id.eml", store.StatusDuplicate, "duplicate_id"},
		{"../testdata/flows/exchange/01-offer.eml", store.StatusAccepted, ""},
		{"../testdata/flows/exchange/02-accept-short.eml", store.StatusQuarantined, "amount_mismatch"},
		{"../testdata/flows/exchange/03-accept.eml", store.StatusAccepted, ""},
	}
	for i, tc := range tests {
		text := ts.deliver(t, tc.file)
		msgs := ts.all(t)
		if len(msgs) != i+1 {
			t.Fatalf("%s: %d messages stored, want %d", tc.file, len(msgs), i+1)
		}
		m := msgs[i]
		if m.Status != tc.status || codes(m.Errors) != tc.errs {
			t.Errorf("%s: status %s errors %q, want %s %q", tc.file, m.Status, codes(m.Errors), tc.status, tc.errs)
		}
		if want := fmt.Sprintf("stored as %d", m.ID); !strings.Contains(text, want) {
			t.Errorf("%s: reply %q does not name the stored id (%s)", tc.file, text, want)
		}
	}
}

func TestSMTPRedeliveryStoredOnce(t *testing.T) {
	ts := startServer(t, SMTPConfig{}, func(p *Pipeline) { p.Handoff = []string{"test"} })
	first := ts.deliver(t, "../testdata/flows/replay/01-pay.eml")
	second := ts.deliver(t, "../testdata/flows/replay/01-pay.eml")
	if len(ts.all(t)) != 1 {
		t.Fatalf("stored %d messages, want 1", len(ts.all(t)))
	}
	if !strings.Contains(second, "already stored") || strings.Contains(first, "already") {
		t.Errorf("replies %q then %q", first, second)
	}
	ds, err := ts.store.ClaimDeliveries(context.Background(), "test", time.Now(), time.Minute, 10)
	if err != nil || len(ds) != 1 {
		t.Fatalf("hand-off log has %d entries (%v), want 1", len(ds), err)
	}
}

func TestSMTPRacingProofExactlyOneWins(t *testing.T) {
	ts := startServer(t, SMTPConfig{}, nil)
	const n = 8
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			msg := fmt.Sprintf("From: erin@payer.test\r\nTo: frank@payee.test\r\nSubject: PAY | race %d\r\n"+
				"Message-ID: <race-%d@payer.test>\r\n\r\n"+
				`{"v":"0.2.0","type":"pay","id":"pay_race_%d","amount":"1","token":"USDC","chain":"base","proof":{"tx":"0xrace"}}`+"\r\n", i, i, i)
			if code, text, err := send(t, ts.addr, "erin@payer.test", []string{"frank@payee.test"}, []byte(msg)); code != 250 {
				t.Errorf("session %d: %d %s %v", i, code, text, err)
			}
		}()
	}
	wg.Wait()
	accepted, dup := 0, 0
	for _, m := range ts.all(t) {
		switch {
		case m.Status == store.StatusAccepted:
			accepted++
		case m.Status == store.StatusDuplicate && codes(m.Errors) == "duplicate_proof":
			dup++
		}
	}
	if accepted != 1 || dup != n-1 {
		t.Errorf("accepted %d, duplicate_proof %d; want 1 and %d", accepted, dup, n-1)
	}
}

func TestSMTPFirstContactFlowIsOneThread(t *testing.T) {
	ts := startServer(t, SMTPConfig{}, nil)
	files, _ := filepath.Glob("../testdata/flows/first-contact-unpaid/*.eml")
	if len(files) != 6 {
		t.Fatalf("want the six-mail flow, found %d files", len(files))
	}
	for _, f := range files {
		ts.deliver(t, f)
	}
	msgs := ts.all(t)
	for _, m := range msgs {
		if m.Status != store.StatusAccepted {
			t.Errorf("%s: %s %v", m.MessageID, m.Status, m.Errors)
		}
		if m.ThreadID != msgs[0].ThreadID {
			t.Errorf("%s (%s) in thread %q, want %q", m.MessageID, m.Type, m.ThreadID, msgs[0].ThreadID)
		}
	}
	th, err := ts.store.Thread(context.Background(), "ord_4vJ9")
	if err != nil || len(th) != 6 {
		t.Fatalf("Thread(ord_4vJ9): %d messages, %v; want 6", len(th), err)
	}
	var types []string
	for _, m := range th {
		types = append(types, m.Type)
	}
	if got := strings.Join(types, ","); got != "which,methods,order,invoice,pay,fulfill" {
		t.Errorf("thread order %s", got)
	}
}

func TestSMTPOversizeIsRejectedAndNotStored(t *testing.T) {
	ts := startServer(t, SMTPConfig{MaxMessageBytes: 4096}, nil)
	big := "From: a@x.test\r\nTo: b@y.test\r\nSubject: PAY\r\n\r\n" + strings.Repeat("0123456789abcdef\r\n", 1000)
	code, _, _ := send(t, ts.addr, "a@x.test", []string{"b@y.test"}, []byte(big))
	if code != 552 {
		t.Errorf("oversize DATA answered %d, want 552", code)
	}
	if n := len(ts.all(t)); n != 0 {
		t.Errorf("%d messages stored after an oversize DATA, want 0", n)
	}
}

func TestSMTPBareLineEndsRejected(t *testing.T) {
	ts := startServer(t, SMTPConfig{}, nil)
	// The classic smuggling sequences (<LF>.<LF>, <CR><LF>.<LF>, <LF>.<CR><LF>)
	// and a plain bare LF (every other position:
	// TestSMTPBareLineEndAnsweredAtOnce).
	for _, body := range []string{"line one\nline two\r\n", "smuggled\n.\nMAIL FROM:<x@y>\r\n",
		"smuggled\r\n.\nMAIL FROM:<x@y>\r\n", "smuggled\n.\r\nMAIL FROM:<x@y>\r\n", "bare\rCR\r\n"} {
		c, err := net.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		script := "EHLO c.test\r\nMAIL FROM:<a@x.test>\r\nRCPT TO:<b@y.test>\r\nDATA\r\n" +
			"From: a@x.test\r\nSubject: WHICH\r\n\r\n" + body + ".\r\nQUIT\r\n"
		c.Write([]byte(script))
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		var buf bytes.Buffer
		buf.ReadFrom(c)
		c.Close()
		if !strings.Contains(buf.String(), "550 5.6.0") || !strings.Contains(buf.String(), `every line must end with CRLF ("\r\n")`) {
			t.Errorf("body %q: server said %q, want a 550 5.6.0 naming CRLF", body, buf.String())
		}
	}
	if n := len(ts.all(t)); n != 0 {
		t.Errorf("%d messages stored, want 0", n)
	}
}

// TestSMTPBareLineEndAnsweredAtOnce: a bare CR or LF anywhere in DATA —
// the first line, a header, the last line, the line before the dot, after
// a leading dot — is answered 550 5.6.0 as soon as the body ends
// (CRLF.CRLF), never left to the read timeout, and the session stays in
// step: the next message in it is stored. Each script goes in one write
// and one byte at a time.
func TestSMTPBareLineEndAnsweredAtOnce(t *testing.T) {
	t.Parallel()
	ts := startServer(t, SMTPConfig{ReadTimeout: time.Minute}, nil)
	const hdr = "From: a@x.test\r\nSubject: WHICH\r\n\r\n"
	for _, c := range []struct{ name, data string }{
		{"first line, bare CR", "From: a@x.test\r\r\nSubject: WHICH\r\n\r\nhello\r\n"},
		{"first line, bare LF", "From: a@x.test\nSubject: WHICH\r\n\r\nhello\r\n"},
		{"first byte, bare CR", "\r\r\n" + hdr + "hello\r\n"},
		{"header, bare CR inside", "From: a@x.test\r\nSubject: WH\rICH\r\n\r\nhello\r\n"},
		{"header, bare CR at its end", "From: a@x.test\r\nSubject: WHICH\r\r\n\r\nhello\r\n"},
		{"header, bare LF", "From: a@x.test\r\nSubject: WHICH\n\r\nhello\r\n"},
		{"last line, bare CR (CR added to CRLF text)", hdr + "hello\r\r\n"},
		{"last line, two bare CRs", hdr + "hello\r\r\r\n"},
		{"last line, bare LF", hdr + "hello\n\r\n"},
		{"before the dot, a lone CR line", hdr + "hello\r\n\r\r\n"},
		{"before the dot, a lone LF line", hdr + "hello\r\n\n\r\n"},
		{"leading dot, bare CR", hdr + ".\r\r\n"},
		{"leading dot, bare CR, text", hdr + ".\rx\r\n"},
		{"every line", "From: a@x.test\r\r\nSubject: WHICH\r\r\n\r\r\nhello\r\r\n"},
	} {
		for _, bytewise := range []bool{false, true} {
			conn, err := net.Dial("tcp", ts.addr)
			if err != nil {
				t.Fatal(err)
			}
			conn.SetDeadline(time.Now().Add(10 * time.Second))
			r := bufio.NewReader(conn)
			// reply reads one (possibly multi-line) reply and returns its last line.
			reply := func() string {
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return "read: " + err.Error()
					}
					if len(line) < 4 || line[3] != '-' {
						return strings.TrimRight(line, "\r\n")
					}
				}
			}
			write := func(s string) {
				if !bytewise {
					conn.Write([]byte(s))
					return
				}
				for i := range len(s) {
					conn.Write([]byte{s[i]})
				}
			}
			reply() // greeting
			for _, cmd := range []string{"EHLO c.test", "MAIL FROM:<a@x.test>", "RCPT TO:<b@y.test>", "DATA"} {
				write(cmd + "\r\n")
				reply()
			}
			write(c.data + ".\r\n")
			if got := reply(); !strings.HasPrefix(got, "550 5.6.0 ") {
				t.Errorf("%s (bytewise %v): %q, want 550 5.6.0 at once", c.name, bytewise, got)
			}
			write("MAIL FROM:<a@x.test>\r\nRCPT TO:<b@y.test>\r\nDATA\r\n")
			reply()
			reply()
			reply()
			write(hdr + "clean\r\n.\r\n")
			if got := reply(); !strings.HasPrefix(got, "250 ") {
				t.Errorf("%s (bytewise %v): the next message in the session: %q, want 250", c.name, bytewise, got)
			}
			write("QUIT\r\n")
			if got := reply(); !strings.HasPrefix(got, "221 ") {
				t.Errorf("%s (bytewise %v): QUIT: %q, want 221", c.name, bytewise, got)
			}
			conn.Close()
		}
	}
	// Only the clean messages were stored; the first is stored, the
	// others are redeliveries of the same bytes.
	if n := len(ts.all(t)); n != 1 {
		t.Errorf("%d messages stored, want 1 (the clean one)", n)
	}
}

func TestSMTPTooManyRecipients(t *testing.T) {
	ts := startServer(t, SMTPConfig{MaxRecipients: 2}, nil)
	code, _, _ := send(t, ts.addr, "a@x.test", []string{"1@y.test", "2@y.test", "3@y.test"}, []byte("Subject: WHICH\r\n\r\n"))
	if code != 452 {
		t.Errorf("third recipient answered %d, want 452", code)
	}
}

func TestSMTPNeverAnOpenRelay(t *testing.T) {
	_, err := NewSMTPServer(SMTPConfig{Addr: "0.0.0.0:0"}, &Pipeline{})
	if !errors.Is(err, ErrOpenRelay) {
		t.Errorf("listening on all interfaces without AUTH or domains: %v, want ErrOpenRelay", err)
	}
	ts := startServer(t, SMTPConfig{AcceptDomains: []string{"server.test"}}, nil)
	code, _, _ := send(t, ts.addr, "a@x.test", []string{"b@elsewhere.test"}, []byte("Subject: WHICH\r\n\r\n"))
	if code != 550 {
		t.Errorf("relay to a foreign domain answered %d, want 550", code)
	}
	code, _, _ = send(t, ts.addr, "a@x.test", []string{"b@server.test"}, []byte("Subject: WHICH\r\n\r\n"))
	if code != 250 {
		t.Errorf("mail to an accepted domain answered %d, want 250", code)
	}
}

func TestSMTPMaxConnections(t *testing.T) {
	ts := startServer(t, SMTPConfig{MaxConnections: 2}, nil)
	var open []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, c)
		line := make([]byte, 3)
		c.Read(line)
	}
	c, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var buf bytes.Buffer
	buf.ReadFrom(c)
	if !strings.HasPrefix(buf.String(), "421 ") {
		t.Errorf("third connection got %q, want 421", buf.String())
	}
	for _, c := range open {
		c.Close()
	}
}

// failingStore makes every Ingest fail: SMTP must answer 451, not 250.
type failingStore struct{ store.Ingester }

func (failingStore) Ingest(context.Context, *store.Incoming) (store.Outcome, error) {
	return store.Outcome{}, errors.New("disk full")
}

func TestSMTPStoreFailureIs451(t *testing.T) {
	ts := startServer(t, SMTPConfig{}, func(p *Pipeline) { p.Store = failingStore{p.Store} })
	code, _, _ := send(t, ts.addr, "a@x.test", []string{"b@y.test"}, readEML(t, "../testdata/flows/replay/01-pay.eml"))
	if code != 451 {
		t.Errorf("store failure answered %d, want 451", code)
	}
}

func TestSMTPPerIPConnectionRate(t *testing.T) {
	ts := startServer(t, SMTPConfig{MaxConnRate: 1}, nil) // burst of 2
	var greetings []string
	for range 3 {
		c, err := net.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		line := make([]byte, 4)
		n, _ := io.ReadFull(c, line)
		greetings = append(greetings, string(line[:n]))
		c.Close()
	}
	if got := strings.Join(greetings, "|"); got != "220 |220 |421 " {
		t.Errorf("greetings %q, want two 220 then 421", got)
	}
}

func TestSMTPLineTooLongInData(t *testing.T) {
	ts := startServer(t, SMTPConfig{MaxLineLength: 1000}, nil)
	code, _, _ := send(t, ts.addr, "a@x.test", []string{"b@y.test"}, []byte("Subject: WHICH\r\n\r\n"+strings.Repeat("x", 5000)+"\r\n"))
	if code != 500 {
		t.Errorf("a 5000-octet line answered %d, want 500", code)
	}
	if n := len(ts.all(t)); n != 0 {
		t.Errorf("%d messages stored, want 0", n)
	}
}
