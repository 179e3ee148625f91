package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/envelopd/envelopd/dkim"
	"github.com/envelopd/envelopd/mailin"
	"github.com/envelopd/envelopd/store"
)

// Budget is what `envelopd-load budget` measured for one client: the CPU
// the no-op pair (baseline server and client) uses per message, the CPU
// envelopd's own stages use per message when each runs alone in this
// process on the same mails, and the highest envelopd/baseline ratio those
// costs leave room for.
//
// The floor is a lower bound of what `envelopd serve` must spend per
// message: the no-op server's SMTP work, the client's, the analysis (DKIM
// verification, parse, tunnelled validators, the store record) and the
// store's durable ingest, measured with the store at its best (all
// sessions writing at once, so transactions are as large as they get).
// It leaves out everything else serve does (its own session handling,
// smaller transactions, the scheduling between stages), so the ratios
// below are upper bounds of what the present stages allow, not forecasts.
type Budget struct {
	Mode     string `json:"mode"` // "envelopd-load" or "smtp-source"
	CPUs     int    `json:"cpus"`
	Messages int    `json:"messages"`

	BaselineMsgPerSec float64 `json:"baseline_msg_per_sec"`
	BaselineServerCPU float64 `json:"baseline_server_cpu_us"` // per message
	BaselineClientCPU float64 `json:"baseline_client_cpu_us"`
	// BaselineCPUUse is the share of all CPUs the no-op run kept busy.
	BaselineCPUUse float64 `json:"baseline_cpu_use"`

	// DKIMPass counts the mails whose DKIM signatures all verified (the
	// work measured is the passing path); StoreStatus counts the store's
	// outcomes ("accepted": 20000).
	DKIMPass    int            `json:"dkim_pass"`
	StoreStatus map[string]int `json:"store_status"`

	DKIMCPU    float64 `json:"dkim_cpu_us"`    // DKIM verification alone
	AnalyzeCPU float64 `json:"analyze_cpu_us"` // DKIM, parse, validators, store record
	StoreCPU   float64 `json:"store_cpu_us"`   // durable ingest into a fresh SQLite store
	StoreBatch float64 `json:"store_msg_per_commit"`

	FloorCPU float64 `json:"floor_cpu_us"` // baseline server + client + analyze + store
	// MaxMsgPerSec is CPUs ÷ floor: envelopd's rate if every CPU were busy
	// all the time and nothing beyond the floor cost anything.
	MaxMsgPerSec float64 `json:"max_msg_per_sec"`
	MaxRatio     float64 `json:"max_ratio"` // MaxMsgPerSec ÷ baseline rate
	// MaxRatioSameUse is the ratio bound if envelopd's run kept the CPUs as
	// busy as the no-op run did: baseline pair CPU ÷ floor.
	MaxRatioSameUse float64 `json:"max_ratio_at_baseline_cpu_use"`
	Target          float64 `json:"target_ratio"` // 0.5 and 0.7
}

// bound fills the floor and the ratio bounds from the measured parts.
func (b *Budget) bound() {
	pair := b.BaselineServerCPU + b.BaselineClientCPU
	b.FloorCPU = pair + b.AnalyzeCPU + b.StoreCPU
	if b.CPUs > 0 && b.BaselineMsgPerSec > 0 {
		b.BaselineCPUUse = b.BaselineMsgPerSec * pair / 1e6 / float64(b.CPUs)
	}
	if b.FloorCPU <= 0 {
		return
	}
	b.MaxMsgPerSec = float64(b.CPUs) * 1e6 / b.FloorCPU
	if b.BaselineMsgPerSec > 0 {
		b.MaxRatio = b.MaxMsgPerSec / b.BaselineMsgPerSec
	}
	b.MaxRatioSameUse = pair / b.FloorCPU
}

type budgetFlags struct {
	loadFlags
	workFlags
}

