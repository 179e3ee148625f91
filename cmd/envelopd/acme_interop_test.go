package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/smtp"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/envelopd/envelopd/internal/knottest"
	"github.com/envelopd/envelopd/internal/pgtest"
)

// pebble is Let's Encrypt's ACME test server with its DNS
// (pebble-challtestsrv answers every name with 127.0.0.1).
type pebble struct {
	dir, ca, root string // directory URL, CA of its HTTPS, PEM of the root it issues under
	mgmt, dns     string
	cmd           *exec.Cmd
	cfg           string
	env           []string
}

func findProgram(t *testing.T, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, d := range []string{os.Getenv("HOME") + "/.cache/bin", os.Getenv("HOME") + "/go/bin"} {
		if _, err := os.Stat(filepath.Join(d, name)); err == nil {
			return filepath.Join(d, name)
		}
	}
	t.Fatalf("interop peer %s is missing (.ci/run: go install github.com/letsencrypt/pebble/v2/cmd/%s@v2.10.3)", name, name)
	return ""
}

// startPebble starts pebble-challtestsrv and Pebble validating HTTP-01
// at httpPort and TLS-ALPN-01 at tlsPort, issuing certificates valid
// for validity.
func startPebble(t *testing.T, httpPort, tlsPort string, validity time.Duration) *pebble {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	certs := filepath.Join(strings.TrimSpace(string(out)), "github.com/letsencrypt/pebble/v2@v2.10.3/test/certs")
	if _, err := os.Stat(filepath.Join(certs, "pebble.minica.pem")); err != nil {
		t.Fatalf("Pebble's test certificates are missing (the pebble module in the module cache): %v", err)
	}
	dns, cmgmt := knottest.FreeAddr(t), knottest.FreeAddr(t)
	cts := exec.Command(findProgram(t, "pebble-challtestsrv"), "-dnsserver", dns, "-http01", "", "-https01", "", "-tlsalpn01", "",
		"-doh", "", "-management", cmgmt, "-defaultIPv6", "", "-defaultIPv4", "127.0.0.1")
	if err := cts.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cts.Process.Kill(); cts.Wait() })
	listen, mgmt := knottest.FreeAddr(t), knottest.FreeAddr(t)
	p := &pebble{dns: dns, dir: "https://" + listen + "/dir", ca: filepath.Join(certs, "pebble.minica.pem"), mgmt: "https://" + mgmt,
		cfg: filepath.Join(t.TempDir(), "pebble.json")}
	hp, tp := 0, 0
	fmt.Sscan(httpPort, &hp)
	fmt.Sscan(tlsPort, &tp)
	conf := map[string]any{"pebble": map[string]any{
		"listenAddress": listen, "managementListenAddress": mgmt,
		"certificate": filepath.Join(certs, "localhost/cert.pem"), "privateKey": filepath.Join(certs, "localhost/key.pem"),
		"httpPort": hp, "tlsPort": tp, "ocspResponderURL": "", "externalAccountBindingRequired": false,
		"keyAlgorithm": "ecdsa", "domainBlocklist": []string{"blocked.envelopd.test"},
		"profiles": map[string]any{"default": map[string]any{"description": "short-lived", "validityPeriod": int(validity / time.Second)}},
	}}
	b, _ := json.Marshal(conf)
	if err := os.WriteFile(p.cfg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	p.env = append(os.Environ(), "PEBBLE_VA_NOSLEEP=1", "PEBBLE_WFE_NONCEREJECT=0", "PEBBLE_AUTHZREUSE=0")
	t.Cleanup(p.stop)
	p.start(t)
	return p
}

func (p *pebble) client(t *testing.T) *http.Client {
	b, err := os.ReadFile(p.ca)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b)
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

