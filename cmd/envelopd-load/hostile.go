package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/envelopd/envelopd/internal/hostile"
)

// HostileCase is what `envelopd-load hostile` measured for one mail shape:
// a fresh `envelopd serve` (own database) receives the
// mail(s); then `envelopd inbox --json` lists them and `envelopd parse`
// parses one. Ratios are against the normal 2 KB mail measured in the same
// run.
type HostileCase struct {
	Name       string  `json:"name"`
	MailBytes  int     `json:"mail_bytes"`
	Mails      int     `json:"mails"`
	Accepted   int     `json:"accepted"`    // 250 replies
	Busy       int     `json:"busy"`        // 451 4.3.2 replies (in-flight budget)
	OtherReply string  `json:"other_reply"` // first other reply or error, "" when none
	StoreSec   float64 `json:"store_seconds"`
	ServeHWM   int64   `json:"serve_peak_rss_bytes"` // VmHWM of serve after the mails
	DBBytes    int64   `json:"db_bytes"`             // database and WAL after serve stopped (fresh each case)
	InboxSec   float64 `json:"inbox_seconds"`
	InboxHWM   int64   `json:"inbox_peak_rss_bytes"`
	InboxBytes int     `json:"inbox_output_bytes"`
	ParseSec   float64 `json:"parse_seconds"`
	ParseHWM   int64   `json:"parse_peak_rss_bytes"`
	ParseBytes int     `json:"parse_output_bytes"`
	// LoadHWM is envelopd-load's own peak RSS when the case ended. The
	// inbox and parse peaks are the children's ru_maxrss, which Linux
	// counts from the parent's peak at fork (os/exec forks with
	// CLONE_VM): they are upper bounds, at least this figure.
	LoadHWM int64 `json:"load_peak_rss_bytes"`
	// Ratios against the baseline case (0 for the baseline itself).
	StoreRatio float64 `json:"store_time_ratio"`
	RSSRatio   float64 `json:"serve_rss_ratio"`
}

// hostileFlags are the shapes' sizes.
type hostileFlags struct {
	bin        string
	parts      int
	nested     int
	large      int
	concurrent int
	serveArgs  string
	work       string
	asJSON     bool
	noSize     bool
}

func (f *hostileFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.bin, "envelopd-bin", "", "envelopd binary (default: next to envelopd-load, then $PATH)")
	fs.IntVar(&f.parts, "parts", 100000, "JSON parts in the many-parts mail")
	fs.IntVar(&f.nested, "nested-bytes", 30000, "size of the nested-JSON mail")
	fs.IntVar(&f.large, "large-bytes", 24<<20, "size of each large mail")
	fs.IntVar(&f.concurrent, "concurrent", 40, "large mails sent at once")
	fs.StringVar(&f.serveArgs, "serve-args", "", "extra envelopd serve flags (space-separated)")
	fs.StringVar(&f.work, "work", "", "work directory (default: a temporary one, removed)")
	fs.BoolVar(&f.asJSON, "json", false, "print JSON instead of a table")
	fs.BoolVar(&f.noSize, "no-size", false, "do not announce SIZE= in MAIL FROM")
}

// runHostile is `envelopd-load hostile`.
func runHostile(ctx context.Context, e *env) int {
	fs := newFlags(e, "envelopd-load hostile")
	var f hostileFlags
	f.register(fs)
	if err := fs.Parse(e.args); err != nil {
		return 2
	}
	bin, err := findEnvelopd(f.bin)
	if err != nil {
		fmt.Fprintf(e.stderr, "envelopd-load hostile: %v\n", err)
		return 2
	}
	f.bin = bin
	cases, err := Hostile(ctx, f, e.stderr)
	if err != nil {
		fmt.Fprintf(e.stderr, "envelopd-load hostile: %v\n", err)
		return 1
	}
	if f.asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		enc.Encode(cases)
	} else {
		printHostile(e.stdout, cases)
	}
	for _, c := range cases {
		if c.OtherReply != "" {
			return 1
		}
	}
	return 0
}

