package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// strangerCounts is what the strangers did: requests sent, requests
// answered, by status (a request still held when its phase ended is
// sent, not answered).
type strangerCounts struct {
	Sent     int64         `json:"sent"`
	Requests int64         `json:"requests"`
	Status   map[int]int64 `json:"status"`
}

// strangerClients are the unauthenticated clients of api-abuse: n of them,
// each from its own loopback address (127.0.1.3, …), each sending GET
// /v0/inboxes at rate a second, alternately without a key and with a
// wrong one, one request at a time on one kept-alive connection.
type strangerClients struct {
	base string
	n    int
	rate float64

	sent   atomic.Int64
	reqs   atomic.Int64
	mu     sync.Mutex
	status map[int]int64
}

func newStrangers(base string, n int, rate float64) *strangerClients {
	return &strangerClients{base: base, n: n, rate: rate, status: map[int]int64{}}
}

// start starts the clients; the returned stop ends them and waits.
func (s *strangerClients) start(ctx context.Context) (stop func()) {
	actx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := range s.n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src := &net.TCPAddr{IP: net.IPv4(127, 0, byte(1+(i+1)/250), byte(2+(i+1)%250))}
			c := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: src}).DialContext, MaxIdleConnsPerHost: 1}}
			defer c.CloseIdleConnections()
			tick := time.NewTicker(time.Duration(float64(time.Second) / s.rate))
			defer tick.Stop()
			for n := 0; ; n++ {
				select {
				case <-actx.Done():
					return
				case <-tick.C:
				}
				req, _ := http.NewRequestWithContext(actx, "GET", s.base+"/v0/inboxes", nil)
				if n%2 == 1 {
					req.Header.Set("Authorization", fmt.Sprintf("Bearer ek_%012x_%s", n, strings.Repeat("A", 43)))
				}
				s.sent.Add(1)
				resp, err := c.Do(req)
				if err != nil {
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				s.reqs.Add(1)
				s.mu.Lock()
				s.status[resp.StatusCode]++
				s.mu.Unlock()
			}
		}()
	}
	return func() { cancel(); wg.Wait() }
}

// counts returns the requests answered so far.
func (s *strangerClients) counts() strangerCounts {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := strangerCounts{Sent: s.sent.Load(), Requests: s.reqs.Load(), Status: map[int]int64{}}
	for k, v := range s.status {
		c.Status[k] = v
	}
	return c
}

// strangerProcess runs the strangers in a process of their own (this
// program's api-abuse-strangers command), so that their CPU is counted
// apart from the server's: a line "start" on its standard input starts
// them, "stop" stops them and has the counts so far written back as one
// JSON line.
type strangerProcess struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func startStrangerProcess(ctx context.Context, base string, n int, rate float64) (*strangerProcess, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, exe, "api-abuse-strangers", "--target", base,
		"--strangers", fmt.Sprint(n), "--stranger-rate", fmt.Sprint(rate))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &strangerProcess{cmd: cmd, in: in, out: bufio.NewReader(out)}, nil
}

func (p *strangerProcess) start() error {
	_, err := io.WriteString(p.in, "start\n")
	return err
}

func (p *strangerProcess) stop() (strangerCounts, error) {
	var c strangerCounts
	if _, err := io.WriteString(p.in, "stop\n"); err != nil {
		return c, err
	}
	line, err := p.out.ReadBytes('\n')
	if err != nil {
		return c, fmt.Errorf("strangers process: %w", err)
	}
	return c, json.Unmarshal(line, &c)
}

// cpu is the CPU time the process has used so far.
func (p *strangerProcess) cpu() (time.Duration, error) { return procCPU(p.cmd.Process.Pid) }

func (p *strangerProcess) close() error {
	p.in.Close()
	return p.cmd.Wait()
}

// runAPIAbuseStrangers is the strangers process of api-abuse
// --strangers-process.
func runAPIAbuseStrangers(ctx context.Context, e *env) int {
	fs := newFlags(e, "api-abuse-strangers")
	target := fs.String("target", "", "base URL of the API")
	n := fs.Int("strangers", 100, "unauthenticated clients")
	rate := fs.Float64("stranger-rate", 50, "requests a second of each")
	if err := fs.Parse(e.args); err != nil || *target == "" || *rate <= 0 {
		return 2
	}
	s := newStrangers(*target, *n, *rate)
	var stop func()
	sc := bufio.NewScanner(e.stdin)
	for sc.Scan() {
		switch sc.Text() {
		case "start":
			if stop == nil {
				stop = s.start(ctx)
			}
		case "stop":
			if stop != nil {
				stop()
				stop = nil
			}
			b, _ := json.Marshal(s.counts())
			fmt.Fprintf(e.stdout, "%s\n", b)
		}
	}
	if stop != nil {
		stop()
	}
	return 0
}