// start runs Pebble (again: a new root each time) and fetches its root.
func (p *pebble) start(t *testing.T) {
	t.Helper()
	p.cmd = exec.Command(findProgram(t, "pebble"), "-config", p.cfg, "-dnsserver", p.dns)
	p.cmd.Env = p.env
	if testing.Verbose() {
		p.cmd.Stdout, p.cmd.Stderr = os.Stderr, os.Stderr
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := p.client(t)
	for i := 0; ; i++ {
		resp, err := c.Get(p.mgmt + "/roots/0")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				p.root = filepath.Join(t.TempDir(), "root.pem")
				os.WriteFile(p.root, b, 0o644)
				return
			}
		}
		if i > 100 {
			t.Fatalf("pebble did not start: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (p *pebble) stop() {
	if p.cmd != nil && p.cmd.Process != nil {
		p.cmd.Process.Kill()
		p.cmd.Wait()
		p.cmd = nil
	}
}

// serveProc is a running `envelopd serve` whose JSON log lines can be
// waited for.
type serveProc struct {
	done  chan struct{}
	mu    sync.Mutex
	lines []map[string]any
	cond  *sync.Cond
}

func startServeLog(t *testing.T, bin string, args ...string) *serveProc {
	t.Helper()
	return startServeCtx(t, context.Background(), bin, args...)
}

// startServeCtx is startServeLog stopped (SIGINT) when ctx ends.
func startServeCtx(t *testing.T, ctx context.Context, bin string, args ...string) *serveProc {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve"}, args...)...)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &serveProc{done: make(chan struct{})}
	s.cond = sync.NewCond(&s.mu)
	stop := func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	}
	go func() {
		<-ctx.Done()
		stop()
		close(s.done)
	}()
	t.Cleanup(func() {
		select {
		case <-s.done:
		default:
			stop()
		}
	})
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var l map[string]any
			if testing.Verbose() {
				t.Log(sc.Text())
			}
			if json.Unmarshal(sc.Bytes(), &l) != nil {
				continue
			}
			s.mu.Lock()
			s.lines = append(s.lines, l)
			s.cond.Broadcast()
			s.mu.Unlock()
		}
		io.Copy(io.Discard, stderr)
	}()
	return s
}

// wait returns the n-th (1-based) log line with msg, waiting up to d.
func (s *serveProc) wait(t *testing.T, msg string, n int, d time.Duration) map[string]any {
	t.Helper()
	deadline := time.Now().Add(d)
	go func() { time.Sleep(d); s.mu.Lock(); s.cond.Broadcast(); s.mu.Unlock() }()
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		seen := 0
		for _, l := range s.lines {
			if l["msg"] == msg {
				if seen++; seen == n {
					return l
				}
			}
		}
		if time.Now().After(deadline) {
			var all []string
			for _, l := range s.lines {
				b, _ := json.Marshal(l)
				all = append(all, string(b))
			}
			t.Fatalf("no %d× %q in %s:\n%s", n, msg, d, strings.Join(all, "\n"))
		}
		s.cond.Wait()
	}
}

// starttlsSerial: openssl s_client -starttls smtp verifies the server's
// certificate against root for name; it returns the leaf's serial (hex).
func starttlsSerial(t *testing.T, addr, name, root string) string {
	t.Helper()
	cmd := exec.Command("openssl", "s_client", "-starttls", "smtp", "-connect", addr, "-servername", name,
		"-CAfile", root, "-verify_return_error", "-verify_hostname", name)
	cmd.Stdin = strings.NewReader("QUIT\r\n")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Verify return code: 0 (ok)") {
		t.Fatalf("openssl s_client -starttls smtp %s: %v\n%s", addr, err, out)
	}
	blk, _ := pem.Decode(out[strings.Index(string(out), "-----BEGIN CERTIFICATE-----"):])
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c.SerialNumber.Text(16)
}

