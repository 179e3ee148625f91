package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"
)

// Comparison is one mode of `compare`: the same client against envelopd
// and against the no-op baseline, in the same run.
type Comparison struct {
	Mode     string  `json:"mode"` // "envelopd-load" or "smtp-source"
	Run      int     `json:"run"`  // 1…runs
	Envelopd *Result `json:"envelopd"`
	Baseline *Result `json:"baseline"`
	Ratio    float64 `json:"ratio"` // envelopd msg/s ÷ baseline msg/s
	// Stored counts envelopd's stored messages by status after the run.
	Stored map[string]int `json:"stored,omitempty"`
}

// Summary is the median of a mode's runs (compare --runs N).
type Summary struct {
	Mode     string    `json:"mode"`
	Runs     int       `json:"runs"`
	Ratios   []float64 `json:"ratios"`       // each run's, in run order
	Median   float64   `json:"median_ratio"` // of Ratios
	Envelopd float64   `json:"envelopd_msg_per_sec"`
	Baseline float64   `json:"baseline_msg_per_sec"` // medians of the runs' rates
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func summarize(mode string, cmps []*Comparison) Summary {
	sum := Summary{Mode: mode, Runs: len(cmps)}
	var env, base []float64
	for _, c := range cmps {
		sum.Ratios = append(sum.Ratios, c.Ratio)
		env = append(env, c.Envelopd.MsgPerSec)
		base = append(base, c.Baseline.MsgPerSec)
	}
	sum.Median, sum.Envelopd, sum.Baseline = median(sum.Ratios), median(env), median(base)
	return sum
}

type compareFlags struct {
	loadFlags
	workFlags
	envelopdBin, serveArgs string
	runs                   int
}

// workFlags are the flags compare and budget share besides loadFlags.
type workFlags struct {
	sourceBin, keepDir string
	smtpSource         bool
}

func (f *workFlags) registerWork(fs *flag.FlagSet, smtpSourceHelp string) {
	fs.BoolVar(&f.smtpSource, "smtp-source", false, smtpSourceHelp)
	fs.StringVar(&f.sourceBin, "smtp-source-bin", "smtp-source", "smtp-source binary")
	fs.StringVar(&f.keepDir, "dir", "", "work directory (databases, key file, server logs); default a temporary one, removed afterwards")
}

// workspace is what compare and budget set up before they measure: the
// work directory (--dir, or a temporary one that cleanup removes), the
// generated mails and their DKIM key file in it.
type workspace struct {
	self, dir, txt string
	corpus         *Corpus
	cleanup        func()
}

func setupWorkspace(lf *loadFlags, wf *workFlags, tempPrefix string, stderr io.Writer) (*workspace, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	w := &workspace{self: self, dir: wf.keepDir, cleanup: func() {}}
	if w.dir == "" {
		if w.dir, err = os.MkdirTemp("", tempPrefix); err != nil {
			return nil, err
		}
		w.cleanup = func() { os.RemoveAll(w.dir) }
	} else if err := os.MkdirAll(w.dir, 0o755); err != nil {
		return nil, err
	}
	if w.corpus, err = lf.generate(stderr); err != nil {
		w.cleanup()
		return nil, err
	}
	w.txt = filepath.Join(w.dir, "dkim.txt")
	if err := writeTXT(w.txt, w.corpus); err != nil {
		w.cleanup()
		return nil, err
	}
	return w, nil
}

func runCompare(ctx context.Context, e *env) int {
	fs := newFlags(e, "compare")
	var f compareFlags
	f.register(fs)
	fs.StringVar(&f.envelopdBin, "envelopd-bin", "", "envelopd binary (default: next to this one, then $PATH)")
	f.registerWork(fs, "also compare with Postfix's smtp-source (reconnects per message)")
	fs.StringVar(&f.serveArgs, "serve-args", "", "extra arguments for envelopd serve (space separated, e.g. --cpuprofile FILE)")
	fs.IntVar(&f.runs, "runs", 1, "repeat each comparison this many times (baseline and envelopd alternating, a fresh database each time) and also print the medians")
	if err := fs.Parse(e.args); err != nil {
		return 2
	}
	if f.runs < 1 {
		fmt.Fprintf(e.stderr, "envelopd-load compare: --runs must be at least 1\n")
		return 2
	}
	bin, err := findEnvelopd(f.envelopdBin)
	if err != nil {
		fmt.Fprintf(e.stderr, "envelopd-load compare: %v\n", err)
		return 2
	}
	w, err := setupWorkspace(&f.loadFlags, &f.workFlags, "envelopd-compare-", e.stderr)
	if err != nil {
		fmt.Fprintf(e.stderr, "envelopd-load compare: %v\n", err)
		return 2
	}
	defer w.cleanup()
	c := w.corpus
	servers := serverSet{self: w.self, envelopd: bin, dir: w.dir, txt: w.txt, serveArgs: strings.Fields(f.serveArgs), stderr: e.stderr}

	opts := DriveOptions{Sessions: f.sessions, KeepOpen: f.keepOpen, NoPipelining: f.noPipelining}
	var out []*Comparison
	byMode := map[string][]*Comparison{}
	modes := []string{"envelopd-load"}
	if f.smtpSource {
		modes = append(modes, "smtp-source")
	}
	for run := 1; run <= f.runs; run++ {
		for _, mode := range modes {
			drive := func(addr string) (*Result, error) {
				o := opts
				o.Addr = addr
				return Drive(ctx, c.Mails, o), nil
			}
			if mode == "smtp-source" {
				drive = func(addr string) (*Result, error) {
					return smtpSource(ctx, f.sourceBin, addr, f.sessions, f.messages, f.size)
				}
			}
			cmp, err := servers.compare(ctx, mode, drive)
			if err != nil {
				fmt.Fprintf(e.stderr, "envelopd-load compare: %v\n", err)
				return 2
			}
			cmp.Run = run
			out = append(out, cmp)
			byMode[mode] = append(byMode[mode], cmp)
		}
	}
	code := 0
	for _, cmp := range out {
		if cmp.Envelopd.Accepted != cmp.Envelopd.Messages || cmp.Baseline.Accepted != cmp.Baseline.Messages {
			code = 1
		}
	}
	if f.jsonOut {
		enc := json.NewEncoder(e.stdout)
		for _, cmp := range out {
			enc.Encode(cmp)
		}
		if f.runs > 1 {
			for _, mode := range modes {
				enc.Encode(summarize(mode, byMode[mode]))
			}
		}
		return code
	}
	for _, cmp := range out {
		run := ""
		if f.runs > 1 {
			run = fmt.Sprintf(" run %d/%d:", cmp.Run, f.runs)
		}
		fmt.Fprintf(e.stdout, "[%s]%s envelopd %.0f msg/s, baseline %.0f msg/s, ratio %.2f\n",
			cmp.Mode, run, cmp.Envelopd.MsgPerSec, cmp.Baseline.MsgPerSec, cmp.Ratio)
		printResult(e.stdout, "  envelopd", cmp.Envelopd)
		printResult(e.stdout, "  baseline", cmp.Baseline)
		if len(cmp.Stored) > 0 {
			fmt.Fprintf(e.stdout, "  envelopd stored: %s\n", formatCounts(cmp.Stored))
		}
	}
	if f.runs > 1 {
		for _, mode := range modes {
			sum := summarize(mode, byMode[mode])
			rs := make([]string, len(sum.Ratios))
			for i, r := range sum.Ratios {
				rs[i] = fmt.Sprintf("%.2f", r)
			}
			fmt.Fprintf(e.stdout, "[%s] median of %d runs: envelopd %.0f msg/s, baseline %.0f msg/s, ratio %.2f (ratios %s)\n",
				mode, sum.Runs, sum.Envelopd, sum.Baseline, sum.Median, strings.Join(rs, ", "))
		}
	}
	return code
}

// findEnvelopd resolves the envelopd binary: flag, sibling, $PATH.
func findEnvelopd(flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), "envelopd")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	p, err := exec.LookPath("envelopd")
	if err != nil {
		return "", errors.New("no envelopd binary next to envelopd-load or in $PATH; pass --envelopd-bin")
	}
	return p, nil
}

