package mailin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"
	"github.com/emersion/go-imap/v2/imapserver/imapmemserver"

	"github.com/envelopd/envelopd/store"
)

const (
	testIMAPUser = "agent@lab.test"
	testIMAPPass = "secret"
	testTarget   = "agent" // hand-off target the tests count deliveries of
)

var (
	capsMove   = imap.CapSet{imap.CapIMAP4rev1: {}, imap.CapUIDPlus: {}, imap.CapMove: {}}
	capsNoMove = imap.CapSet{imap.CapIMAP4rev1: {}, imap.CapUIDPlus: {}}
	capsBare   = imap.CapSet{imap.CapIMAP4rev1: {}}
)

// memIMAP is go-imap/v2's in-memory server on 127.0.0.1:0.
type memIMAP struct {
	addr string
	user *imapmemserver.User
}

func newMemIMAP(t *testing.T, caps imap.CapSet, wrap func(net.Listener) net.Listener, opts func(*imapserver.Options)) *memIMAP {
	t.Helper()
	mem := imapmemserver.New()
	user := imapmemserver.NewUser(testIMAPUser, testIMAPPass)
	if err := user.Create("INBOX", nil); err != nil {
		t.Fatal(err)
	}
	mem.AddUser(user)
	o := &imapserver.Options{
		NewSession: func(*imapserver.Conn) (imapserver.Session, *imapserver.GreetingData, error) {
			return mem.NewSession(), nil, nil
		},
		InsecureAuth: true,
		Caps:         caps,
	}
	if opts != nil {
		opts(o)
	}
	srv := imapserver.New(o)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if wrap != nil {
		ln = wrap(ln)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return &memIMAP{addr: addr, user: user}
}

func (m *memIMAP) account(t *testing.T) IMAPAccount {
	t.Helper()
	host, port, _ := net.SplitHostPort(m.addr)
	a, err := ParseIMAPURL("imap://" + strings.Replace(testIMAPUser, "@", "%40", 1) + "@" + net.JoinHostPort(host, port) + "/INBOX")
	if err != nil {
		t.Fatal(err)
	}
	a.Password = testIMAPPass
	return a
}

type literal struct{ *bytes.Reader }

func (l literal) Size() int64 { return l.Reader.Size() }

func (m *memIMAP) append(t *testing.T, mailbox string, raw []byte) imap.UID {
	t.Helper()
	d, err := m.user.Append(mailbox, literal{bytes.NewReader(raw)}, &imap.AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d.UID
}

func (m *memIMAP) status(t *testing.T, mailbox string) (messages, unseen uint32) {
	t.Helper()
	s, err := m.user.Status(mailbox, &imap.StatusOptions{NumMessages: true, NumUnseen: true})
	if err != nil {
		t.Fatalf("STATUS %s: %v", mailbox, err)
	}
	return *s.NumMessages, *s.NumUnseen
}

// corpus is testdata/imap/*.eml, sorted.
func corpus(t *testing.T) [][]byte {
	t.Helper()
	files, err := filepath.Glob("../testdata/imap/*.eml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata/imap/*.eml: %v", err)
	}
	var out [][]byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, bytes.ReplaceAll(b, []byte("\n"), []byte("\r\n")))
	}
	return out
}

// handoffs records every delivery the store logs for the agent, across
// runs, so a test can assert each message is handed exactly once.
type handoffs struct {
	st   store.Store
	seen map[int64]int
}

func (h *handoffs) claim(t *testing.T) {
	t.Helper()
	ds, err := h.st.ClaimDeliveries(context.Background(), testTarget, time.Now(), time.Hour, 10000)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		h.seen[d.MessageID]++
	}
}

