package imapview_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/envelopd/envelopd/authguard"
	"github.com/envelopd/envelopd/mailin/imapview"
	"github.com/envelopd/envelopd/mailin/relaytest"
	"github.com/envelopd/envelopd/store"
)

// fakeSleep advances nothing real: the throttle's delays are recorded.
type fakeSleep struct {
	mu    sync.Mutex
	now   time.Time
	slept []time.Duration
}

func (f *fakeSleep) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeSleep) Sleep(_ context.Context, d time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.slept = append(f.slept, d)
	f.now = f.now.Add(d)
	return nil
}

type viewServer struct {
	addr  string
	calls atomic.Int64 // password checks
}

// startView serves an IMAP view whose only password is bob@agents.test's
// "right", with a guard on a fake clock.
func startView(t *testing.T, opts imapview.Options, p authguard.Policy, gate *authguard.Gate) *viewServer {
	t.Helper()
	st, err := store.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "view.db"))
	if err != nil {
		t.Fatal(err)
	}
	vs := &viewServer{}
	if opts.Authenticate == nil {
		opts.Authenticate = func(user, pass string) error {
			vs.calls.Add(1)
			if user == "bob@agents.test" && pass == "right" {
				return nil
			}
			return errors.New("wrong")
		}
	}
	clk := &fakeSleep{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	th := authguard.NewThrottle(p)
	th.Now = clk.Now
	if gate == nil {
		gate = authguard.NewGate(2, 0, 0)
	}
	opts.Store = st
	opts.Guard = &authguard.Guard{Throttle: th, Gate: gate, Sleep: clk.Sleep}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	iv := imapview.New(opts)
	go iv.Serve(ln)
	t.Cleanup(func() {
		iv.Close()
		st.Close()
	})
	vs.addr = ln.Addr().String()
	return vs
}

type rawIMAP struct {
	net.Conn
	r *bufio.Reader
	n int
}

func dialIMAP(t *testing.T, ip, addr string) (*rawIMAP, string) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(time.Minute))
	r := &rawIMAP{Conn: c, r: bufio.NewReader(c)}
	greeting, _ := r.r.ReadString('\n')
	return r, greeting
}

// cmd sends one command and returns every line up to its tagged reply.
func (c *rawIMAP) cmd(t *testing.T, line string) []string {
	t.Helper()
	c.n++
	tag := fmt.Sprintf("a%d", c.n)
	fmt.Fprintf(c, "%s %s\r\n", tag, line)
	var lines []string
	for {
		l, err := c.r.ReadString('\n')
		if err != nil {
			return append(lines, "EOF")
		}
		lines = append(lines, strings.TrimRight(l, "\r\n"))
		if strings.HasPrefix(l, tag+" ") {
			return lines
		}
	}
}

// rest reads what the server sends until it closes the connection.
func (c *rawIMAP) rest() string {
	var b strings.Builder
	for {
		l, err := c.r.ReadString('\n')
		b.WriteString(l)
		if err != nil {
			return b.String()
		}
	}
}

// TestIMAPLoginFailures reproduces an unthrottled IMAP LOGIN: the
// third failure in a session ends it with BYE, delays grow, a locked-out
// IP is refused without any password check, and another IP logs in.
func TestIMAPLoginFailures(t *testing.T) {
	vs := startView(t, imapview.Options{}, authguard.Policy{LockoutAfter: 5}, nil)
	c, _ := dialIMAP(t, "127.0.0.1", vs.addr)
	for i := 1; i <= 3; i++ {
		got := c.cmd(t, "LOGIN bob@agents.test wrong")
		if last := got[len(got)-1]; !strings.Contains(last, "NO [AUTHENTICATIONFAILED]") {
			t.Fatalf("failure %d: %q", i, got)
		}
	}
	if rest := c.rest(); !strings.HasPrefix(rest, "* BYE ") {
		t.Errorf("after 3 failures: %q, want BYE and close", rest)
	}
	c.Close()
	// Two more failures (AUTHENTICATE PLAIN this time) lock the IP out.
	c, _ = dialIMAP(t, "127.0.0.1", vs.addr)
	for range 2 {
		c.cmd(t, "AUTHENTICATE PLAIN "+base64.StdEncoding.EncodeToString([]byte("\x00bob@agents.test\x00wrong")))
	}
	c.rest()
	c.Close()
	if n := vs.calls.Load(); n != 5 {
		t.Fatalf("%d password checks, want 5", n)
	}
	c, _ = dialIMAP(t, "127.0.0.1", vs.addr)
	got := c.cmd(t, "LOGIN bob@agents.test right")
	if !strings.Contains(got[len(got)-1], "NO [UNAVAILABLE]") || vs.calls.Load() != 5 {
		t.Errorf("locked-out IP: %q after %d checks, want NO [UNAVAILABLE] and no check", got, vs.calls.Load())
	}
	if rest := c.rest(); !strings.HasPrefix(rest, "* BYE ") {
		t.Errorf("locked-out IP not closed: %q", rest)
	}
	c.Close()
	o, _ := dialIMAP(t, "127.0.0.2", vs.addr)
	defer o.Close()
	if got := o.cmd(t, "LOGIN bob@agents.test right"); !strings.Contains(got[len(got)-1], "OK") {
		t.Errorf("another IP: %q", got)
	}
}

