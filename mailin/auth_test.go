package mailin

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/envelopd/envelopd/authguard"
	"github.com/envelopd/envelopd/authguard/authmetrics"
	"github.com/envelopd/envelopd/store"
)

// fakeClock is the guard's injected clock: Sleep advances Now and records
// each delay, so the throttle is tested without sleeping.
type fakeClock struct {
	mu    sync.Mutex
	now   time.Time
	slept []time.Duration
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(_ context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.slept = append(c.slept, d)
	c.now = c.now.Add(d)
	return nil
}

func (c *fakeClock) take() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.slept
	c.slept = nil
	return s
}

func testGuard(reg prometheus.Registerer, log *slog.Logger) (*authguard.Guard, *fakeClock) {
	clk := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	th := authguard.NewThrottle(authguard.Policy{})
	th.Now = clk.Now
	return &authguard.Guard{Throttle: th, Gate: authguard.NewGate(2, 0, 0), Sleep: clk.Sleep,
		Logger: log, Metrics: authmetrics.New(reg)}, clk
}

func dialFrom(tb testing.TB, ip, addr string) *abuseConn {
	tb.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(time.Minute))
	return &abuseConn{Conn: c, r: bufio.NewReader(c)}
}

func plainResp(user, pass string) string {
	return base64.StdEncoding.EncodeToString([]byte("\x00" + user + "\x00" + pass))
}

// expectClosed waits for the server to close c (reads until EOF).
func expectClosed(t *testing.T, c *abuseConn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	rest, err := io.ReadAll(c.r)
	// A reset is a close too: the server closes with the client's last
	// command unread (it was refused before being read).
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("connection not closed by the server: %v (read %q)", err, rest)
	}
	if len(rest) > 0 {
		t.Errorf("after the final reply: %q", rest)
	}
}