// check asserts that exactly the accepted stored messages — want of them —
// were handed to the agent, each once.
func (h *handoffs) check(t *testing.T, want int) {
	t.Helper()
	h.claim(t)
	accepted, err := h.st.Messages(context.Background(), store.Filter{Status: store.StatusAccepted})
	if err != nil {
		t.Fatal(err)
	}
	all, err := h.st.Messages(context.Background(), store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != want {
		t.Errorf("store holds %d messages, want %d", len(all), want)
	}
	for _, m := range accepted {
		if h.seen[m.ID] != 1 {
			t.Errorf("accepted message %d (%s) handed %d times, want 1", m.ID, m.MessageID, h.seen[m.ID])
		}
	}
	if len(h.seen) != len(accepted) {
		t.Errorf("%d messages handed to the agent, want the %d accepted", len(h.seen), len(accepted))
	}
}

type pollFixture struct {
	srv *memIMAP
	st  *store.SQLite
	p   *Pipeline
	h   *handoffs
}

func newPollFixture(t *testing.T, caps imap.CapSet) *pollFixture {
	t.Helper()
	st, err := store.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "poll.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &pollFixture{
		srv: newMemIMAP(t, caps, nil, nil),
		st:  st,
		p:   &Pipeline{Store: st, Handoff: []string{testTarget}},
		h:   &handoffs{st: st, seen: map[int64]int{}},
	}
}

func (f *pollFixture) poller(t *testing.T) *Poller {
	return &Poller{Account: f.srv.account(t), Ingest: f.p, State: f.st, IdleRestart: time.Minute}
}

func (f *pollFixture) stored(t *testing.T) int {
	t.Helper()
	ms, err := f.st.Messages(context.Background(), store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	return len(ms)
}

func checkStats(t *testing.T, run string, got, want PollStats) {
	t.Helper()
	if got != want {
		t.Errorf("%s: stats %+v, want %+v", run, got, want)
	}
}

func TestPollOnceBacklog(t *testing.T) {
	for _, tc := range []struct {
		name   string
		caps   imap.CapSet
		moveTo string
	}{
		{"seen", capsMove, ""},
		{"move", capsMove, "Processed"},
		{"copy-uidplus", capsNoMove, "Processed"},
		{"copy-expunge", capsBare, "Processed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newPollFixture(t, tc.caps)
			mails := corpus(t)
			for _, m := range mails {
				f.srv.append(t, "INBOX", m)
			}
			n := len(mails)
			p := f.poller(t)
			p.MoveTo = tc.moveTo
			st, err := p.Once(context.Background())
			if err != nil {
				t.Fatalf("first run: %v", err)
			}
			checkStats(t, "first run", st, PollStats{Seen: n, Stored: n})
			msgs, unseen := f.srv.status(t, "INBOX")
			if tc.moveTo == "" {
				if msgs != uint32(n) || unseen != 0 {
					t.Errorf("INBOX: %d messages, %d unseen; want %d, 0", msgs, unseen, n)
				}
			} else {
				if msgs != 0 {
					t.Errorf("INBOX: %d messages left, want 0", msgs)
				}
				if moved, _ := f.srv.status(t, tc.moveTo); moved != uint32(n) {
					t.Errorf("%s: %d messages, want %d", tc.moveTo, moved, n)
				}
			}
			st, err = p.Once(context.Background())
			if err != nil {
				t.Fatalf("second run: %v", err)
			}
			checkStats(t, "second run", st, PollStats{})
			if got := f.stored(t); got != n {
				t.Errorf("store holds %d messages, want %d", got, n)
			}
			f.h.check(t, n)
		})
	}
}