func runBudget(ctx context.Context, e *env) int {
	fs := newFlags(e, "budget")
	var f budgetFlags
	f.register(fs)
	f.registerWork(fs, "also bound the smtp-source comparison (its mails, its client)")
	if err := fs.Parse(e.args); err != nil {
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintf(e.stderr, "envelopd-load budget: %v\n", err)
		return 2
	}
	if fs.NArg() > 0 {
		return fail(fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	}
	w, err := setupWorkspace(&f.loadFlags, &f.workFlags, "envelopd-budget-", e.stderr)
	if err != nil {
		return fail(err)
	}
	defer w.cleanup()
	c := w.corpus
	servers := serverSet{self: w.self, dir: w.dir, txt: w.txt, stderr: e.stderr}
	v, err := staticVerifier(c)
	if err != nil {
		return fail(err)
	}

	var out []*Budget
	opts := DriveOptions{Sessions: f.sessions, KeepOpen: f.keepOpen, NoPipelining: f.noPipelining}
	raws := make([][]byte, len(c.Mails))
	for i := range c.Mails {
		raws[i] = unstuff(c.Mails[i].Data)
	}
	base, err := servers.baseline(ctx, "envelopd-load", func(addr string) (*Result, error) {
		o := opts
		o.Addr = addr
		return Drive(ctx, c.Mails, o), nil
	})
	if err != nil {
		return fail(err)
	}
	if base.Accepted != base.Messages {
		return fail(fmt.Errorf("the no-op server accepted %d of %d mails: %s", base.Accepted, base.Messages, base.FirstError))
	}
	// measure adds the budget of one client (mode) whose no-op run was
	// base, its stages measured on raws (into a store of its own:
	// budget-1.db, budget-2.db), with the ratio it is held to.
	measure := func(mode string, base *Result, raws [][]byte, target float64) error {
		b, err := measureBudget(ctx, mode, base, raws, v, f.sessions, filepath.Join(w.dir, fmt.Sprintf("budget-%d.db", len(out)+1)))
		if err != nil {
			return err
		}
		b.Target = target
		out = append(out, b)
		return nil
	}
	if err := measure("envelopd-load", base, raws, 0.5); err != nil {
		return fail(err)
	}

	if f.smtpSource {
		base, err := servers.baseline(ctx, "smtp-source", func(addr string) (*Result, error) {
			return smtpSource(ctx, f.sourceBin, addr, f.sessions, f.messages, f.size)
		})
		if err != nil {
			return fail(err)
		}
		if base.Accepted != base.Messages {
			return fail(fmt.Errorf("smtp-source against the no-op server: %s", base.FirstError))
		}
		// The same mails again, into this process, for the stages.
		raws, err := captureSMTPSource(ctx, f.sourceBin, f.sessions, f.messages, f.size)
		if err != nil {
			return fail(err)
		}
		if err := measure("smtp-source", base, raws, 0.7); err != nil {
			return fail(err)
		}
	}

	if f.jsonOut {
		enc := json.NewEncoder(e.stdout)
		for _, b := range out {
			enc.Encode(b)
		}
		return 0
	}
	for _, b := range out {
		printBudget(e.stdout, b)
	}
	return 0
}

func printBudget(w io.Writer, b *Budget) {
	fmt.Fprintf(w, "[%s] no-op pair: %.0f msg/s, CPU per message server %.0f µs + client %.0f µs (%.0f %% of %d CPUs busy)\n",
		b.Mode, b.BaselineMsgPerSec, b.BaselineServerCPU, b.BaselineClientCPU, b.BaselineCPUUse*100, b.CPUs)
	fmt.Fprintf(w, "[%s] envelopd stages alone, CPU per message: DKIM %.0f µs (%d of %d mails signed and passing), analysis in all (DKIM, parse, validators, store record) %.0f µs, store %.0f µs (%.1f msg/commit; %s)\n",
		b.Mode, b.DKIMCPU, b.DKIMPass, b.Messages, b.AnalyzeCPU, b.StoreCPU, b.StoreBatch, formatCounts(b.StoreStatus))
	fmt.Fprintf(w, "[%s] floor %.0f µs per message: at most %.0f msg/s on %d CPUs, ratio ≤ %.2f (≤ %.2f at the no-op run's CPU use); target %.1f\n",
		b.Mode, b.FloorCPU, b.MaxMsgPerSec, b.CPUs, b.MaxRatio, b.MaxRatioSameUse, b.Target)
}

// staticVerifier verifies against the corpus's own keys, as `serve
// --dkim-txt` does.
func staticVerifier(c *Corpus) (*dkim.Verifier, error) {
	res, err := dkim.ParseStatic(strings.NewReader(strings.Join(c.TXT, "\n")))
	if err != nil {
		return nil, err
	}
	return &dkim.Verifier{Resolver: res}, nil
}

// measureBudget runs envelopd's stages over raws in this process, each
// alone and on all CPUs, and computes the bounds against base.
func measureBudget(ctx context.Context, mode string, base *Result, raws [][]byte, v *dkim.Verifier, sessions int, db string) (*Budget, error) {
	n := len(raws)
	if n == 0 {
		return nil, errors.New("no mails")
	}
	b := &Budget{Mode: mode, CPUs: runtime.NumCPU(), Messages: n, BaselineMsgPerSec: base.MsgPerSec}
	if base.Accepted > 0 {
		b.BaselineServerCPU = base.ServerCPUSeconds / float64(base.Accepted) * 1e6
		b.BaselineClientCPU = base.ClientCPUSeconds / float64(base.Accepted) * 1e6
	}
	workers := runtime.GOMAXPROCS(0)

	var dkimErr atomic.Value
	var pass atomic.Int64
	b.DKIMCPU = cpuPerItem(n, func() {
		parallel(n, workers, func(i int) {
			res, err := v.Verify(ctx, raws[i])
			if err != nil {
				dkimErr.Store(err)
			} else if len(res) > 0 && dkim.AllPass(res) {
				pass.Add(1)
			}
		})
	})
	b.DKIMPass = int(pass.Load())
	if err, _ := dkimErr.Load().(error); err != nil {
		return nil, fmt.Errorf("dkim: %w", err)
	}

	// What serve's pipeline does before the store, as serve sets it up
	// for this load (no hand-off targets, no smarthost for OOPS).
	p := &mailin.Pipeline{Verifier: v, AuthServID: "localhost"}
	ins := make([]*store.Incoming, n)
	b.AnalyzeCPU = cpuPerItem(n, func() {
		parallel(n, workers, func(i int) {
			_, ins[i] = p.Prepare(ctx, raws[i], mailin.Meta{Source: "smtp"})
		})
	})

	st, err := store.OpenSQLite(ctx, db)
	if err != nil {
		return nil, err
	}
	var storeErr atomic.Value
	status := make([]string, n)
	b.StoreCPU = cpuPerItem(n, func() {
		parallel(n, max(1, sessions), func(i int) {
			out, err := st.Ingest(ctx, ins[i])
			if err != nil {
				storeErr.Store(err)
			}
			status[i] = out.Status
		})
	})
	b.StoreStatus = map[string]int{}
	for _, s := range status {
		b.StoreStatus[s]++
	}
	stats := st.Stats()
	if err := st.Close(); err != nil {
		return nil, err
	}
	if err, _ := storeErr.Load().(error); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	if stats.Commits > 0 {
		b.StoreBatch = float64(stats.Writes) / float64(stats.Commits)
	}
	b.bound()
	return b, nil
}

// cpuPerItem runs fn and returns the CPU time (user + system, this
// process) it used, in µs per item. A collection first, so that garbage
// of earlier stages is not charged to this one.
func cpuPerItem(n int, fn func()) float64 {
	runtime.GC()
	c0 := rusageCPU(syscall.RUSAGE_SELF)
	fn()
	return float64((rusageCPU(syscall.RUSAGE_SELF) - c0).Nanoseconds()) / 1e3 / float64(n)
}

// parallel calls fn(0…n-1) from workers goroutines.
func parallel(n, workers int, fn func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				fn(i)
			}
		})
	}
	wg.Wait()
}