// TestIMAPAuthenticatePlainMalformed: a malformed PLAIN response costs
// one password check, like a wrong password.
func TestIMAPAuthenticatePlainMalformed(t *testing.T) {
	vs := startView(t, imapview.Options{}, authguard.Policy{}, nil)
	c, _ := dialIMAP(t, "127.0.0.1", vs.addr)
	defer c.Close()
	got := c.cmd(t, "AUTHENTICATE PLAIN "+base64.StdEncoding.EncodeToString([]byte("garbage")))
	if !strings.Contains(got[len(got)-1], "NO") || vs.calls.Load() != 1 {
		t.Errorf("malformed PLAIN: %q with %d checks, want NO after 1", got, vs.calls.Load())
	}
	got = c.cmd(t, "AUTHENTICATE PLAIN "+base64.StdEncoding.EncodeToString([]byte("\x00bob@agents.test\x00right")))
	if !strings.Contains(got[len(got)-1], "OK") {
		t.Errorf("PLAIN: %q", got)
	}
}

// TestIMAPBusy: with the hashing slot taken and no queue, LOGIN gets
// NO [UNAVAILABLE] at once.
func TestIMAPBusy(t *testing.T) {
	block, entered := make(chan struct{}), make(chan struct{}, 1)
	opts := imapview.Options{Authenticate: func(string, string) error {
		entered <- struct{}{}
		<-block
		return errors.New("wrong")
	}}
	vs := startView(t, opts, authguard.Policy{}, authguard.NewGate(1, -1, 0))
	c1, _ := dialIMAP(t, "127.0.0.1", vs.addr)
	defer c1.Close()
	fmt.Fprintf(c1, "x LOGIN a b\r\n")
	<-entered
	c2, _ := dialIMAP(t, "127.0.0.1", vs.addr)
	defer c2.Close()
	if got := c2.cmd(t, "LOGIN a b"); !strings.Contains(got[len(got)-1], "NO [UNAVAILABLE]") {
		t.Errorf("LOGIN while hashing is full: %q", got)
	}
	close(block)
}

// TestIMAPNoLoginCommands: a session that never logs in may send
// MaxIdleCommands commands, then gets BYE.
func TestIMAPNoLoginCommands(t *testing.T) {
	vs := startView(t, imapview.Options{MaxIdleCommands: 5}, authguard.Policy{}, nil)
	c, _ := dialIMAP(t, "127.0.0.1", vs.addr)
	defer c.Close()
	for i := range 5 {
		if got := c.cmd(t, "NOOP"); !strings.Contains(got[len(got)-1], "OK") {
			t.Fatalf("NOOP %d: %q", i+1, got)
		}
	}
	fmt.Fprintf(c, "a6 NOOP\r\n")
	if rest := c.rest(); !strings.HasPrefix(rest, "* BYE ") {
		t.Errorf("6th NOOP before login: %q, want BYE", rest)
	}
}

// TestIMAPPerIPConnections: one IP gets MaxConnectionsPerIP connections;
// another IP is still served.
func TestIMAPPerIPConnections(t *testing.T) {
	vs := startView(t, imapview.Options{MaxConnectionsPerIP: 2}, authguard.Policy{}, nil)
	for i := range 2 {
		c, g := dialIMAP(t, "127.0.0.1", vs.addr)
		defer c.Close()
		if !strings.HasPrefix(g, "* OK") {
			t.Fatalf("connection %d: %q", i, g)
		}
	}
	c, g := dialIMAP(t, "127.0.0.1", vs.addr)
	defer c.Close()
	if !strings.HasPrefix(g, "* BYE") {
		t.Errorf("3rd connection from one IP: %q, want BYE", g)
	}
	o, g := dialIMAP(t, "127.0.0.2", vs.addr)
	defer o.Close()
	if !strings.HasPrefix(g, "* OK") {
		t.Errorf("another IP: %q", g)
	}
}

// TestIMAPBadMailboxNames reproduces a "[SERVERBUG]" for bad
// mailbox names: a name that cannot be decoded gets NO [NONEXISTENT];
// COPY/MOVE of nothing is OK.
func TestIMAPBadMailboxNames(t *testing.T) {
	relay := relaytest.Start(t)
	bob := relay.Mailbox("bob@agents.test")
	c, _ := dialIMAP(t, "127.0.0.1", relay.IMAPAddr)
	defer c.Close()
	c.cmd(t, "LOGIN "+bob.Address+" "+bob.Password)
	for _, name := range []string{`"&Jjo"`, `"a&b"`, `"&-x&AGE"`} {
		for _, cmd := range []string{"SELECT %s", "EXAMINE %s", "STATUS %s (MESSAGES)", "DELETE %s", "RENAME %s x", "CREATE %s"} {
			line := fmt.Sprintf(cmd, name)
			got := c.cmd(t, line)
			if last := got[len(got)-1]; !strings.Contains(last, "NO [NONEXISTENT]") {
				t.Errorf("%s: %q, want NO [NONEXISTENT]", line, got)
			}
		}
	}
	c.cmd(t, "SELECT INBOX")
	for _, line := range []string{"COPY 1:* Archive", "MOVE 1:* Archive", `COPY 1:* ""`} {
		if got := c.cmd(t, line); !strings.HasPrefix(got[len(got)-1], fmt.Sprintf("a%d OK", c.n)) {
			t.Errorf("%s on an empty mailbox: %q, want OK", line, got)
		}
	}
}