func TestPollUIDValidityChange(t *testing.T) {
	f := newPollFixture(t, capsMove)
	mails := corpus(t)
	for _, m := range mails {
		f.srv.append(t, "INBOX", m)
	}
	n := len(mails)
	p := f.poller(t)
	if _, err := p.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	v1, last1, _ := f.st.IMAPState(context.Background(), p.Account.Key())
	// The mailbox is re-created (as after a server migration): new
	// UIDVALIDITY, the same mails under new UIDs, plus one new mail.
	if err := f.srv.user.Delete("INBOX"); err != nil {
		t.Fatal(err)
	}
	if err := f.srv.user.Create("INBOX", nil); err != nil {
		t.Fatal(err)
	}
	for _, m := range mails {
		f.srv.append(t, "INBOX", m)
	}
	f.srv.append(t, "INBOX", []byte("From: x@x.test\r\nTo: agent@lab.test\r\nSubject: WHICH\r\nMessage-ID: <after-rescan@x.test>\r\n\r\n{}\r\n"))
	st, err := p.Once(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	checkStats(t, "after UIDVALIDITY change", st, PollStats{Seen: n + 1, Stored: 1, Redelivery: n})
	v2, last2, _ := f.st.IMAPState(context.Background(), p.Account.Key())
	if v2 == v1 || last2 != uint32(n+1) || last1 != uint32(n) {
		t.Errorf("state went from (%d, %d) to (%d, %d); want a new UIDVALIDITY and last UID %d", v1, last1, v2, last2, n+1)
	}
	f.h.check(t, n+1)
}

// cutIngester stores through the real pipeline, then runs after(k) — the
// test's way to break the IMAP connection right after the k-th mail became
// durable, before it is flagged.
type cutIngester struct {
	Ingester
	n     int
	after func(k int)
}

func (c *cutIngester) Ingest(ctx context.Context, raw []byte, meta Meta) (store.Outcome, error) {
	out, err := c.Ingester.Ingest(ctx, raw, meta)
	c.n++
	if err == nil && c.after != nil {
		c.after(c.n)
	}
	return out, err
}

// failState fails SetIMAPState while fail is set.
type failState struct {
	IMAPStateStore
	fail bool
}

func (s *failState) SetIMAPState(ctx context.Context, key string, v, uid uint32) error {
	if s.fail {
		return errors.New("disk full (simulated)")
	}
	return s.IMAPStateStore.SetIMAPState(ctx, key, v, uid)
}

// TestPollKillBetweenStoreAndFlag: a mail is durable in the store but the
// server never hears it was processed (connection dies before the flag, or
// the cursor cannot be written). The next run sees it again, the store
// calls it a redelivery, it is flagged then, and the agent gets it once.
func TestPollKillBetweenStoreAndFlag(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cutAfter  int // close the connection after this many stored mails
		failState bool
		wantErr   error
	}{
		{"conn-cut-after-first", 1, false, ErrIMAPConn},
		{"conn-cut-after-third", 3, false, ErrIMAPConn},
		{"state-write-fails", 0, true, ErrIMAPIngest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newPollFixture(t, capsMove)
			mails := corpus(t)
			for _, m := range mails {
				f.srv.append(t, "INBOX", m)
			}
			n := len(mails)
			var mu sync.Mutex
			var conns []net.Conn
			fs := &failState{IMAPStateStore: f.st, fail: tc.failState}
			ci := &cutIngester{Ingester: f.p}
			p := f.poller(t)
			p.State = fs
			p.Ingest = ci
			p.dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
				return c, err
			}
			ci.after = func(k int) {
				if k == tc.cutAfter {
					mu.Lock()
					conns[len(conns)-1].Close()
					mu.Unlock()
				}
			}
			st, err := p.Once(context.Background())
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("first run: error %v, want %v", err, tc.wantErr)
			}
			// Every mail of the batch is durable; none is flagged or
			// counted in the cursor when the flag failed.
			checkStats(t, "first run", st, PollStats{Seen: n, Stored: n})
			if got := f.stored(t); got != n {
				t.Errorf("store holds %d messages after the first run, want %d", got, n)
			}
			f.h.claim(t)

			fs.fail = false
			ci.after = nil
			st, err = p.Once(context.Background())
			if err != nil {
				t.Fatalf("second run: %v", err)
			}
			checkStats(t, "second run", st, PollStats{Seen: n, Redelivery: n})
			if _, unseen := f.srv.status(t, "INBOX"); unseen != 0 {
				t.Errorf("%d unseen after the second run, want 0", unseen)
			}
			st, err = p.Once(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			checkStats(t, "third run", st, PollStats{})
			if got := f.stored(t); got != n {
				t.Errorf("store holds %d messages, want %d", got, n)
			}
			f.h.check(t, n)
		})
	}
}

