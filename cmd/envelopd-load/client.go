package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DriveOptions configures Drive.
type DriveOptions struct {
	Addr     string
	Sessions int
	// KeepOpen sends every message of a session over one connection
	// (MAIL/RCPT/DATA, RSET between messages); false reconnects per message.
	KeepOpen bool
	// Record, when set, is told the Message-ID of every mail answered 250.
	Record *Recorder
	// Timeout bounds each reply (default 30 s).
	Timeout time.Duration
	// Helo is the EHLO name (default load.test).
	Helo string
	// NoPipelining sends one command per round trip even when the server
	// advertises PIPELINING (RFC 2920).
	NoPipelining bool
}

// Result is one load run's outcome. Latency is from MAIL FROM sent to the
// reply after the final "." received, for accepted messages.
type Result struct {
	Addr      string  `json:"addr"`
	Sessions  int     `json:"sessions"`
	KeepOpen  bool    `json:"keep_open"`
	Messages  int     `json:"messages"`
	Accepted  int     `json:"accepted"`
	Rejected  int     `json:"rejected"`
	Failed    int     `json:"failed"`
	Seconds   float64 `json:"seconds"`
	MsgPerSec float64 `json:"msg_per_sec"`
	P50ms     float64 `json:"p50_ms"`
	P90ms     float64 `json:"p90_ms"`
	P99ms     float64 `json:"p99_ms"`
	MaxMs     float64 `json:"max_ms"`
	// RejectCodes counts the rejections by reply code ("451": 12).
	RejectCodes map[string]int `json:"reject_codes,omitempty"`
	// FirstError is the first rejection or connection error seen.
	FirstError string `json:"first_error,omitempty"`
	// ServerCPUSeconds is the CPU time (user + system) the server process
	// used during the run, ClientCPUSeconds the client's (envelopd-load
	// itself, or smtp-source); 0 when not measured (`run` against a
	// server it did not start).
	ServerCPUSeconds float64 `json:"server_cpu_seconds,omitempty"`
	ClientCPUSeconds float64 `json:"client_cpu_seconds,omitempty"`
}

// ErrReply is a reply with an unexpected code.
type ErrReply struct {
	Code int
	Text string
	Cmd  string
}

func (e *ErrReply) Error() string { return fmt.Sprintf("%s: %d %s", e.Cmd, e.Code, e.Text) }

