package mailin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/envelopd/envelopd/internal/hostile"
	"github.com/envelopd/envelopd/store"
)

// holdRouter accepts every recipient and holds each delivery until
// released, so a message's bytes stay in flight as long as a test wants.
type holdRouter struct {
	entered chan int // the size of each message whose delivery started
	release chan struct{}
}

func (holdRouter) Authenticate(user, pass string) error { return nil }
func (holdRouter) Rcpt(user, from, to string) error     { return nil }
func (h holdRouter) Deliver(ctx context.Context, raw []byte, meta Meta, user string) (string, error) {
	h.entered <- len(raw)
	<-h.release
	return "OK held", nil
}

// mailOf returns a mail of about n bytes (CRLF lines, ending in CRLF).
func mailOf(n int) []byte {
	b := []byte("From: a@x.test\r\nSubject: hi\r\n\r\n")
	for len(b)+100 <= n {
		b = append(b, strings.Repeat("x", 98)+"\r\n"...)
	}
	return b
}

// TestSMTPInFlightBudget: while one message holds the in-flight budget,
// DATA that does not fit gets 451 4.3.2 (no waiting configured) and is not
// delivered; once the first is done the budget is whole again.
func TestSMTPInFlightBudget(t *testing.T) {
	t.Parallel()
	h := holdRouter{entered: make(chan int, 4), release: make(chan struct{})}
	cm := &countMetrics{}
	ts := startServer(t, SMTPConfig{MaxMessageBytes: 4096, MaxInFlightBytes: 4096, InFlightWait: -1, Router: h}, func(p *Pipeline) {
		p.Metrics = cm
	})
	msg := mailOf(3000)
	first := make(chan int, 1)
	go func() {
		code, _, _ := send(t, ts.addr, "a@x.test", []string{"b@y.test"}, msg)
		first <- code
	}()
	if n := <-h.entered; n != len(msg) {
		t.Fatalf("held a %d-byte message, want %d", n, len(msg))
	}
	_, _, err := send(t, ts.addr, "a@x.test", []string{"b@y.test"}, msg)
	var se *smtp.SMTPError
	if !errors.As(err, &se) || se.Code != 451 || se.EnhancedCode != (smtp.EnhancedCode{4, 3, 2}) {
		t.Fatalf("second DATA over the budget: %v, want 451 4.3.2", err)
	}
	// Announcing the size (RFC 1870 SIZE) reserves it before any byte is
	// read: refused the same way.
	err = sendSized(ts.addr, msg)
	if !errors.As(err, &se) || se.Code != 451 || se.EnhancedCode != (smtp.EnhancedCode{4, 3, 2}) {
		t.Fatalf("DATA with SIZE over the budget: %v, want 451 4.3.2", err)
	}
	if got, _ := cm.counts(); got != 2 {
		t.Errorf("envelopd_smtp_in_flight_busy_total = %v, want 2", got)
	}
	select {
	case n := <-h.entered:
		t.Fatalf("a refused message (%d bytes) was delivered", n)
	default:
	}
	close(h.release)
	if c := <-first; c != 250 {
		t.Fatalf("first message: %d", c)
	}
	if got := ts.srv.inFlight.available(); got != 4096 {
		t.Fatalf("budget after both: %d free, want 4096", got)
	}
	if code, text, err := send(t, ts.addr, "a@x.test", []string{"b@y.test"}, msg); code != 250 {
		t.Fatalf("third DATA: %d %q %v", code, text, err)
	}
}

// TestSMTPInFlightBudgetWaits: with a wait configured, DATA that finds the
// budget full is accepted once the message holding it is done.
func TestSMTPInFlightBudgetWaits(t *testing.T) {
	t.Parallel()
	h := holdRouter{entered: make(chan int, 4), release: make(chan struct{})}
	ts := startServer(t, SMTPConfig{MaxMessageBytes: 4096, MaxInFlightBytes: 4096, InFlightWait: time.Minute, Router: h}, nil)
	msg := mailOf(3000)
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- sendSized(ts.addr, msg) }()
	}
	<-h.entered // one holds the budget; the other waits for it
	h.release <- struct{}{}
	<-h.entered
	h.release <- struct{}{}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("got %v, want 250 for both", err)
		}
	}
}