// Hostile runs the shapes in order: baseline (a normal 2 KB ORDER),
// many-parts, nested-json, then concurrent large mails.
func Hostile(ctx context.Context, f hostileFlags, log io.Writer) ([]*HostileCase, error) {
	dir, cleanup, err := workDir(f.work, "envelopd-hostile-")
	if err != nil {
		return nil, err
	}
	defer cleanup()
	fixed := func(name string, raw []byte) hostileShape {
		return hostileShape{name: name, count: 1, size: len(raw), write: func(_ int, w io.Writer) error {
			_, err := w.Write(raw)
			return err
		}}
	}
	shapes := []hostileShape{
		fixed("baseline-2kb", hostile.Normal("baseline")),
		fixed("many-parts", hostile.ManyParts("parts", f.parts)),
		fixed("nested-json", hostile.NestedBody("nested", f.nested)),
	}
	if f.concurrent > 0 {
		// Written while sent, so that this process stays small; distinct
		// Message-IDs, so that none is a redelivery.
		var cw countWriter
		hostile.WriteLarge(&cw, "large-0", f.large)
		shapes = append(shapes, hostileShape{name: "concurrent-large", count: f.concurrent, size: int(cw), write: func(i int, w io.Writer) error {
			_, err := hostile.WriteLarge(w, fmt.Sprintf("large-%d", i), f.large)
			return err
		}})
	}
	var cases []*HostileCase
	for i, s := range shapes {
		fmt.Fprintf(log, "-- %s: %d mail(s) of %d bytes\n", s.name, s.count, s.size)
		c, err := hostileCase(ctx, f, filepath.Join(dir, strconv.Itoa(i)), s)
		if err != nil {
			return cases, fmt.Errorf("%s: %w", s.name, err)
		}
		if len(cases) > 0 && cases[0].StoreSec > 0 && cases[0].ServeHWM > 0 {
			c.StoreRatio = c.StoreSec / cases[0].StoreSec
			c.RSSRatio = float64(c.ServeHWM) / float64(cases[0].ServeHWM)
		}
		cases = append(cases, c)
	}
	return cases, nil
}

// hostileShape is count mails of size bytes each, written by write (mail
// i to w).
type hostileShape struct {
	name        string
	count, size int
	write       func(i int, w io.Writer) error
}

type countWriter int64

func (c *countWriter) Write(b []byte) (int, error) {
	*c += countWriter(len(b))
	return len(b), nil
}

func hostileCase(ctx context.Context, f hostileFlags, dir string, s hostileShape) (*HostileCase, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	db := filepath.Join(dir, "envelopd.db")
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	args := append([]string{"serve", "--smtp", addr, "--db", db, "--oops=false", "--dkim-txt", os.DevNull}, strings.Fields(f.serveArgs)...)
	srv, err := startServer(ctx, f.bin, args, addr, filepath.Join(dir, "serve.log"))
	if err != nil {
		return nil, err
	}
	defer srv.kill()
	c := &HostileCase{Name: s.name, MailBytes: s.size, Mails: s.count}
	t0 := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := range s.count {
		wg.Go(func() {
			size := s.size
			if f.noSize {
				size = 0
			}
			err := sendOne(addr, size, func(w io.Writer) error { return s.write(i, w) })
			mu.Lock()
			defer mu.Unlock()
			var se *smtp.SMTPError
			switch {
			case err == nil:
				c.Accepted++
			case errors.As(err, &se) && se.Code == 451 && se.EnhancedCode == (smtp.EnhancedCode{4, 3, 2}):
				c.Busy++
			case c.OtherReply == "":
				c.OtherReply = err.Error()
			}
		})
	}
	wg.Wait()
	c.StoreSec = time.Since(t0).Seconds()
	if c.ServeHWM, err = vmHWM(srv.cmd.Process.Pid); err != nil {
		return nil, err
	}
	if err := srv.stop(); err != nil {
		return nil, fmt.Errorf("serve: %v (log %s)", err, srv.log)
	}
	c.DBBytes = dbSize(db)
	out, sec, hwm, err := runMeasured(ctx, f.bin, nil, "inbox", "--json", "--db", db)
	if err != nil {
		return nil, err
	}
	c.InboxSec, c.InboxHWM, c.InboxBytes = sec, hwm, len(out)
	file := filepath.Join(dir, "mail.eml")
	if err := writeFile(file, func(w io.Writer) error { return s.write(0, w) }); err != nil {
		return nil, err
	}
	out, sec, hwm, err = runMeasured(ctx, f.bin, []int{0, 1}, "parse", file)
	if err != nil {
		return nil, err
	}
	c.ParseSec, c.ParseHWM, c.ParseBytes = sec, hwm, len(out)
	c.LoadHWM, _ = vmHWM(os.Getpid())
	return c, nil
}

