package mailin

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/envelopd/envelopd/dkim"
	"github.com/envelopd/envelopd/store"
)

// This file holds the SMTP abuse tests and the SMTP session fuzz target.
// Heavy variants (a 1 GB DATA stream) run only
// with ENVELOPD_INTEROP=1.

func interop() bool { return os.Getenv("ENVELOPD_INTEROP") == "1" }

// panicLog is a slog handler that remembers messages go-smtp logs when it
// recovers a panic in a session ("panic serving ...").
type panicLog struct {
	mu     sync.Mutex
	panics []string
}

func (h *panicLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *panicLog) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "panic") {
		h.mu.Lock()
		h.panics = append(h.panics, r.Message)
		h.mu.Unlock()
	}
	return nil
}
func (h *panicLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *panicLog) WithGroup(string) slog.Handler      { return h }

func (h *panicLog) take() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.panics
	h.panics = nil
	return p
}

// abuseServer is the real SMTP front end and pipeline (DKIM verification
// against an empty static key set: no network) over a temporary store.
type abuseServer struct {
	srv   *SMTPServer
	store *store.SQLite
	log   *panicLog
	addr  string
}

func newAbuseServer(tb testing.TB, cfg SMTPConfig) *abuseServer {
	tb.Helper()
	return newAbuseServerIn(tb, tb.TempDir(), cfg)
}

// newAbuseServerIn keeps the store in dir.
func newAbuseServerIn(tb testing.TB, dir string, cfg SMTPConfig) *abuseServer {
	tb.Helper()
	st, err := store.OpenSQLite(context.Background(), filepath.Join(dir, "envelopd.db"))
	if err != nil {
		tb.Fatal(err)
	}
	pl := &panicLog{}
	log := slog.New(pl)
	p := &Pipeline{Store: st, Verifier: &dkim.Verifier{Resolver: dkim.NewStaticResolver()}, AuthServID: "mx.test", Logger: log}
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	cfg.Logger = log
	srv, err := NewSMTPServer(cfg, p)
	if err != nil {
		tb.Fatal(err)
	}
	go srv.Serve()
	tb.Cleanup(func() {
		srv.Close()
		st.Close()
		if p := pl.take(); len(p) > 0 {
			tb.Errorf("server panicked: %q", p)
		}
	})
	return &abuseServer{srv: srv, store: st, log: pl, addr: srv.Addr().String()}
}

func (a *abuseServer) count(tb testing.TB) int {
	tb.Helper()
	msgs, err := a.store.Messages(context.Background(), store.Filter{})
	if err != nil {
		tb.Fatal(err)
	}
	return len(msgs)
}

// replyRE is one SMTP reply line (RFC 5321 section 4.2).
var replyRE = regexp.MustCompile(`^[2-5][0-9][0-9]([ -].*)?$`)

// readReply reads one possibly multi-line reply and returns its code and
// its last line.
func readReply(r *bufio.Reader) (int, string, error) {
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return 0, line, err
		}
		line = strings.TrimRight(line, "\r\n")
		if !replyRE.MatchString(line) {
			return 0, line, fmt.Errorf("malformed reply line %q", line)
		}
		if len(line) == 3 || line[3] == ' ' {
			code, _ := strconv.Atoi(line[:3])
			return code, line, nil
		}
	}
}

// abuseConn is a raw client connection.
type abuseConn struct {
	net.Conn
	r *bufio.Reader
}

func dialAbuse(tb testing.TB, addr string) *abuseConn {
	tb.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(2 * time.Minute))
	return &abuseConn{Conn: c, r: bufio.NewReader(c)}
}

// cmd sends one line and returns the reply code and last line.
func (c *abuseConn) cmd(tb testing.TB, line string) (int, string) {
	tb.Helper()
	if line != "" {
		if _, err := io.WriteString(c, line+"\r\n"); err != nil {
			tb.Fatalf("%s: %v", line, err)
		}
	}
	code, text, err := readReply(c.r)
	if err != nil {
		tb.Fatalf("after %q: %v", line, err)
	}
	return code, text
}