// Drive sends mails to opts.Addr over opts.Sessions concurrent sessions and
// measures. A session whose connection fails reconnects; when it cannot
// reconnect it stops (so a killed server ends the run). The rate counts
// accepted messages over the wall time of the whole run.
func Drive(ctx context.Context, mails []Mail, opts DriveOptions) *Result {
	if opts.Sessions <= 0 {
		opts.Sessions = 1
	}
	if opts.Timeout == 0 {
		opts.Timeout = 30 * time.Second
	}
	if opts.Helo == "" {
		opts.Helo = "load.test"
	}
	lat := make([]time.Duration, len(mails))
	ok := make([]bool, len(mails))
	var next atomic.Int64
	var rejected, failed atomic.Int64
	var codesMu sync.Mutex
	codes := map[string]int{}
	var firstErr atomic.Pointer[string]
	noteErr := func(err error) {
		s := err.Error()
		firstErr.CompareAndSwap(nil, &s)
	}
	start := time.Now()
	var wg sync.WaitGroup
	for range opts.Sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var c *client
			defer func() {
				if c != nil {
					c.quit()
				}
			}()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= len(mails) {
					return
				}
				if c == nil {
					var err error
					if c, err = dial(ctx, opts.Addr, opts.Helo, opts.Timeout, !opts.NoPipelining); err != nil {
						failed.Add(1)
						noteErr(err)
						return // the server is gone: stop this session
					}
				}
				t0 := time.Now()
				err := c.send(&mails[i])
				switch {
				case err == nil:
					lat[i], ok[i] = time.Since(t0), true
					if opts.Record != nil {
						opts.Record.Add(mails[i].MessageID)
					}
				case isReply(err):
					rejected.Add(1)
					noteErr(err)
					var er *ErrReply
					if errors.As(err, &er) {
						codesMu.Lock()
						codes[strconv.Itoa(er.Code)]++
						codesMu.Unlock()
					}
				default:
					failed.Add(1)
					noteErr(err)
					c.close()
					c = nil
					continue
				}
				if !opts.KeepOpen {
					c.quit()
					c = nil
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	r := &Result{Addr: opts.Addr, Sessions: opts.Sessions, KeepOpen: opts.KeepOpen,
		Messages: len(mails), Rejected: int(rejected.Load()), Failed: int(failed.Load()),
		Seconds: elapsed.Seconds()}
	if p := firstErr.Load(); p != nil {
		r.FirstError = *p
	}
	if len(codes) > 0 {
		r.RejectCodes = codes
	}
	var acc []time.Duration
	for i, good := range ok {
		if good {
			acc = append(acc, lat[i])
		}
	}
	r.Accepted = len(acc)
	if elapsed > 0 {
		r.MsgPerSec = float64(r.Accepted) / elapsed.Seconds()
	}
	slices.Sort(acc)
	r.P50ms, r.P90ms, r.P99ms = pct(acc, 50), pct(acc, 90), pct(acc, 99)
	if len(acc) > 0 {
		r.MaxMs = ms(acc[len(acc)-1])
	}
	return r
}

func isReply(err error) bool {
	var e *ErrReply
	return errors.As(err, &e)
}

// pct is the p-th percentile (nearest rank) of sorted, in milliseconds.
func pct(sorted []time.Duration, p int) float64 {
	if len(sorted) == 0 {
		return 0
	}
	k := (p*len(sorted) + 99) / 100
	if k < 1 {
		k = 1
	}
	return ms(sorted[k-1])
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// client is a minimal SMTP client (RFC 5321), lean so that the load
// generator spends little CPU next to the server it measures.
type client struct {
	conn    net.Conn
	r       *bufio.Reader
	w       *bufio.Writer
	timeout time.Duration
	used    bool // a transaction has run: RSET before the next
	// pipelining: the server advertised PIPELINING and we use it: RSET,
	// MAIL, RCPT and DATA go out in one write (RFC 2920 section 3.1).
	pipelining bool
}

func dial(ctx context.Context, addr, helo string, timeout time.Duration, pipelining bool) (*client, error) {
	d := net.Dialer{Timeout: timeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &client{conn: conn, r: bufio.NewReaderSize(conn, 4096), w: bufio.NewWriterSize(conn, 8192), timeout: timeout}
	if _, err := c.expect("greeting", 220); err != nil {
		conn.Close()
		return nil, err
	}
	c.conn.SetWriteDeadline(time.Now().Add(c.timeout))
	fmt.Fprintf(c.w, "EHLO %s\r\n", helo)
	if err := c.w.Flush(); err != nil {
		conn.Close()
		return nil, err
	}
	text, err := c.expect("EHLO", 250)
	if err != nil {
		conn.Close()
		return nil, err
	}
	for _, l := range strings.Split(text, "\n") {
		if strings.EqualFold(strings.TrimSpace(l), "PIPELINING") {
			c.pipelining = pipelining
		}
	}
	return c, nil
}

// send runs one transaction. A non-nil error is an *ErrReply when the
// server answered with an unexpected code (the connection is still usable),
// anything else when the connection failed.
func (c *client) send(m *Mail) error {
	if c.pipelining {
		return c.sendPipelined(m)
	}
	if c.used {
		if err := c.cmd("RSET", 250, "RSET"); err != nil {
			return err
		}
	}
	c.used = true
	if err := c.cmd("MAIL", 250, "MAIL FROM:<%s>", m.From); err != nil {
		return err
	}
	if err := c.cmd("RCPT", 250, "RCPT TO:<%s>", m.To); err != nil {
		return err
	}
	if err := c.cmd("DATA", 354, "DATA"); err != nil {
		return err
	}
	c.conn.SetWriteDeadline(time.Now().Add(c.timeout))
	c.w.Write(m.Data)
	c.w.WriteString(".\r\n")
	if err := c.w.Flush(); err != nil {
		return err
	}
	_, err := c.expect("end of data", 250)
	return err
}

// sendPipelined is send with the envelope commands in one group; every
// reply is read (in order) whatever the earlier ones said, to stay in step.
func (c *client) sendPipelined(m *Mail) error {
	c.conn.SetWriteDeadline(time.Now().Add(c.timeout))
	type step struct {
		name string
		want int
	}
	steps := make([]step, 0, 4)
	if c.used {
		c.w.WriteString("RSET\r\n")
		steps = append(steps, step{"RSET", 250})
	}
	c.used = true
	fmt.Fprintf(c.w, "MAIL FROM:<%s>\r\nRCPT TO:<%s>\r\nDATA\r\n", m.From, m.To)
	steps = append(steps, step{"MAIL", 250}, step{"RCPT", 250}, step{"DATA", 354})
	if err := c.w.Flush(); err != nil {
		return err
	}
	var first error
	for _, st := range steps {
		_, err := c.expect(st.name, st.want)
		if err != nil && !isReply(err) {
			return err
		}
		if first == nil {
			first = err
		}
	}
	var e *ErrReply
	if errors.As(first, &e) && e.Cmd == "DATA" {
		return first // no 354: no data to send
	}
	// DATA got 354 (a single recipient cannot have failed otherwise).
	c.conn.SetWriteDeadline(time.Now().Add(c.timeout))
	c.w.Write(m.Data)
	c.w.WriteString(".\r\n")
	if err := c.w.Flush(); err != nil {
		return err
	}
	if _, err := c.expect("end of data", 250); err != nil || first == nil {
		return err
	}
	return first
}

func (c *client) cmd(name string, want int, format string, args ...any) error {
	c.conn.SetWriteDeadline(time.Now().Add(c.timeout))
	fmt.Fprintf(c.w, format, args...)
	c.w.WriteString("\r\n")
	if err := c.w.Flush(); err != nil {
		return err
	}
	_, err := c.expect(name, want)
	return err
}

// expect reads one (possibly multi-line) reply and checks its code.
func (c *client) expect(name string, want int) (string, error) {
	c.conn.SetReadDeadline(time.Now().Add(c.timeout))
	var text strings.Builder
	for {
		line, err := c.r.ReadString('\n')
		if err != nil {
			return "", err
		}
		line = strings.TrimRight(line, "\r\n")
		if len(line) < 3 {
			return "", fmt.Errorf("%s: malformed reply %q", name, line)
		}
		code, err := strconv.Atoi(line[:3])
		if err != nil {
			return "", fmt.Errorf("%s: malformed reply %q", name, line)
		}
		if text.Len() > 0 {
			text.WriteByte('\n')
		}
		if len(line) > 4 {
			text.WriteString(line[4:])
		}
		if len(line) == 3 || line[3] == ' ' {
			if code != want {
				return text.String(), &ErrReply{Code: code, Text: text.String(), Cmd: name}
			}
			return text.String(), nil
		}
	}
}

func (c *client) quit() {
	c.conn.SetDeadline(time.Now().Add(c.timeout))
	c.w.WriteString("QUIT\r\n")
	if c.w.Flush() == nil {
		c.r.ReadString('\n')
	}
	c.conn.Close()
}

func (c *client) close() { c.conn.Close() }