type serverSet struct {
	self, envelopd, dir, txt string
	serveArgs                []string
	stderr                   io.Writer
	n                        int
}

// compare runs drive against the no-op server and then against a fresh
// envelopd serve (its own empty database), each a separate process on a
// free loopback port.
func (s *serverSet) compare(ctx context.Context, mode string, drive func(addr string) (*Result, error)) (*Comparison, error) {
	cmp := &Comparison{Mode: mode}
	var err error
	if cmp.Baseline, err = s.baseline(ctx, mode, drive); err != nil {
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	db := filepath.Join(s.dir, fmt.Sprintf("envelopd-%d.db", s.n))
	args := append([]string{"serve", "--smtp", addr, "--db", db, "--dkim-txt", s.txt}, s.serveArgs...)
	srv, err := startServer(ctx, s.envelopd, args, addr, filepath.Join(s.dir, fmt.Sprintf("envelopd-%d.log", s.n)))
	if err != nil {
		return nil, fmt.Errorf("envelopd serve: %w", err)
	}
	meter := startCPU(srv.cmd.Process.Pid)
	cmp.Envelopd, err = drive(addr)
	meter.stop(cmp.Envelopd)
	if stopErr := srv.stop(); stopErr != nil {
		fmt.Fprintf(s.stderr, "[%s] envelopd serve: %v (log %s)\n", mode, stopErr, srv.log)
	}
	if err != nil {
		return nil, fmt.Errorf("envelopd: %w", err)
	}
	fmt.Fprintf(s.stderr, "[%s] envelopd: %.0f msg/s\n", mode, cmp.Envelopd.MsgPerSec)
	if cmp.Baseline.MsgPerSec > 0 {
		cmp.Ratio = cmp.Envelopd.MsgPerSec / cmp.Baseline.MsgPerSec
	}
	if st, err := storedCounts(ctx, s.envelopd, db); err == nil {
		cmp.Stored = st
	} else {
		fmt.Fprintf(s.stderr, "[%s] envelopd inbox: %v\n", mode, err)
	}
	return cmp, nil
}

// baseline runs drive against the no-op server (a child process on a free
// loopback port) and measures the CPU both sides use. Each call starts a
// new run number n for the log and database names.
func (s *serverSet) baseline(ctx context.Context, mode string, drive func(addr string) (*Result, error)) (*Result, error) {
	s.n++
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	noop, err := startServer(ctx, s.self, []string{"noop", "--addr", addr}, addr, filepath.Join(s.dir, fmt.Sprintf("noop-%d.log", s.n)))
	if err != nil {
		return nil, fmt.Errorf("no-op server: %w", err)
	}
	meter := startCPU(noop.cmd.Process.Pid)
	r, err := drive(addr)
	meter.stop(r)
	noop.stop()
	if err != nil {
		return nil, fmt.Errorf("baseline: %w", err)
	}
	fmt.Fprintf(s.stderr, "[%s] baseline: %.0f msg/s\n", mode, r.MsgPerSec)
	return r, nil
}

// storedCounts runs `envelopd inbox --json` and counts messages by status.
func storedCounts(ctx context.Context, bin, db string) (map[string]int, error) {
	views, err := Inbox(ctx, bin, db)
	if err != nil {
		return nil, err
	}
	m := map[string]int{}
	for _, v := range views {
		m[v.Status]++
	}
	return m, nil
}

// StoredView is the part of an `envelopd inbox --json` line this tool reads.
type StoredView struct {
	ID        int64  `json:"id"`
	MessageID string `json:"message_id"`
	Status    string `json:"status"`
	Type      string `json:"type"`
	Direction string `json:"direction"` // "in", or "out" for a stored copy of mail envelopd sent
}

// Inbox lists the messages stored in db with `envelopd inbox --json`.
func Inbox(ctx context.Context, bin, db string) ([]StoredView, error) {
	cmd := exec.CommandContext(ctx, bin, "inbox", "--json", "--db", db)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%v: %s", err, strings.TrimSpace(stderr.String()))
	}
	var views []StoredView
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		var v StoredView
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			return nil, fmt.Errorf("inbox line %q: %w", sc.Text(), err)
		}
		views = append(views, v)
	}
	return views, sc.Err()
}

func formatCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d %s", m[k], k))
	}
	return strings.Join(parts, ", ")
}

// freeAddr is a loopback address with a port free right now.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// server is a server child process.
type server struct {
	cmd    *exec.Cmd
	log    string
	exited chan struct{} // closed when the process has ended; err is then set
	err    error
}

// startServer starts bin with args, its output to logPath, and waits until
// addr answers with an SMTP greeting (at most 20 s).
func startServer(ctx context.Context, bin string, args []string, addr, logPath string) (*server, error) {
	return startServerAttr(ctx, bin, args, addr, logPath, nil)
}

// startServerAttr is startServer with process attributes (e.g. another
// user's credentials).
func startServerAttr(ctx context.Context, bin string, args []string, addr, logPath string, attr *syscall.SysProcAttr) (*server, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = attr
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	s := &server{cmd: cmd, log: logPath, exited: make(chan struct{})}
	go func() {
		s.err = cmd.Wait()
		logf.Close()
		close(s.exited)
	}()
	if err := WaitSMTP(ctx, addr, 20*time.Second, s.exited); err != nil {
		s.kill()
		return nil, fmt.Errorf("%w (log %s)", err, logPath)
	}
	return s, nil
}

// WaitSMTP waits until addr answers with a 220 greeting. exited, when it
// is closed, means the server process ended first.
func WaitSMTP(ctx context.Context, addr string, limit time.Duration, exited <-chan struct{}) error {
	deadline := time.Now().Add(limit)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.SetDeadline(time.Now().Add(2 * time.Second))
			line, rerr := bufio.NewReader(conn).ReadString('\n')
			conn.Close()
			if rerr == nil && strings.HasPrefix(line, "220") {
				return nil
			}
		}
		select {
		case <-exited:
			return errors.New("server exited before listening")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no SMTP greeting on %s after %v", addr, limit)
		}
	}
}

