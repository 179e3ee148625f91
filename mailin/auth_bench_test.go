package mailin

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/envelopd/envelopd/authguard"
	"github.com/envelopd/envelopd/store"
)

// BenchmarkAuthFailure measures a failed authentication. It prints, side by side,
// the median time of a failed relay authentication for a mailbox that
// exists (wrong password) and for one that does not, over 200 tries each
// (their ratio should be ≈ 1.0: the unknown user is checked against a
// dummy hash of the same parameters), and the CPU a flood of wrong AUTH
// PLAIN from 50 SMTP connections takes, in cores, against the configured
// hash concurrency (the bound), with 1 slot and with NumCPU slots. The flood runs without the per-IP
// throttle (as from 50 different addresses) so that only the hashing gate
// limits it. PBKDF2 rounds: DefaultPasswordIterations, or
// ENVELOPD_BENCH_ITERATIONS.
//
//	go test -run '^$' -bench AuthFailure -benchtime 1x ./mailin
func BenchmarkAuthFailure(b *testing.B) {
	iter := DefaultPasswordIterations
	if v, err := strconv.Atoi(os.Getenv("ENVELOPD_BENCH_ITERATIONS")); err == nil && v > 0 {
		iter = v
	}
	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	h, err := HashPassword("right", iter)
	if err != nil {
		b.Fatal(err)
	}
	if err := st.SetMailboxPassword(ctx, "bob@agents.test", h); err != nil {
		b.Fatal(err)
	}
	r := &Relay{Domains: []string{"agents.test"}, Store: st, PasswordIterations: iter}
	r.DummyHash()
	for range b.N {
		const tries = 200
		known, unknown := make([]time.Duration, 0, tries), make([]time.Duration, 0, tries)
		for i := range 2 * tries { // interleaved, so drift hits both alike
			user := "bob@agents.test"
			if i%2 == 1 {
				user = "nobody" + strconv.Itoa(i) + "@agents.test"
			}
			t0 := time.Now()
			if r.Authenticate(user, "wrong") == nil {
				b.Fatal("wrong password accepted")
			}
			if d := time.Since(t0); i%2 == 0 {
				known = append(known, d)
			} else {
				unknown = append(unknown, d)
			}
		}
		mk, mu := median(known), median(unknown)
		ratio := float64(mu) / float64(mk)
		fmt.Printf("auth failure, PBKDF2-SHA256 %d rounds, median of %d tries:\n", iter, tries)
		fmt.Printf("  %-28s %10s\n  %-28s %10s\n  %-28s %10.3f\n", "known user, wrong password", mk.Round(10*time.Microsecond),
			"unknown user", mu.Round(10*time.Microsecond), "ratio unknown/known", ratio)
		b.ReportMetric(float64(mk.Microseconds())/1000, "known-ms")
		b.ReportMetric(float64(mu.Microseconds())/1000, "unknown-ms")
		b.ReportMetric(ratio, "ratio")

		for _, n := range []int{1, runtime.NumCPU()} {
			hashing, cores, slots, attempts, busy := authFlood(b, r, n, 50, 5*time.Second)
			fmt.Printf("flood: 50 connections of wrong AUTH PLAIN for 5s, --auth-hash-concurrency %d: hashing %.2f cores (bound %d); "+
				"whole process incl. the 50 clients %.2f cores; %d checks, %d answered 454\n",
				slots, hashing, slots, cores, attempts, busy)
			b.ReportMetric(hashing, fmt.Sprintf("hash-cores-%dslot", slots))
		}
	}
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// authFlood runs conns SMTP connections sending wrong AUTH PLAIN for d
// against a server whose guard has the default gate and no throttle, and
// returns the time spent hashing over the period in cores (each hash is
// one goroutine's CPU-bound work), and the whole process's CPU, the
// clients' share included.
func authFlood(b *testing.B, r *Relay, slots, conns int, d time.Duration) (hashing, cores float64, nslots int, checks, busy int64) {
	gate := authguard.NewGate(slots, 0, 0)
	var hashTime atomic.Int64
	r.CheckPassword = func(hash, pw string) error {
		t0 := time.Now()
		defer func() { hashTime.Add(int64(time.Since(t0))) }()
		return CheckPassword(hash, pw)
	}
	defer func() { r.CheckPassword = nil }()
	var n atomic.Int64
	router := &countingRouter{Relay: r, n: &n}
	srv, err := NewSMTPServer(SMTPConfig{Addr: "127.0.0.1:0", Router: router, MaxConnections: conns + 10,
		MaxConnectionsPerIP: -1, MaxIdleCommands: -1, Auth: &authguard.Guard{Gate: gate, SessionFailures: 1 << 30}}, &Pipeline{Store: r.Store})
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve()
	defer srv.Close()
	addr := srv.Addr().String()
	stop := time.Now().Add(d)
	var nbusy atomic.Int64
	var wg sync.WaitGroup
	cpu0, t0 := cpuTime(), time.Now()
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				return
			}
			defer c.Close()
			ac := &abuseConn{Conn: c, r: bufio.NewReader(c)}
			c.SetDeadline(stop.Add(time.Minute))
			readReply(ac.r)
			io.WriteString(c, "EHLO flood.test\r\n")
			readReply(ac.r)
			for time.Now().Before(stop) {
				io.WriteString(c, "AUTH PLAIN "+plainResp("bob@agents.test", "guess")+"\r\n")
				code, _, err := readReply(ac.r)
				if err != nil {
					return
				}
				if code == 454 {
					nbusy.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	wall := time.Since(t0).Seconds()
	cores = (cpuTime() - cpu0).Seconds() / wall
	hashing = time.Duration(hashTime.Load()).Seconds() / wall
	return hashing, cores, gate.Slots(), n.Load(), nbusy.Load()
}

type countingRouter struct {
	*Relay
	n *atomic.Int64
}

func (c *countingRouter) Authenticate(user, pass string) error {
	c.n.Add(1)
	return c.Relay.Authenticate(user, pass)
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