// TestPollStopFinishesCurrentMail: cancelling (SIGTERM) while a backlog is
// imported finishes the mail being stored, flags it, and starts no other.
func TestPollStopFinishesCurrentMail(t *testing.T) {
	f := newPollFixture(t, capsMove)
	mails := corpus(t)
	for _, m := range mails {
		f.srv.append(t, "INBOX", m)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := f.poller(t)
	p.Ingest = &cutIngester{Ingester: f.p, after: func(k int) {
		if k == 2 {
			cancel()
		}
	}}
	st, err := p.Once(ctx)
	if err != nil {
		t.Fatalf("stopped run: %v", err)
	}
	checkStats(t, "stopped run", st, PollStats{Seen: 2, Stored: 2})
	if _, unseen := f.srv.status(t, "INBOX"); unseen != uint32(len(mails)-2) {
		t.Errorf("%d unseen, want %d", unseen, len(mails)-2)
	}
	p.Ingest = f.p
	st, err = p.Once(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	checkStats(t, "resumed run", st, PollStats{Seen: len(mails) - 2, Stored: len(mails) - 2})
	f.h.check(t, len(mails))
}

// runPoller starts p.Run and returns a stop function that cancels it and
// returns its error.
func runPoller(t *testing.T, p *Poller) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- p.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-errc:
			case <-time.After(10 * time.Second):
				err = errors.New("Run did not return within 10 s of cancel")
			}
		})
		return err
	}
	t.Cleanup(func() { stop() })
	return stop
}