// stop sends SIGTERM and waits (up to 30 s, then SIGKILL). Stopping a
// server that has already ended returns how it ended.
func (s *server) stop() error {
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
		return s.err
	case <-time.After(30 * time.Second):
		s.kill()
		return errors.New("did not stop within 30 s of SIGTERM; killed")
	}
}

// kill sends SIGKILL and waits for the process to end (at once if it
// already has).
func (s *server) kill() {
	s.cmd.Process.Kill()
	<-s.exited
}

// running reports whether the process has not ended yet.
func (s *server) running() bool {
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// smtpSource drives addr with Postfix's smtp-source: sessions parallel
// sessions, messages in all, size bytes each, a new connection per
// message. smtp-source reports no per-message outcome: it stops with an
// error on the first unexpected reply, so exit status 0 means every
// message was accepted. Latencies are not measured.
func smtpSource(ctx context.Context, bin, addr string, sessions, messages, size int) (*Result, error) {
	cmd := exec.CommandContext(ctx, bin, "-s", fmt.Sprint(sessions), "-l", fmt.Sprint(size), "-m", fmt.Sprint(messages),
		"-f", "load@agents.load.test", "-t", "inbox@envelopd.test", addr)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	t0 := time.Now()
	err := cmd.Run()
	el := time.Since(t0)
	r := &Result{Addr: addr, Sessions: sessions, Messages: messages, Seconds: el.Seconds()}
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			return nil, err
		}
		r.Failed = messages
		r.FirstError = fmt.Sprintf("smtp-source: %v: %s", err, strings.TrimSpace(out.String()))
		return r, nil
	}
	r.Accepted = messages
	r.MsgPerSec = float64(messages) / el.Seconds()
	return r, nil
}

// workDir is dir, or when dir is "" a new temporary directory (named
// with prefix) that cleanup removes.
func workDir(dir, prefix string) (string, func(), error) {
	if dir != "" {
		return dir, func() {}, nil
	}
	d, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", nil, err
	}
	return d, func() { os.RemoveAll(d) }, nil
}
