package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/mail"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/envelopd/envelopd/internal/pgtest"
	"github.com/envelopd/envelopd/store"
)

// pgNode is one `envelopd serve` process on a shared Postgres database.
type pgNode struct {
	cmd  *exec.Cmd
	addr string
	mu   sync.Mutex
	log  strings.Builder
	done chan struct{}
}

// startPGNode starts the built binary as `serve` on dsn and waits until it
// logs its SMTP address; the process is stopped (SIGTERM) when t ends.
func startPGNode(t *testing.T, bin, dsn string, flags ...string) *pgNode {
	t.Helper()
	n := &pgNode{done: make(chan struct{})}
	n.cmd = exec.Command(bin, append([]string{"serve", "--smtp", "127.0.0.1:0", "--db", dsn}, flags...)...)
	stderr, err := n.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addrc := make(chan string, 1)
	go func() {
		defer close(n.done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			n.mu.Lock()
			n.log.WriteString(sc.Text() + "\n")
			n.mu.Unlock()
			var l struct {
				Msg  string `json:"msg"`
				SMTP string `json:"smtp"`
			}
			if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "envelopd serving" {
				addrc <- l.SMTP
			}
		}
	}()
	t.Cleanup(func() { n.stop() })
	select {
	case n.addr = <-addrc:
		return n
	case <-n.done:
		t.Fatalf("serve exited before listening: %s", n.logs())
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not start: %s", n.logs())
	}
	return nil
}

func (n *pgNode) logs() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.log.String()
}

func (n *pgNode) stop() {
	if n.cmd.ProcessState == nil {
		n.cmd.Process.Signal(syscall.SIGTERM)
		<-n.done
		n.cmd.Wait()
	}
}

// kill ends the process with SIGKILL (a crash: nothing is flushed).
func (n *pgNode) kill() {
	n.cmd.Process.Kill()
	<-n.done
	n.cmd.Wait()
}

// countingSink is a smarthost that counts each (Message-ID, recipient)
// it is given.
type countingSink struct {
	mu   sync.Mutex
	got  map[string]int // "message-id rcpt" → submissions
	Addr string
}

type countingSession struct {
	s     *countingSink
	rcpts []string
}

func (c *countingSession) Mail(string, *smtp.MailOptions) error { return nil }
func (c *countingSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	c.rcpts = append(c.rcpts, to)
	return nil
}
func (c *countingSession) Data(r io.Reader) error {
	m, err := mail.ReadMessage(r)
	if err != nil {
		return err
	}
	mid := strings.Trim(m.Header.Get("Message-ID"), "<>")
	c.s.mu.Lock()
	for _, r := range c.rcpts {
		c.s.got[mid+" "+r]++
	}
	c.s.mu.Unlock()
	return nil
}
func (c *countingSession) Reset()        { c.rcpts = nil }
func (c *countingSession) Logout() error { return nil }

func startCountingSink(t *testing.T) *countingSink {
	s := &countingSink{got: map[string]int{}}
	srv := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return &countingSession{s: s}, nil }))
	srv.Domain = "sink.test"
	srv.ErrorLog = log.New(io.Discard, "", 0)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.Addr = l.Addr().String()
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return s
}