// unstuff undoes SMTP dot-stuffing (RFC 5321 section 4.5.2): a line that
// starts with a period lost its first one.
func unstuff(data []byte) []byte {
	out := make([]byte, 0, len(data))
	for line := range bytes.Lines(data) {
		if len(line) > 0 && line[0] == '.' {
			line = line[1:]
		}
		out = append(out, line...)
	}
	return out
}

// captureSMTPSource runs smtp-source against an in-process server that
// keeps every message, and returns them in arrival order.
func captureSMTPSource(ctx context.Context, bin string, sessions, messages, size int) ([][]byte, error) {
	cb := &captureBackend{}
	srv := smtp.NewServer(cb)
	srv.Domain = "localhost"
	srv.MaxMessageBytes = noopMaxMessageBytes
	srv.MaxLineLength = noopMaxLineLength
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	srv.Addr = addr
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	defer srv.Close()
	if err := WaitSMTP(ctx, addr, 10*time.Second, nil); err != nil {
		return nil, err
	}
	r, err := smtpSource(ctx, bin, addr, sessions, messages, size)
	if err != nil {
		return nil, err
	}
	if r.Accepted != messages {
		return nil, fmt.Errorf("capturing smtp-source's mails: %s", r.FirstError)
	}
	cb.mu.Lock()
	defer cb.mu.Unlock()
	if len(cb.mails) != messages {
		return nil, fmt.Errorf("captured %d of smtp-source's %d mails", len(cb.mails), messages)
	}
	return cb.mails, nil
}

type captureBackend struct {
	mu    sync.Mutex
	mails [][]byte
}

func (b *captureBackend) NewSession(*smtp.Conn) (smtp.Session, error) {
	return &captureSession{b: b}, nil
}

type captureSession struct{ b *captureBackend }

func (*captureSession) Mail(string, *smtp.MailOptions) error { return nil }
func (*captureSession) Rcpt(string, *smtp.RcptOptions) error { return nil }
func (*captureSession) Reset()                               {}
func (*captureSession) Logout() error                        { return nil }

func (s *captureSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.b.mu.Lock()
	s.b.mails = append(s.b.mails, b)
	s.b.mu.Unlock()
	return nil
}