// TestInteropACMEPebble: envelopd obtains a certificate from Pebble
// (TLS-ALPN-01 on --https), serves it on SMTP STARTTLS (openssl
// s_client, Python smtplib) and HTTPS (curl --cacert, with the MTA-STS
// policy of a managed domain); renews it before its end (Pebble issues
// 30 s certificates); a second node on the same Postgres serves the
// certificate the first obtained; with Pebble down at renewal time the
// old certificate keeps serving, the failure is logged and retried, and
// the renewal succeeds once Pebble is back.
func TestInteropACMEPebble(t *testing.T) {
	interop(t, "openssl", "curl", "/usr/bin/python3")
	db := pgtest.Schema(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "envelopd")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	const name, dom = "mx.envelopd.test", "agents.envelopd.test"
	if out, err := exec.Command(bin, "domain", "add", dom, "--hostname", name, "--db", db).CombinedOutput(); err != nil {
		t.Fatalf("domain add: %v\n%s", err, out)
	}
	httpAddr, httpsAddr, smtpAddr := knottest.FreeAddr(t), knottest.FreeAddr(t), knottest.FreeAddr(t)
	port := func(a string) string { return a[strings.LastIndex(a, ":")+1:] }
	p := startPebble(t, port(httpAddr), port(httpsAddr), 30*time.Second)
	node1 := startServeLog(t, bin, "--db", db, "--smtp", smtpAddr, "--hostname", name, "--accept-domain", dom,
		"--http", httpAddr, "--https", httpsAddr, "--acme", name, "--acme", "mta-sts."+dom, "--acme-email", "ops@envelopd.test",
		"--acme-dir", p.dir, "--acme-ca", p.ca, "--acme-check", "1s", "--acme-backoff", "1s", "--acme-claim-window", "3s")
	first := node1.wait(t, "acme: certificate obtained", 1, 60*time.Second)
	serial := first["serial"].(string)

	// SMTP STARTTLS: openssl and Python see the Pebble-issued certificate.
	if got := starttlsSerial(t, smtpAddr, name, p.root); got != serial {
		t.Errorf("openssl saw serial %s, envelopd obtained %s", got, serial)
	}
	py := fmt.Sprintf(`import smtplib, ssl
ctx = ssl.create_default_context(cafile=%q)
s = smtplib.SMTP(%q, %s, local_hostname="client.test")
s._host = %q  # the name starttls verifies (server_hostname)
s.starttls(context=ctx)
serial = format(s.sock.getpeercert()["serialNumber"]).lower().lstrip("0")
code, _ = s.ehlo()
assert code == 250, code
print(serial)
s.close()`, p.root, "127.0.0.1", port(smtpAddr), name)
	// Python 3 getpeercert is only checked by its verification here; the
	// serial is compared as hex.
	if out, err := exec.Command("/usr/bin/python3", "-c", py).CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != strings.TrimLeft(serial, "0") {
		t.Errorf("python smtplib.starttls: %v %q, want serial %s", err, out, serial)
	}
	// HTTPS: curl verifies the certificate; the MTA-STS policy is served
	// for the managed domain.
	curl := func(host, path string) string {
		t.Helper()
		out, err := exec.Command("curl", "-sS", "--cacert", p.root, "--resolve", host+":"+port(httpsAddr)+":127.0.0.1",
			"https://"+host+":"+port(httpsAddr)+path).CombinedOutput()
		if err != nil {
			t.Fatalf("curl https://%s%s: %v\n%s", host, path, err, out)
		}
		return string(out)
	}
	if got := curl("mta-sts."+dom, "/.well-known/mta-sts.txt"); got != "version: STSv1\r\nmode: testing\r\nmx: mx.envelopd.test\r\nmax_age: 604800\r\n" {
		t.Errorf("MTA-STS policy %q", got)
	}
	if got := curl(name, "/v0/inboxes"); !strings.Contains(got, "UnauthorizedError") {
		t.Errorf("API over HTTPS: %q", got)
	}

	// Renewal before the end (30 s certificates: at 20 s); a session
	// opened on the first certificate goes on across the swap.
	rootPEM, _ := os.ReadFile(p.root)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(rootPEM)
	open, err := smtp.Dial(smtpAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	if err := open.StartTLS(&tls.Config{RootCAs: pool, ServerName: name}); err != nil {
		t.Fatalf("STARTTLS: %v", err)
	}
	second := node1.wait(t, "acme: certificate obtained", 2, 60*time.Second)
	if err := open.Noop(); err != nil {
		t.Errorf("the session opened before the renewal: %v", err)
	}
	if st, ok := open.TLSConnectionState(); !ok || st.PeerCertificates[0].SerialNumber.Text(16) != serial {
		t.Errorf("the open session's certificate changed")
	}
	serial2 := second["serial"].(string)
	if serial2 == serial {
		t.Fatal("renewed certificate has the same serial")
	}
	if got := starttlsSerial(t, smtpAddr, name, p.root); got != serial2 {
		t.Errorf("after renewal openssl saw %s, want %s", got, serial2)
	}

	// A second node on the same Postgres: at start it serves the
	// certificate the first obtained, from the store; from then on one
	// node renews each certificate (a claim in the store) and both serve
	// the renewed one.
	smtp2 := knottest.FreeAddr(t)
	ctx2, stop2 := context.WithCancel(context.Background())
	node2 := startServeCtx(t, ctx2, bin, "--db", db, "--smtp", smtp2, "--hostname", name, "--accept-domain", dom,
		"--http", knottest.FreeAddr(t), "--acme", name, "--acme", "mta-sts."+dom, "--acme-dir", p.dir, "--acme-ca", p.ca,
		"--acme-check", "1s", "--acme-backoff", "1s", "--acme-claim-window", "3s")
	if got := node2.wait(t, "acme: certificate loaded from the cache", 1, 30*time.Second)["serial"]; got != node1.lastSerial() {
		t.Errorf("node 2 loaded %v, node 1 serves %s", got, node1.lastSerial())
	}
	before := node1.count("acme: certificate obtained") + node2.count("acme: certificate obtained")
	deadline := time.Now().Add(90 * time.Second)
	for node1.count("acme: certificate obtained")+node2.count("acme: certificate obtained") < before+2 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	var ends []time.Time
	for _, n := range []*serveProc{node1, node2} {
		for _, l := range n.all("acme: certificate obtained") {
			at, _ := time.Parse(time.RFC3339, l["not_after"].(string))
			ends = append(ends, at)
		}
	}
	if len(ends) < before+2 {
		t.Fatalf("two renewals with two nodes did not happen in 90 s (%d certificates)", len(ends))
	}
	slices.SortFunc(ends, func(a, b time.Time) int { return a.Compare(b) })
	for i := 1; i < len(ends); i++ {
		if ends[i].Sub(ends[i-1]) < 5*time.Second {
			t.Errorf("two certificates ordered for one renewal (ends %v and %v)", ends[i-1], ends[i])
		}
	}
	time.Sleep(1500 * time.Millisecond) // one --acme-check: both nodes have loaded the newest
	s1, s2 := starttlsSerial(t, smtpAddr, name, p.root), starttlsSerial(t, smtp2, name, p.root)
	if s1 != s2 {
		t.Errorf("node 1 serves %s, node 2 %s", s1, s2)
	}
	stop2()
	node2.exited(t)

	// Pebble down at renewal: the failure is logged and retried, the old
	// certificate keeps serving.
	p.stop()
	n := node1.count("acme: certificate obtained")
	fail := node1.wait(t, "acme: certificate order failed", 1, 60*time.Second)
	if !strings.Contains(fmt.Sprint(fail["err"]), "connect") && !strings.Contains(fmt.Sprint(fail["err"]), "refused") {
		t.Errorf("failure logged as %v", fail)
	}
	if got := starttlsSerial(t, smtpAddr, name, p.root); got != node1.lastSerial() {
		t.Errorf("while Pebble is down openssl saw %s, want the last certificate %s", got, node1.lastSerial())
	}
	node1.wait(t, "acme: certificate order failed", 2, 30*time.Second) // retried
	// Pebble back (a new instance: new root, no accounts): the retry
	// registers again and renews.
	p.start(t)
	node1.wait(t, "acme: certificate obtained", n+1, 60*time.Second)
	if got := starttlsSerial(t, smtpAddr, name, p.root); got != node1.lastSerial() {
		t.Errorf("after Pebble's return openssl saw %s, want %s", got, node1.lastSerial())
	}
}

// exited waits until the process stopped by its context has exited.
func (s *serveProc) exited(t *testing.T) {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not stop")
	}
}