// sendTo delivers msg over SMTP and reports whether the server answered
// 250 to the DATA (the mail is acknowledged).
func sendTo(addr string, msg []byte) error {
	c, err := smtp.Dial(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.SendMail("erin@payer.test", []string{"frank@worker.test"}, bytes.NewReader(msg))
}

// TestInteropPostgresNodes: three `envelopd serve` processes on
// one Postgres database. A load client (6 sessions) spreads 3,000
// (ENVELOPD_PG_LOAD) DKIM-signed PAYs across
// them while the same proofs are replayed to all three at once; one node
// is killed with SIGKILL mid-load (its unacknowledged mails are retried on
// another node, as an MTA would) and started again. Every accepted mail
// is handed to an exec on some node at least once, the killed node's
// claimed hand-offs taken over when their lease ends. Then: every
// acknowledged mail is stored exactly once, each proof is accepted once
// and every other copy is duplicate_proof, the courtesy OOPS rate limit
// (10 per recipient and hour) holds across the nodes, and every queued
// mail — the OOPS and 20 mails queued from outside — is submitted to the
// smarthost exactly once per recipient, though three queue workers share
// the queue.
func TestInteropPostgresNodes(t *testing.T) {
	interop(t)
	dsn := pgtest.Schema(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "envelopd")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	k := newTestDKIM(t, "payer.test")
	sink := startCountingSink(t)
	// Every node hands accepted mail to an exec that appends its id; a
	// short hand-off timeout makes a dead node's claims expire soon
	// (lease: twice the timeout).
	handed := filepath.Join(dir, "handed")
	flags := append(k.flags("worker.test"), "--smtp-url", "smtp://"+sink.Addr,
		"--exec", "echo $ENVELOPD_MESSAGE_ID >> "+handed, "--handoff-timeout", "2s")
	nodes := []*pgNode{startPGNode(t, bin, dsn, flags...), startPGNode(t, bin, dsn, flags...), startPGNode(t, bin, dsn, flags...)}

	pay := func(mid, id, proof string) []byte {
		return k.sign(t, []byte("From: Erin <erin@payer.test>\r\nTo: frank@worker.test\r\nSubject: PAY | load\r\n"+
			"Date: Sun, 22 Nov 2026 12:00:00 +0000\r\nMessage-ID: <"+mid+">\r\nMIME-Version: 1.0\r\n"+
			"Content-Type: text/plain; charset=utf-8\r\n\r\n"+
			`{"v":"0.2.0","type":"pay","id":"`+id+`","amount":"30000000","token":"USDC","chain":"base","proof":{"tx":"`+proof+`","block":12}}`+"\r\n"))
	}
	type job struct {
		node int
		msg  []byte
		mid  string
	}
	// ENVELOPD_PG_LOAD sets the number of load mails (the target
	// figure is 30,000; the default keeps .ci/run short).
	loads := 3000
	if n, err := strconv.Atoi(os.Getenv("ENVELOPD_PG_LOAD")); err == nil && n > 0 {
		loads = n
	}
	const proofs, copies = 8, 6
	var jobs []job
	for i := range loads {
		mid := fmt.Sprintf("load-%d@payer.test", i)
		jobs = append(jobs, job{i % 3, pay(mid, fmt.Sprintf("pay_l%d", i), fmt.Sprintf("0xload%d", i)), mid})
	}
	// The replays: copy c of proof p goes to node c%3, interleaved with
	// the load so that the copies of one proof race on all three nodes.
	for p := range proofs {
		for c := range copies {
			mid := fmt.Sprintf("replay-%d-%d@payer.test", p, c)
			at := (p*copies + c) * loads / (proofs * copies)
			jobs = append(jobs[:at], append([]job{{c % 3, pay(mid, fmt.Sprintf("pay_r%d_%d", p, c), fmt.Sprintf("0xfeed%d", p)), mid}}, jobs[at:]...)...)
		}
	}

	var mu sync.Mutex
	acked := map[string]bool{}
	var dead sync.Once
	work := make(chan job)
	var wg sync.WaitGroup
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range work {
				for try := 0; ; try++ {
					n := (j.node + try) % 3
					mu.Lock()
					addr := nodes[n].addr
					mu.Unlock()
					if err := sendTo(addr, j.msg); err == nil {
						mu.Lock()
						acked[j.mid] = true
						mu.Unlock()
						break
					} else if try >= 6 {
						t.Errorf("%s: not acknowledged by any node: %v", j.mid, err)
						break
					}
				}
			}
		}()
	}
	for i, j := range jobs {
		if i == len(jobs)/2 {
			// A crash mid-load: node 2 dies with SIGKILL while the
			// clients keep sending; what it had not acknowledged they
			// retry on another node.
			dead.Do(nodes[2].kill)
		}
		work <- j
	}
	close(work)
	wg.Wait()
	// Node 2 comes back on the same database.
	restarted := startPGNode(t, bin, dsn, flags...)
	if err := sendTo(restarted.addr, pay("after-restart@payer.test", "pay_after", "0xafter")); err != nil {
		t.Fatalf("restarted node: %v", err)
	}
	acked["after-restart@payer.test"] = true

	ctx := context.Background()
	st, err := store.OpenPostgres(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ms, err := st.Messages(ctx, store.Filter{Direction: store.DirIn})
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]int{}
	accepted := map[string]int{} // proof → accepted copies
	for _, m := range ms {
		stored[m.MessageID]++
		if strings.HasPrefix(m.MessageID, "replay-") {
			p := strings.Split(m.MessageID, "-")[1]
			switch {
			case m.Status == store.StatusAccepted:
				accepted[p]++
			case m.Status != store.StatusDuplicate || len(m.Errors) != 1 || m.Errors[0].Code != "duplicate_proof":
				t.Errorf("%s: %s %v, want duplicate with duplicate_proof", m.MessageID, m.Status, m.Errors)
			}
		} else if m.Status != store.StatusAccepted {
			t.Errorf("%s: %s %v, want accepted", m.MessageID, m.Status, m.Errors)
		}
	}
	for mid := range acked {
		if stored[mid] != 1 {
			t.Errorf("acknowledged %s stored %d times, want once", mid, stored[mid])
		}
	}
	if len(stored) != len(acked) {
		t.Errorf("%d distinct mails stored, %d acknowledged", len(stored), len(acked))
	}
	for p := range proofs {
		if n := accepted[fmt.Sprint(p)]; n != 1 {
			t.Errorf("proof %d accepted %d times, want once", p, n)
		}
	}

	// Hand-offs: every accepted mail reaches the agent (at least once),
	// including those whose claim the killed node held.
	for deadline := time.Now().Add(120 * time.Second); ; {
		open, err := st.Handoffs(ctx, store.HandoffFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(open) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d hand-offs not done: first %+v", len(open), open[0])
		}
		select {
		case <-st.MessagesChanged():
		case <-time.After(100 * time.Millisecond):
		}
	}
	lines, err := os.ReadFile(handed)
	if err != nil {
		t.Fatal(err)
	}
	runs := map[string]int{}
	for _, l := range strings.Fields(string(lines)) {
		runs[l]++
	}
	extra := 0
	for _, m := range ms {
		if m.Status != store.StatusAccepted {
			continue
		}
		id := fmt.Sprint(m.ID)
		if runs[id] == 0 {
			t.Errorf("accepted %s (id %s) never handed off", m.MessageID, id)
		}
		extra += max(0, runs[id]-1)
	}
	t.Logf("%d exec hand-offs, %d of them repeats (at least once: the killed node's in-flight ones)", len(strings.Fields(string(lines))), extra)

	// The queue: 20 mails queued from outside (as `send` does), two
	// recipients each, next to the courtesy OOPS; three workers.
	for i := range 20 {
		mid := fmt.Sprintf("queued-%d@worker.test", i)
		raw := []byte("From: frank@worker.test\r\nTo: a@dest.test, b@dest.test\r\nMessage-ID: <" + mid + ">\r\nSubject: hello\r\n\r\nhi\r\n")
		if _, err := st.Enqueue(ctx, &store.Outgoing{From: "frank@worker.test", Recipients: []string{"a@dest.test", "b@dest.test"},
			Raw: raw, MessageID: mid, Kind: "send"}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	var all []store.QueueEntry
	for {
		// Waits for the queue to drain (a condition, not a fixed time).
		pending, err := st.Queue(ctx, store.QueuePending)
		if err != nil {
			t.Fatal(err)
		}
		if len(pending) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d queue entries still pending", len(pending))
		}
		select {
		case <-st.QueueChanged():
		case <-time.After(100 * time.Millisecond):
		}
	}
	if all, err = st.Queue(ctx, ""); err != nil {
		t.Fatal(err)
	}
	oops, want := 0, map[string]int{}
	for _, e := range all {
		if e.Kind == "oops" {
			oops++
		}
		for _, r := range e.Recipients {
			if r.State != store.QueueSent {
				t.Errorf("queue %d %s: %s %s", e.ID, r.Rcpt, r.State, r.LastError)
			}
			want[e.MessageID+" "+r.Rcpt]++
		}
	}
	// 40 duplicates owe an OOPS each (verified sender, one thread each);
	// the recipient limit of 10 an hour holds across the three nodes.
	if oops != store.DefaultOOPSPerRecipientHour {
		t.Errorf("%d courtesy OOPS queued, want %d (the per-recipient limit)", oops, store.DefaultOOPSPerRecipientHour)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	sum := 0
	for k, n := range want {
		sum++
		if n != 1 || sink.got[k] != 1 {
			t.Errorf("%s submitted %d times, want once", k, sink.got[k])
		}
	}
	if len(sink.got) != len(want) {
		t.Errorf("the smarthost got %d (Message-ID, recipient) pairs, want %d", len(sink.got), len(want))
	}
	t.Logf("%d mails acknowledged and stored once across 3 nodes (one killed and restarted); %d proofs accepted once; %d queued submissions, each once",
		len(acked), proofs, sum)
}