// TestSMTPAuthFlood reproduces a measured flood, "2,000 wrong AUTH PLAIN in 0.06
// s, no delay, no disconnect, no log line": now each failure makes the
// next attempt from that IP wait a doubling delay (before any check), the
// third failure in a session closes it with 421, the tenth failure locks
// the IP out (421 without any check), every failure is logged without the
// password and counted — and a client at another IP logs in at once.
func TestSMTPAuthFlood(t *testing.T) {
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	reg := prometheus.NewRegistry()
	guard, clk := testGuard(reg, log)
	ts := startServer(t, SMTPConfig{Users: map[string]string{"bob": "right-pw"}, Auth: guard, Logger: log}, nil)
	checks := 0
	var mu sync.Mutex
	mac := ts.srv.users.mac
	ts.srv.users.mac = func(key []byte, pass string) []byte {
		mu.Lock()
		checks++
		mu.Unlock()
		return mac(key, pass)
	}

	failures := 0
	session := func(ip string) {
		c := dialFrom(t, ip, ts.addr)
		defer c.Close()
		c.cmd(t, "")
		c.cmd(t, "EHLO attacker.test")
		for i := 1; ; i++ {
			code, text := c.cmd(t, "AUTH PLAIN "+plainResp("bob", "wrong-pw"))
			failures++
			if failures == 10 || i == 3 {
				if code != 421 || !strings.Contains(text, "4.7.0") {
					t.Fatalf("failure %d (session %d): %d %q, want 421 4.7.0", failures, i, code, text)
				}
				expectClosed(t, c)
				return
			}
			if code != 535 {
				t.Fatalf("failure %d: %d %q, want 535", failures, code, text)
			}
		}
	}
	for failures < 10 {
		session("127.0.0.1")
	}
	ms := time.Millisecond
	want := []time.Duration{250 * ms, 500 * ms, 1000 * ms, 2000 * ms, 4000 * ms, 8000 * ms, 8000 * ms, 8000 * ms, 8000 * ms}
	if got := clk.take(); !equalDurations(got, want) {
		t.Errorf("delays before attempts 2..10: %v, want %v", got, want)
	}
	if checks != 10 {
		t.Errorf("%d password checks for 10 attempts", checks)
	}

	// Locked out: refused before any check.
	c := dialFrom(t, "127.0.0.1", ts.addr)
	c.cmd(t, "")
	c.cmd(t, "EHLO attacker.test")
	if code, text := c.cmd(t, "AUTH PLAIN "+plainResp("bob", "right-pw")); code != 421 || !strings.Contains(text, "from your address") {
		t.Errorf("locked out IP: %d %q, want 421", code, text)
	}
	expectClosed(t, c)
	c.Close()
	if checks != 10 {
		t.Errorf("a password was checked during the lockout")
	}

	// Another IP is not affected (the account had 10 failures, so it
	// waits the bounded account delay, then logs in).
	c = dialFrom(t, "127.0.0.2", ts.addr)
	defer c.Close()
	c.cmd(t, "")
	c.cmd(t, "EHLO client.test")
	if code, text := c.cmd(t, "AUTH PLAIN "+plainResp("bob", "right-pw")); code != 235 {
		t.Errorf("other IP: %d %q, want 235", code, text)
	}
	if got := clk.take(); len(got) != 1 || got[0] > 2*time.Second {
		t.Errorf("other IP waited %v, want one bounded account delay", got)
	}

	if n := testutil.ToFloat64(guard.Metrics.(*authmetrics.Metrics).Failures.WithLabelValues("smtp", "PLAIN")); n != 10 {
		t.Errorf("envelopd_auth_failures_total = %v, want 10", n)
	}
	if n := testutil.ToFloat64(guard.Metrics.(*authmetrics.Metrics).Refusals.WithLabelValues("smtp", "locked_out")); n != 1 {
		t.Errorf("envelopd_auth_refused_total{locked_out} = %v, want 1", n)
	}
	out := logs.String()
	if strings.Count(out, `msg="auth failed"`) != 10 || !strings.Contains(out, "account=bob") ||
		!strings.Contains(out, "ip=127.0.0.1") || !strings.Contains(out, "mechanism=PLAIN") {
		t.Errorf("auth failures not logged with ip, account and mechanism:\n%s", out)
	}
	if strings.Contains(out, "wrong-pw") || strings.Contains(out, "right-pw") {
		t.Errorf("a password reached the log:\n%s", out)
	}
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestSMTPPerIPConnections reproduces "1,000 idle connections from one IP
// lock out every other client": one IP gets MaxConnectionsPerIP slots, the
// next is refused with 421, and another IP is still greeted.
func TestSMTPPerIPConnections(t *testing.T) {
	ts := startServer(t, SMTPConfig{MaxConnections: 10, MaxConnectionsPerIP: 3}, nil)
	var held []*abuseConn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for i := range 3 {
		c := dialFrom(t, "127.0.0.1", ts.addr)
		held = append(held, c)
		if code, text := c.cmd(t, ""); code != 220 {
			t.Fatalf("connection %d: %d %q", i, code, text)
		}
	}
	c := dialFrom(t, "127.0.0.1", ts.addr)
	held = append(held, c)
	if code, text := c.cmd(t, ""); code != 421 || !strings.Contains(text, "from your address") {
		t.Errorf("4th connection from one IP: %d %q, want 421", code, text)
	}
	o := dialFrom(t, "127.0.0.2", ts.addr)
	held = append(held, o)
	if code, text := o.cmd(t, ""); code != 220 {
		t.Errorf("another IP: %d %q, want 220", code, text)
	}
}

// TestSMTPNoProgress reproduces "NOOP keeps a slot forever": past
// MaxIdleCommands commands outside a transaction without progress the
// session gets 421 and is closed; a delivered message is progress.
func TestSMTPNoProgress(t *testing.T) {
	ts := startServer(t, SMTPConfig{MaxIdleCommands: 5}, nil)
	c := dialAbuse(t, ts.addr)
	defer c.Close()
	c.cmd(t, "")
	c.cmd(t, "EHLO client.test") // 1
	for _, line := range []string{"NOOP", "RSET", "NOOP", "MAIL FROM:<a@client.test>", "RCPT TO:<b@server.test>", "DATA"} {
		if code, text := c.cmd(t, line); code != 250 && code != 354 {
			t.Fatalf("%s: %d %q", line, code, text)
		}
	}
	if code, text := c.cmd(t, "From: a@client.test\r\nSubject: hi\r\n\r\nhi\r\n."); code != 250 {
		t.Fatalf("end of data: %d %q", code, text)
	}
	// The delivery reset the count: five more idle commands are allowed.
	for i, line := range []string{"NOOP", "RSET", "VRFY x", "NOOP", "NOOP"} {
		if code, text := c.cmd(t, line); code >= 400 {
			t.Fatalf("idle command %d %s: %d %q", i+1, line, code, text)
		}
	}
	if code, text := c.cmd(t, "NOOP"); code != 421 {
		t.Errorf("6th idle command: %d %q, want 421", code, text)
	}
	expectClosed(t, c)

	// A session that only loops MAIL/RSET makes no progress either.
	c2 := dialAbuse(t, ts.addr)
	defer c2.Close()
	c2.cmd(t, "")
	c2.cmd(t, "EHLO client.test")
	code := 0
	for i := 0; i < 20 && code != 421; i++ {
		code, _ = c2.cmd(t, "MAIL FROM:<a@client.test>")
		if code == 250 {
			code, _ = c2.cmd(t, "RSET")
		}
	}
	if code != 421 {
		t.Errorf("MAIL/RSET loop never closed")
	}
}

// TestSMTPRefusedMailIsProgress: a client whose every message is refused
// (a store that cannot commit answers 451; TestInteropDiskFull) sends
// whole messages, so it is busy, not idle: more messages than
// MaxIdleCommands allows idle commands, all answered, the session open.
func TestSMTPRefusedMailIsProgress(t *testing.T) {
	refuse := &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "not stored"}
	ts := startServer(t, SMTPConfig{MaxIdleCommands: 2, Router: refuseRouter{refuse}}, nil)
	c := dialAbuse(t, ts.addr)
	defer c.Close()
	c.cmd(t, "")
	c.cmd(t, "EHLO client.test")
	for i := range 5 {
		for _, line := range []string{"MAIL FROM:<a@client.test>", "RCPT TO:<b@server.test>", "DATA"} {
			if code, text := c.cmd(t, line); code != 250 && code != 354 {
				t.Fatalf("message %d, %s: %d %q", i+1, line, code, text)
			}
		}
		if code, text := c.cmd(t, "From: a@client.test\r\nSubject: hi\r\n\r\nhi\r\n."); code != 451 {
			t.Fatalf("message %d end of data: %d %q, want 451", i+1, code, text)
		}
	}
	if code, text := c.cmd(t, "NOOP"); code != 250 {
		t.Errorf("after 5 refused messages: NOOP %d %q, want 250 (session open)", code, text)
	}
}