// waitStored waits until the store holds want messages.
func (f *pollFixture) waitStored(t *testing.T, want int, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < within {
		if f.stored(t) >= want {
			return time.Since(start)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("store holds %d messages after %v, want %d", f.stored(t), within, want)
	return 0
}

// TestPollIdle: new mail appended while the poller IDLEs is stored without
// waiting for the poll interval (an hour here: only IDLE can bring it).
func TestPollIdle(t *testing.T) {
	f := newPollFixture(t, capsMove)
	mails := corpus(t)
	f.srv.append(t, "INBOX", mails[0])
	p := f.poller(t)
	p.Interval = time.Hour
	idling := make(chan struct{}, 16)
	p.idleStarted = func() { idling <- struct{}{} }
	stop := runPoller(t, p)
	for i, m := range mails[1:] {
		select {
		case <-idling:
		case <-time.After(10 * time.Second):
			t.Fatal("poller never entered IDLE")
		}
		// imapmemserver subscribes the session to updates only after it
		// sent "+ idling": an append in that window is reported with the
		// next update, not at once. Let it settle (Dovecot has no such
		// window; see TestInteropDovecot).
		time.Sleep(100 * time.Millisecond)
		f.srv.append(t, "INBOX", m)
		d := f.waitStored(t, i+2, 10*time.Second)
		t.Logf("mail %d stored %v after it was appended during IDLE", i+2, d)
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if _, unseen := f.srv.status(t, "INBOX"); unseen != 0 {
		t.Errorf("%d unseen, want 0", unseen)
	}
	f.h.check(t, len(mails))
}

// TestPollInterval: without IDLE the mailbox is polled every Interval.
func TestPollInterval(t *testing.T) {
	f := newPollFixture(t, capsMove)
	p := f.poller(t)
	p.NoIdle = true
	p.Interval = 20 * time.Millisecond
	stop := runPoller(t, p)
	mails := corpus(t)
	for i, m := range mails {
		f.srv.append(t, "INBOX", m)
		f.waitStored(t, i+1, 10*time.Second)
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	f.h.check(t, len(mails))
}

// TestPollReconnect: the connection dies while idling; Run reconnects
// (backoff with jitter, under a second for the first retry) and picks up
// mail that arrived meanwhile.
func TestPollReconnect(t *testing.T) {
	f := newPollFixture(t, capsMove)
	var mu sync.Mutex
	var conns []net.Conn
	p := f.poller(t)
	p.Interval = time.Hour
	p.dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
		return c, err
	}
	idling := make(chan struct{}, 16)
	p.idleStarted = func() { idling <- struct{}{} }
	stop := runPoller(t, p)
	select {
	case <-idling:
	case <-time.After(10 * time.Second):
		t.Fatal("poller never entered IDLE")
	}
	mails := corpus(t)
	mu.Lock()
	conns[len(conns)-1].Close()
	mu.Unlock()
	f.srv.append(t, "INBOX", mails[0])
	f.waitStored(t, 1, 10*time.Second)
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(conns) != 2 {
		t.Errorf("%d connections, want 2", len(conns))
	}
	f.h.check(t, 1)
}

func TestPollPermanentErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		edit    func(p *Poller)
		wantErr error
	}{
		{"wrong-password", func(p *Poller) { p.Account.Password = "wrong" }, ErrIMAPLogin},
		{"no-such-mailbox", func(p *Poller) { p.Account.Mailbox = "Nope" }, ErrIMAPMailbox},
		// A non-loopback name (routed to the test server) without STARTTLS.
		{"plain-to-remote", func(p *Poller) { p.Account.Host = "imap.example.test" }, ErrIMAPNoTLS},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newPollFixture(t, capsMove)
			p := f.poller(t)
			tc.edit(p)
			p.dial = func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, f.srv.addr)
			}
			_, err := p.Once(context.Background())
			if !errors.Is(err, tc.wantErr) || !Permanent(err) {
				t.Fatalf("Once: %v, want permanent %v", err, tc.wantErr)
			}
			if strings.Contains(err.Error(), p.Account.Password) {
				t.Errorf("error %q leaks the password", err)
			}
			// Run gives up at once instead of retrying forever.
			done := make(chan error, 1)
			go func() { done <- p.Run(context.Background()) }()
			select {
			case err := <-done:
				if !errors.Is(err, tc.wantErr) {
					t.Errorf("Run: %v, want %v", err, tc.wantErr)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Run kept retrying a permanent error")
			}
		})
	}
}

func TestPollInsecureAllowsPlainRemote(t *testing.T) {
	f := newPollFixture(t, capsMove)
	f.srv.append(t, "INBOX", corpus(t)[0])
	p := f.poller(t)
	p.Account.Host = "imap.example.test"
	p.Insecure = true
	p.dial = func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, f.srv.addr)
	}
	st, err := p.Once(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	checkStats(t, "insecure run", st, PollStats{Seen: 1, Stored: 1})
}

func TestPollProgress(t *testing.T) {
	f := newPollFixture(t, capsMove)
	tmpl := corpus(t)[0]
	n := ProgressThreshold
	for i := range n {
		f.srv.append(t, "INBOX", bytes.Replace(tmpl, []byte("<imap-01-which@a.test>"), fmt.Appendf(nil, "<progress-%d@a.test>", i), 1))
	}
	var buf bytes.Buffer
	p := f.poller(t)
	p.Progress = &Progress{W: &buf}
	st, err := p.Once(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	checkStats(t, "backlog", st, PollStats{Seen: n, Stored: n})
	key := p.Account.Key()
	for _, want := range []string{key + ": 0 of 50", key + ": 1 of 50", key + ": 50 of 50"} {
		if !strings.Contains(buf.String(), want+"\r") && !strings.Contains(buf.String(), want+" ") {
			t.Errorf("progress output lacks %q", want)
		}
	}
	if !strings.HasSuffix(buf.String(), "\r") {
		t.Errorf("progress line not cleared at the end: %q", buf.String()[max(0, buf.Len()-80):])
	}
}