// sendSized sends msg announcing its size (MAIL FROM … SIZE=n); nil
// means 250.
func sendSized(addr string, msg []byte) error {
	c, err := smtp.Dial(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Hello("client.test"); err != nil {
		return err
	}
	if err := c.Mail("a@x.test", &smtp.MailOptions{Size: int64(len(msg))}); err != nil {
		return err
	}
	if err := c.Rcpt("b@y.test", nil); err != nil {
		return err
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write(msg); err != nil {
		return err
	}
	return w.Close()
}

// TestSMTPBudgetBelowMessageSizeRefused: a budget that could never hold
// the largest message is a configuration error.
func TestSMTPBudgetBelowMessageSizeRefused(t *testing.T) {
	t.Parallel()
	_, err := NewSMTPServer(SMTPConfig{Addr: "127.0.0.1:0", MaxMessageBytes: 4096, MaxInFlightBytes: 1000}, &Pipeline{})
	if err == nil {
		t.Fatal("accepted a budget smaller than the largest message")
	}
}

// TestLimitsQuarantineKeepsRaw: a mail past an analysis limit is stored
// quarantined with the limit's code and its raw bytes intact (nothing
// is dropped).
func TestLimitsQuarantineKeepsRaw(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		raw  []byte
		code string
	}{
		{"too-many-parts", hostile.ManyParts("p", 1500), "too_many_parts"},
		{"too-many-attachments", hostile.ManyParts("a", 120), "too_many_attachments"},
		{"json-too-deep-body", hostile.NestedBody("d", 30000), "json_too_deep"},
		{"json-too-deep-attachment", hostile.NestedAttachment("da", 3000), "json_too_deep"},
		{"json-too-large-attachment", hostile.NestedAttachment("la", 2<<20), "json_too_large"},
		{"analysis-too-large", hostile.ManyParts("o", 900), "analysis_too_large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ts := startServer(t, SMTPConfig{}, func(p *Pipeline) {
				if tc.code == "analysis_too_large" {
					p.Limits.MaxAttachments, p.Limits.MaxOutputBytes = 1000, 64<<10
				}
			})
			code, text, err := send(t, ts.addr, "a@x.test", []string{"b@y.test"}, tc.raw)
			if code != 250 {
				t.Fatalf("%d %q %v", code, text, err)
			}
			msgs, err := ts.store.Messages(context.Background(), store.Filter{WithRaw: true})
			if err != nil || len(msgs) != 1 {
				t.Fatalf("%d messages, %v", len(msgs), err)
			}
			m := msgs[0]
			if m.Status != "quarantined" || !strings.Contains(","+codes(m.Errors)+",", ","+tc.code+",") {
				t.Fatalf("status %s, errors %s; want quarantined with %s", m.Status, codes(m.Errors), tc.code)
			}
			if !bytes.Equal(m.Raw, tc.raw) {
				t.Fatalf("raw bytes changed: %d stored, %d sent", len(m.Raw), len(tc.raw))
			}
			eb, _ := json.Marshal(m.Errors)
			wb, _ := json.Marshal(m.Warnings)
			stored := len(m.Result) + len(eb) + len(wb) + len(m.DKIM)
			if max := 4*len(tc.raw) + 64<<10; stored > max {
				t.Fatalf("stored analysis %d bytes > %d", stored, max)
			}
		})
	}
}

// oddReader hands out its bytes in reads of varying length, as a TCP
// connection does.
type oddReader struct {
	b []byte
	n int
}

func (o *oddReader) Read(p []byte) (int, error) {
	if len(o.b) == 0 {
		return 0, io.EOF
	}
	o.n++
	k := min(len(p), len(o.b), 1+(o.n*7919)%40000)
	copy(p, o.b[:k])
	o.b = o.b[k:]
	return k, nil
}

// TestReadBudgetedExact: what readBudgeted returns is the stream byte for
// byte, whether it fits the first buffer, is read past the size the
// client announced, or is set aside in segments and joined at its end; the
// budget is whole again once the bytes are released.
func TestReadBudgetedExact(t *testing.T) {
	t.Parallel()
	src := make([]byte, 3<<20+12345)
	for i := range src {
		src[i] = byte(i*31 + i>>9)
	}
	for _, tc := range []struct {
		name     string
		size     int
		declared int64
	}{
		{"small", 5000, 0},
		{"one segment exactly", 1 << 20, 0},
		{"segments", len(src), 0},
		{"declared", len(src), int64(len(src))},
		{"past declared", len(src), 2 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newByteBudget(64 << 20)
			var buf bytes.Buffer
			held, err := readBudgeted(context.Background(), b, 0, tc.declared, &buf, &oddReader{b: src[:tc.size]})
			if err != nil || held != int64(tc.size) {
				t.Fatalf("readBudgeted = %d, %v; want %d, nil", held, err, tc.size)
			}
			if !bytes.Equal(buf.Bytes(), src[:tc.size]) {
				t.Fatalf("read %d bytes that differ from the %d sent", buf.Len(), tc.size)
			}
			b.release(held)
			if got := b.available(); got != 64<<20 {
				t.Errorf("budget %d after release, want %d", got, 64<<20)
			}
		})
	}
}