// refuseRouter accepts every recipient and refuses every message.
type refuseRouter struct{ err error }

func (refuseRouter) Authenticate(string, string) error { return ErrBadPassword }
func (refuseRouter) Rcpt(string, string, string) error { return nil }
func (r refuseRouter) Deliver(context.Context, []byte, Meta, string) (string, error) {
	return "", r.err
}

// TestSMTPIdleTimeout: a session that sends nothing is closed after
// IdleTimeout with 421, well before ReadTimeout.
func TestSMTPIdleTimeout(t *testing.T) {
	ts := startServer(t, SMTPConfig{IdleTimeout: 50 * time.Millisecond}, nil)
	c := dialAbuse(t, ts.addr)
	defer c.Close()
	c.cmd(t, "")
	if code, text := c.cmd(t, ""); code != 421 {
		t.Errorf("idle session: %d %q, want 421", code, text)
	}
}

// TestSMTPPostmaster: RCPT TO:<postmaster> (any case, no domain) is
// accepted even where other recipients need AUTH or a local domain
// (RFC 5321 §4.5.1), and the message is stored.
func TestSMTPPostmaster(t *testing.T) {
	ts := startServer(t, SMTPConfig{AcceptDomains: []string{"server.test"}, Users: map[string]string{"u": "p"}}, nil)
	for _, rcpt := range []string{"postmaster", "PostMaster"} {
		code, text, err := send(t, ts.addr, "a@client.test", []string{rcpt}, []byte("From: a@client.test\r\nSubject: hi\r\n\r\nhi\r\n"))
		if err != nil || code != 250 {
			t.Errorf("RCPT TO:<%s>: %d %q %v", rcpt, code, text, err)
		}
	}
	if n := len(ts.all(t)); n != 1 { // the second is a redelivery of the first
		t.Errorf("%d messages stored, want 1", n)
	}
	if code, _, _ := send(t, ts.addr, "a@client.test", []string{"postmaster@elsewhere.test"}, []byte("Subject: x\r\n\r\nx\r\n")); code != 550 {
		t.Errorf("postmaster at another domain: %d, want 550", code)
	}
}