// all returns the log lines with msg.
func (s *serveProc) all(msg string) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, l := range s.lines {
		if l["msg"] == msg {
			out = append(out, l)
		}
	}
	return out
}

func (s *serveProc) count(msg string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, l := range s.lines {
		if l["msg"] == msg {
			n++
		}
	}
	return n
}

// lastSerial is the serial of the last certificate obtained or loaded.
func (s *serveProc) lastSerial() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	last := ""
	for _, l := range s.lines {
		if l["msg"] == "acme: certificate obtained" || l["msg"] == "acme: certificate loaded from the cache" {
			last, _ = l["serial"].(string)
		}
	}
	return last
}

// TestInteropACMEPebbleHTTP01Restart: HTTP-01 on --http alone, the
// certificate in --acme-cache; after a restart the cached certificate
// serves at once, and the renewal goes on across it.
func TestInteropACMEPebbleHTTP01Restart(t *testing.T) {
	interop(t, "openssl")
	dir := t.TempDir()
	bin := filepath.Join(dir, "envelopd")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	const name = "mx.envelopd.test"
	httpAddr, smtpAddr := knottest.FreeAddr(t), knottest.FreeAddr(t)
	port := func(a string) string { return a[strings.LastIndex(a, ":")+1:] }
	p := startPebble(t, port(httpAddr), "1", 30*time.Second)
	args := []string{"--db", filepath.Join(dir, "db"), "--smtp", smtpAddr, "--hostname", name, "--http", httpAddr,
		"--acme", name, "--acme-dir", p.dir, "--acme-ca", p.ca, "--acme-cache", filepath.Join(dir, "acme"), "--acme-check", "1s", "--acme-backoff", "1s"}
	ctx1, stop1 := context.WithCancel(context.Background())
	node := startServeCtx(t, ctx1, bin, args...)
	serial := node.wait(t, "acme: certificate obtained", 1, 60*time.Second)["serial"].(string)
	if got := starttlsSerial(t, smtpAddr, name, p.root); got != serial {
		t.Errorf("openssl saw %s, want %s", got, serial)
	}
	stop1()
	node.exited(t)
	again := startServeLog(t, bin, args...)
	if got := again.wait(t, "acme: certificate loaded from the cache", 1, 30*time.Second)["serial"]; got != serial {
		t.Errorf("after restart serving %v, want %s", got, serial)
	}
	renewed := again.wait(t, "acme: certificate obtained", 1, 60*time.Second)["serial"].(string)
	if renewed == serial {
		t.Error("renewal after restart kept the serial")
	}
	if got := starttlsSerial(t, smtpAddr, name, p.root); got != renewed {
		t.Errorf("openssl saw %s after renewal, want %s", got, renewed)
	}
	// The CA's refusal is logged as what it is (RFC 8555 §6.7 problem).
	blocked := startServeLog(t, bin, "--db", filepath.Join(dir, "db2"), "--smtp", "127.0.0.1:0", "--http", "127.0.0.1:0",
		"--acme", "blocked.envelopd.test", "--acme-dir", p.dir, "--acme-ca", p.ca, "--acme-backoff", "1s")
	fail := blocked.wait(t, "acme: certificate order failed", 1, 30*time.Second)
	if e := fmt.Sprint(fail["err"]); !strings.Contains(e, "the CA refused (rejectedIdentifier, HTTP 400)") || fail["retry_in"] != "1s" {
		t.Errorf("refusal logged as %v", fail)
	}
}