// TestSMTPAbuse500Connections: with --max-connections 100, 500 concurrent
// connections get exactly 100 greetings and 400 polite 421 refusals; once
// they close, the server greets again.
func TestSMTPAbuse500Connections(t *testing.T) {
	a := newAbuseServer(t, SMTPConfig{MaxConnections: 100, MaxConnectionsPerIP: -1}) // all from 127.0.0.1
	const n = 500
	conns := make([]net.Conn, n)
	codes := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.DialTimeout("tcp", a.addr, 10*time.Second)
			if err != nil {
				t.Errorf("connection %d: %v", i, err)
				return
			}
			conns[i] = c
			c.SetReadDeadline(time.Now().Add(20 * time.Second))
			code, _, err := readReply(bufio.NewReader(c))
			if err != nil {
				t.Errorf("connection %d: %v", i, err)
			}
			codes[i] = code
		}()
	}
	wg.Wait()
	counts := map[int]int{}
	for _, c := range codes {
		counts[c]++
	}
	if counts[220] != 100 || counts[421] != 400 {
		t.Errorf("greetings by code %v, want 100×220 and 400×421", counts)
	}
	for _, c := range conns {
		if c != nil {
			c.Close()
		}
	}
	// Slots are freed when the server notices the closes.
	deadline := time.Now().Add(10 * time.Second)
	for {
		c := dialAbuse(t, a.addr)
		code, _ := c.cmd(t, "")
		c.Close()
		if code == 220 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after closing all connections the server still answers %d", code)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSMTPAbuse10000Recipients: past --max-recipients (100) every RCPT gets
// 452 and the transaction still completes with the first 100.
func TestSMTPAbuse10000Recipients(t *testing.T) {
	a := newAbuseServer(t, SMTPConfig{})
	c := dialAbuse(t, a.addr)
	defer c.Close()
	c.cmd(t, "")
	c.cmd(t, "EHLO c.test")
	if code, text := c.cmd(t, "MAIL FROM:<a@x.test>"); code != 250 {
		t.Fatalf("MAIL: %s", text)
	}
	// Pipelined (RFC 2920): write every RCPT first, read the replies after.
	errc := make(chan error, 1)
	go func() {
		w := bufio.NewWriter(c)
		for i := range 10000 {
			fmt.Fprintf(w, "RCPT TO:<r%d@y.test>\r\n", i)
		}
		errc <- w.Flush()
	}()
	counts := map[int]int{}
	first452 := -1
	for i := range 10000 {
		code, _ := c.cmd(t, "")
		counts[code]++
		if code == 452 && first452 < 0 {
			first452 = i
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if counts[250] != 100 || counts[452] != 9900 || first452 != 100 {
		t.Errorf("RCPT replies %v, first 452 at %d; want 100×250 then 9900×452", counts, first452)
	}
	if code, text := c.cmd(t, "DATA"); code != 354 {
		t.Fatalf("DATA: %s", text)
	}
	if code, text := c.cmd(t, "From: a@x.test\r\nSubject: WHICH\r\n\r\n."); code != 250 {
		t.Errorf("end of data: %s, want 250", text)
	}
	if n := a.count(t); n != 1 {
		t.Errorf("%d messages stored, want 1", n)
	}
}

// TestSMTPAbuseLongHeaderLine: a 1 MB header line exceeds the SMTP line
// limit: the DATA is refused with a 5xx reply, nothing is stored, and the
// server keeps serving.
func TestSMTPAbuseLongHeaderLine(t *testing.T) {
	a := newAbuseServer(t, SMTPConfig{})
	c := dialAbuse(t, a.addr)
	c.cmd(t, "")
	c.cmd(t, "EHLO c.test")
	c.cmd(t, "MAIL FROM:<a@x.test>")
	c.cmd(t, "RCPT TO:<b@y.test>")
	if code, text := c.cmd(t, "DATA"); code != 354 {
		t.Fatalf("DATA: %s", text)
	}
	go func() {
		w := bufio.NewWriter(c)
		w.WriteString("From: a@x.test\r\nSubject: WHICH | ")
		w.WriteString(strings.Repeat("x", 1<<20))
		w.WriteString("\r\n\r\nbody\r\n.\r\n")
		w.Flush() // may fail: the server closes the connection
	}()
	code, text, err := readReply(c.r)
	if err != nil || code != 500 || !strings.Contains(text, "Line too long") {
		t.Errorf("1 MB header line answered %d %q (%v), want a 5xx about the line", code, text, err)
	}
	c.Close()
	if n := a.count(t); n != 0 {
		t.Errorf("%d messages stored, want 0", n)
	}
	ok := dialAbuse(t, a.addr)
	defer ok.Close()
	if code, text := ok.cmd(t, ""); code != 220 {
		t.Errorf("next connection greeted with %q", text)
	}
}

// TestSMTPAbuseParserInputs: inputs within the SMTP limits that stress the
// MIME and header parsers (a 1 MB folded header field, 10,000 MIME parts)
// are stored, with any problems as typed errors: no panic, no hang.
func TestSMTPAbuseParserInputs(t *testing.T) {
	var folded strings.Builder
	folded.WriteString("From: a@x.test\r\nTo: b@y.test\r\nSubject: WHICH\r\nX-Long:")
	for folded.Len() < 1<<20 {
		folded.WriteString(" " + strings.Repeat("y", 70) + "\r\n")
	}
	folded.WriteString("Message-ID: <folded@x.test>\r\n\r\n{\"v\":\"0.2.0\",\"type\":\"which\"}\r\n")
	var parts strings.Builder
	parts.WriteString("From: a@x.test\r\nTo: b@y.test\r\nSubject: WHICH\r\nMessage-ID: <parts@x.test>\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=B\r\n\r\n")
	for i := range 10000 {
		fmt.Fprintf(&parts, "--B\r\nContent-Type: text/plain\r\n\r\npart %d\r\n", i)
	}
	parts.WriteString("--B--\r\n")
	a := newAbuseServer(t, SMTPConfig{})
	for _, tc := range []struct{ name, msg string }{
		{"1 MB folded header field", folded.String()},
		{"10,000 MIME parts", parts.String()},
	} {
		c := dialAbuse(t, a.addr)
		c.cmd(t, "")
		c.cmd(t, "EHLO c.test")
		c.cmd(t, "MAIL FROM:<a@x.test>")
		c.cmd(t, "RCPT TO:<b@y.test>")
		c.cmd(t, "DATA")
		code, text := c.cmd(t, tc.msg+".")
		c.Close()
		if code != 250 {
			t.Errorf("%s: %q, want 250 (stored, problems as typed errors)", tc.name, text)
		}
	}
	msgs, err := a.store.Messages(context.Background(), store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 {
		t.Fatalf("%d messages stored, want 2", len(msgs))
	}
	for _, m := range msgs {
		t.Logf("%s: status %s, errors %s", m.MessageID, m.Status, codes(m.Errors))
	}
}

// zeroStream is an endless message body of 76-byte lines, never held in
// memory.
type zeroStream struct{ n, max int64 } // max: a multiple of len(zeroLine)

var zeroLine = []byte(strings.Repeat("0", 76) + "\r\n")

func (z *zeroStream) Read(p []byte) (int, error) {
	if z.n >= z.max {
		return 0, io.EOF
	}
	if rest := z.max - z.n; int64(len(p)) > rest {
		p = p[:rest]
	}
	n := 0
	for n < len(p) {
		off := int((z.n + int64(n)) % int64(len(zeroLine)))
		n += copy(p[n:], zeroLine[off:])
	}
	z.n += int64(n)
	return n, nil
}

// rss is this process's resident set size in bytes (Linux).
func rss() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// TestSMTPAbuseHugeData streams a DATA far beyond --max-message-bytes
// (1 GB with ENVELOPD_INTEROP=1, 64 MB otherwise) and expects 552, nothing
// stored, and memory bounded by the limit, not by the stream: RSS and heap
// sampled during the transfer grow by less than 4× the 25 MiB default.
func TestSMTPAbuseHugeData(t *testing.T) {
	size := int64(64<<20) / 78 * 78
	if interop() {
		size = int64(1<<30) / 78 * 78
	}
	a := newAbuseServer(t, SMTPConfig{})
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	baseHeap, baseRSS := int64(ms.HeapInuse), rss()
	var maxHeap, maxRSS atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if h := int64(ms.HeapInuse); h > maxHeap.Load() {
				maxHeap.Store(h)
			}
			if r := rss(); r > maxRSS.Load() {
				maxRSS.Store(r)
			}
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	c := dialAbuse(t, a.addr)
	defer c.Close()
	c.cmd(t, "")
	c.cmd(t, "EHLO c.test")
	c.cmd(t, "MAIL FROM:<a@x.test>")
	c.cmd(t, "RCPT TO:<b@y.test>")
	c.cmd(t, "DATA")
	werr := make(chan error, 1)
	go func() {
		w := bufio.NewWriterSize(c, 64<<10)
		w.WriteString("From: a@x.test\r\nSubject: WHICH\r\n\r\n")
		_, err := io.Copy(w, &zeroStream{max: size})
		if err == nil {
			_, err = w.WriteString(".\r\n")
		}
		if err == nil {
			err = w.Flush()
		}
		werr <- err
	}()
	code, text, err := readReply(c.r)
	close(stop)
	<-sampled
	if err != nil || code != 552 {
		t.Errorf("%d MB DATA answered %d %q (%v), want 552", size>>20, code, text, err)
	}
	if err := <-werr; err != nil {
		t.Logf("client write: %v", err)
	}
	if n := a.count(t); n != 0 {
		t.Errorf("%d messages stored, want 0", n)
	}
	const bound = 4 * (25 << 20)
	heap, res := maxHeap.Load()-baseHeap, maxRSS.Load()-baseRSS
	t.Logf("streamed %d MB: heap grew %d MB, RSS grew %d MB", size>>20, heap>>20, res>>20)
	if heap > bound || res > bound {
		t.Errorf("memory grew by heap %d MB / RSS %d MB while streaming, want < %d MB", heap>>20, res>>20, bound>>20)
	}
	// The session is still usable after the 552.
	if code, text := c.cmd(t, "NOOP"); code != 250 {
		t.Errorf("NOOP after 552: %q", text)
	}
}

// pipeListener hands net.Pipe server ends to the SMTP server.
type pipeListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "127.0.0.1:0" }

// FuzzSMTPSession feeds arbitrary bytes as a client script to envelopd's
// real SMTP front end and ingest pipeline (DKIM, parse, store) over
// net.Pipe. Every byte the server sends must form well-formed replies
// (RFC 5321 section 4.2) starting with a 220 greeting; the session must
// end (the script is followed by an end-of-data and QUIT); no panic may be
// recovered by go-smtp. Seeds: testdata/load/smtp-sessions.
func FuzzSMTPSession(f *testing.F) {
	seeds, err := filepath.Glob("../testdata/load/smtp-sessions/*.txt")
	if err != nil || len(seeds) == 0 {
		f.Fatalf("no seeds: %v", err)
	}
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	// The store lives in memory-backed /dev/shm when there is one: fsync
	// latency is not what this target explores.
	dir := f.TempDir()
	if shm, err := os.MkdirTemp("/dev/shm", "envelopd-fuzz-"); err == nil {
		dir = shm
		f.Cleanup(func() { os.RemoveAll(shm) })
	}
	a := newAbuseServerIn(f, dir, SMTPConfig{MaxMessageBytes: 64 << 10, MaxRecipients: 10, ReadTimeout: 200 * time.Millisecond, WriteTimeout: time.Second})
	ln := newPipeListener()
	go a.srv.srv.Serve(ln)
	f.Cleanup(func() { ln.Close() })
	f.Fuzz(func(t *testing.T, script []byte) {
		client, server := net.Pipe()
		select {
		case ln.conns <- server:
		case <-time.After(5 * time.Second):
			t.Fatal("server does not accept")
		}
		defer client.Close()
		client.SetDeadline(time.Now().Add(10 * time.Second))
		go func() {
			client.Write(script)
			client.Write([]byte("\r\n.\r\nQUIT\r\n"))
		}()
		out, err := io.ReadAll(client)
		if err != nil && !errors.Is(err, io.ErrClosedPipe) {
			t.Fatalf("session did not end: %v (got %q)", err, truncate(out))
		}
		if !bytes.HasPrefix(out, []byte("220 ")) {
			t.Fatalf("no 220 greeting: %q", truncate(out))
		}
		for _, line := range strings.SplitAfter(string(out), "\r\n") {
			if line == "" {
				continue
			}
			if !strings.HasSuffix(line, "\r\n") || !replyRE.MatchString(strings.TrimSuffix(line, "\r\n")) {
				t.Fatalf("malformed reply line %q", line)
			}
			if strings.HasPrefix(line, "421 4.0.0 Internal server error") {
				t.Fatalf("the session panicked: %q", truncate(out))
			}
		}
		if p := a.log.take(); len(p) > 0 {
			t.Fatalf("server panicked: %q", p)
		}
	})
}

func truncate(b []byte) []byte {
	if len(b) > 2000 {
		return b[:2000]
	}
	return b
}