// TestSMTPHeloControlChars: a bare CR in HELO/EHLO is refused and never
// echoed; on a later EHLO the connection is closed before the echo.
func TestSMTPHeloControlChars(t *testing.T) {
	ts := startServer(t, SMTPConfig{}, nil)
	c := dialAbuse(t, ts.addr)
	defer c.Close()
	c.cmd(t, "")
	if code, text := c.cmd(t, "EHLO evil\rX-Injected: yes"); code != 501 || strings.Contains(text, "evil") {
		t.Errorf("EHLO with bare CR: %d %q, want 501 without the argument", code, text)
	}
	if code, _ := c.cmd(t, "EHLO good.test"); code != 250 {
		t.Fatalf("EHLO good.test: %d", code)
	}
	io.WriteString(c, "EHLO evil\rX-Injected: yes\r\n")
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	rest, _ := io.ReadAll(c.r)
	if bytes.Contains(rest, []byte("evil")) {
		t.Errorf("second EHLO echoed: %q", rest)
	}
}

// TestSMTPAuthBusy: with every hashing slot taken and no queue, AUTH is
// answered 454 4.7.0 at once.
func TestSMTPAuthBusy(t *testing.T) {
	block, entered := make(chan struct{}), make(chan struct{}, 1)
	r := &blockingRouter{block: block, entered: entered}
	guard := &authguard.Guard{Gate: authguard.NewGate(1, -1, 0)}
	ts := startServer(t, SMTPConfig{Router: r, Auth: guard}, nil)
	c1 := dialAbuse(t, ts.addr)
	defer c1.Close()
	c1.cmd(t, "")
	c1.cmd(t, "EHLO one.test")
	io.WriteString(c1, "AUTH PLAIN "+plainResp("a@x.test", "pw")+"\r\n")
	<-entered
	c2 := dialAbuse(t, ts.addr)
	defer c2.Close()
	c2.cmd(t, "")
	c2.cmd(t, "EHLO two.test")
	if code, text := c2.cmd(t, "AUTH PLAIN "+plainResp("a@x.test", "pw")); code != 454 || !strings.Contains(text, "4.7.0") {
		t.Errorf("AUTH while hashing is full: %d %q, want 454 4.7.0", code, text)
	}
	close(block)
	if code, _ := c1.cmd(t, ""); code != 535 {
		t.Errorf("blocked AUTH: %d, want 535", code)
	}
}

type blockingRouter struct {
	Router
	block   chan struct{}
	entered chan struct{}
}

func (b *blockingRouter) Authenticate(user, pass string) error {
	b.entered <- struct{}{}
	<-b.block
	return ErrBadPassword
}