func writeFile(path string, write func(w io.Writer) error) error {
	fh, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if err := write(fh); err != nil {
		fh.Close()
		return err
	}
	return fh.Close()
}

// sendOne delivers a mail of size bytes, announced with SIZE (RFC 1870, as
// Postfix does; not when size is 0), in its own SMTP session; nil means
// 250.
func sendOne(addr string, size int, write func(w io.Writer) error) error {
	cl, err := smtp.Dial(addr)
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := cl.Hello("hostile.test"); err != nil {
		return err
	}
	var opts *smtp.MailOptions
	if size > 0 {
		opts = &smtp.MailOptions{Size: int64(size)}
	}
	if err := cl.Mail("mallory@attacker.test", opts); err != nil {
		return err
	}
	if err := cl.Rcpt("agent@envelopd.test", nil); err != nil {
		return err
	}
	w, err := cl.Data()
	if err != nil {
		return err
	}
	if err := write(w); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	cl.Quit()
	return nil
}

// runMeasured runs bin args, returning its standard output, wall time and
// peak RSS (getrusage ru_maxrss of the child). okCodes are the exit codes
// that are not failures (default: 0).
func runMeasured(ctx context.Context, bin string, okCodes []int, args ...string) ([]byte, float64, int64, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	t0 := time.Now()
	err := cmd.Run()
	sec := time.Since(t0).Seconds()
	if okCodes == nil {
		okCodes = []int{0}
	}
	if cmd.ProcessState == nil {
		return nil, 0, 0, err
	}
	ok := false
	for _, c := range okCodes {
		ok = ok || cmd.ProcessState.ExitCode() == c
	}
	if !ok {
		return nil, 0, 0, fmt.Errorf("envelopd %s: %v: %s", args[0], err, strings.TrimSpace(errb.String()))
	}
	var hwm int64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		hwm = int64(ru.Maxrss) * 1024 // kilobytes on Linux
	}
	return out.Bytes(), sec, hwm, nil
}

// vmHWM is a process's peak resident set size, from /proc/PID/status
// (proc(5): VmHWM, in kB).
func vmHWM(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return parseVmHWM(string(b))
}

func parseVmHWM(status string) (int64, error) {
	for _, line := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("VmHWM %q: %w", v, err)
			}
			return kb * 1024, nil
		}
	}
	return 0, errors.New("no VmHWM line in /proc status")
}

// dbSize is the database's size with its WAL (0 for files not there).
func dbSize(db string) int64 {
	var n int64
	for _, p := range []string{db, db + "-wal"} {
		if st, err := os.Stat(p); err == nil {
			n += st.Size()
		}
	}
	return n
}

func printHostile(w io.Writer, cases []*HostileCase) {
	mib := func(b int64) string { return fmt.Sprintf("%.0f", float64(b)/(1<<20)) }
	fmt.Fprintln(w, "shape              mails  bytes/mail  250  451  store_s  serve_MiB  x_base  db_MiB  inbox_s  inbox_MiB  parse_s  parse_MiB  parse_out  (inbox/parse MiB: upper bounds, include envelopd-load's own peak)")
	for _, c := range cases {
		fmt.Fprintf(w, "%-18s %5d  %10d  %3d  %3d  %7.2f  %9s  %6.1f  %6s  %7.2f  %9s  %7.2f  %9s  %9d\n",
			c.Name, c.Mails, c.MailBytes, c.Accepted, c.Busy, c.StoreSec, mib(c.ServeHWM), c.RSSRatio,
			mib(c.DBBytes), c.InboxSec, mib(c.InboxHWM), c.ParseSec, mib(c.ParseHWM), c.ParseBytes)
		if c.OtherReply != "" {
			fmt.Fprintf(w, "  %s: unexpected reply: %s\n", c.Name, c.OtherReply)
		}
	}
}