// TestRelayAuthEqualCost shows structurally that every failure costs one
// full password check with the same parameters: a wrong
// password, an unknown mailbox, a mailbox without a password and an
// address outside the local domains each run the hasher exactly once,
// against a hash of the same scheme and iteration count.
func TestRelayAuthEqualCost(t *testing.T) {
	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, filepath.Join(t.TempDir(), "relay.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	h, _ := HashPassword("right", 1000)
	if err := st.SetMailboxPassword(ctx, "bob@agents.test", h); err != nil {
		t.Fatal(err)
	}
	if _, err := st.EnsureMailbox(ctx, "nopw@agents.test"); err != nil {
		t.Fatal(err)
	}
	var hashes []string
	r := &Relay{Domains: []string{"agents.test"}, Store: st, PasswordIterations: 1000,
		CheckPassword: func(hash, pw string) error { hashes = append(hashes, hash); return CheckPassword(hash, pw) }}
	params := func(hash string) string {
		return hash[:strings.Index(hash, "$")+strings.Index(hash[strings.Index(hash, "$")+1:], "$")+1]
	}
	for _, c := range []struct{ user, pass string }{
		{"bob@agents.test", "wrong"},
		{"nobody@agents.test", "wrong"},
		{"nopw@agents.test", ""},
		{"bob@elsewhere.test", "right"},
		{"", ""}, // a malformed SASL exchange ends here
	} {
		hashes = nil
		if err := r.Authenticate(c.user, c.pass); !errors.Is(err, ErrBadPassword) {
			t.Errorf("%s: %v, want ErrBadPassword", c.user, err)
		}
		if len(hashes) != 1 || params(hashes[0]) != params(h) {
			t.Errorf("%s: hasher ran on %q, want once on a %s hash", c.user, hashes, params(h))
		}
	}
	hashes = nil
	if err := r.Authenticate("BOB@agents.test", "right"); err != nil || len(hashes) != 1 || hashes[0] != h {
		t.Errorf("right password: %v, hashes %q", err, hashes)
	}
	if !strings.HasPrefix(DummyPasswordHash(0), "pbkdf2-sha256$600000$") {
		t.Errorf("default dummy hash %q", DummyPasswordHash(0))
	}
}

// TestFileUsersEqualCost: --auth-file users are compared as HMACs in
// constant time; an unknown user costs the same one HMAC.
func TestFileUsersEqualCost(t *testing.T) {
	f := newFileUsers(map[string]string{"bob": "right"})
	calls := 0
	mac := f.mac
	f.mac = func(key []byte, p string) []byte { calls++; return mac(key, p) }
	for _, c := range []struct {
		user, pass string
		ok         bool
	}{
		{"bob", "right", true},
		{"bob", "wrong", false},
		{"bob", "right-but-longer", false},
		{"alice", "right", false},
		{"", "", false},
	} {
		calls = 0
		err := f.check(c.user, c.pass)
		if (err == nil) != c.ok || calls != 1 {
			t.Errorf("check(%q, %q) = %v with %d HMACs; want ok=%v with 1", c.user, c.pass, err, calls, c.ok)
		}
	}
}

// TestRelayRehash: a stored hash with another work factor is replaced on
// the next successful login (transparently: the old password works on),
// and only then.
func TestRelayRehash(t *testing.T) {
	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, filepath.Join(t.TempDir(), "relay.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	old, _ := HashPassword("right", 500)
	if err := st.SetMailboxPassword(ctx, "bob@agents.test", old); err != nil {
		t.Fatal(err)
	}
	r := &Relay{Domains: []string{"agents.test"}, Store: st, PasswordIterations: 1000}
	if r.Authenticate("bob@agents.test", "wrong") == nil {
		t.Fatal("wrong password accepted")
	}
	if h, _ := st.MailboxPassword(ctx, "bob@agents.test"); h != old {
		t.Errorf("a failed login rehashed")
	}
	if err := r.Authenticate("bob@agents.test", "right"); err != nil {
		t.Fatal(err)
	}
	h, _ := st.MailboxPassword(ctx, "bob@agents.test")
	if !strings.HasPrefix(h, "pbkdf2-sha256$1000$") || CheckPassword(h, "right") != nil {
		t.Errorf("after login the stored hash is %q, want a 1000-round hash of the password", h)
	}
	r2 := &Relay{Domains: []string{"agents.test"}, Store: st, PasswordIterations: 1000}
	if err := r2.Authenticate("bob@agents.test", "right"); err != nil {
		t.Errorf("login with the rehashed password: %v", err)
	}
	if h2, _ := st.MailboxPassword(ctx, "bob@agents.test"); h2 != h {
		t.Errorf("rehashed again at the current work factor")
	}
}
