package mailin

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer a child process writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// dkimKeys is the static DKIM key file of the corpus (no DNS in tests).
func dkimKeys() string {
	if _, err := os.Stat("../testdata/dkim/keys.txt"); err == nil {
		return "../testdata/dkim/keys.txt"
	}
	return os.DevNull
}

// dovecot is a real Dovecot 2.3 on free 127.0.0.1 ports, as in
// shared/interop/README.md: its own directory, mail user uid/gid 8
// ("mail"), IMAP and LMTP listeners, user "agent" with password "secret".
type dovecot struct {
	dir, conf      string
	imapPort, lmtp int
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// passwordAuth is the default authentication of startDovecot: PLAIN and
// LOGIN against the passwd file ("agent", "secret"). %s is the directory.
const passwordAuth = `auth_mechanisms = plain login
passdb {
  driver = passwd-file
  args = scheme=PLAIN username_format=%%n %s/passwd
}`

// startDovecot starts Dovecot; auth, when given, replaces passwordAuth
// (auth_mechanisms and passdb blocks, with %s for the directory).
func startDovecot(t *testing.T, auth ...string) *dovecot {
	t.Helper()
	for _, prog := range []string{"dovecot", "/usr/lib/dovecot/dovecot-lda", "swaks"} {
		if _, err := exec.LookPath(prog); err != nil {
			t.Fatalf("ENVELOPD_INTEROP=1 but %s is missing: %v", prog, err)
		}
	}
	dir, err := os.MkdirTemp("", "envelopd-dovecot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	d := &dovecot{dir: dir, conf: filepath.Join(dir, "dovecot.conf"), imapPort: freePort(t), lmtp: freePort(t)}
	authConf := fmt.Sprintf(passwordAuth, dir)
	if len(auth) > 0 {
		authConf = strings.ReplaceAll(auth[0], "%s", dir)
	}
	conf := fmt.Sprintf(`protocols = imap lmtp
listen = 127.0.0.1
base_dir = %[1]s/run
state_dir = %[1]s/run
log_path = %[1]s/dovecot.log
ssl = no
disable_plaintext_auth = no
default_internal_user = dovecot
default_internal_group = dovecot
default_login_user = dovenull
first_valid_uid = 8
mail_location = maildir:~/Maildir
%[4]s
userdb {
  driver = passwd-file
  args = username_format=%%n %[1]s/passwd
}
service imap-login {
  inet_listener imap {
    address = 127.0.0.1
    port = %[2]d
  }
  inet_listener imaps {
    port = 0
  }
  chroot =
}
service lmtp {
  inet_listener lmtp {
    address = 127.0.0.1
    port = %[3]d
  }
}
service anvil {
  chroot =
}
protocol lmtp {
  postmaster_address = postmaster@lab.test
}
protocol lda {
  postmaster_address = postmaster@lab.test
}
`, dir, d.imapPort, d.lmtp, authConf)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(d.conf, []byte(conf), 0o644))
	must(os.WriteFile(filepath.Join(dir, "passwd"), []byte("agent:{PLAIN}secret:8:8::"+dir+"/mail/agent\n"), 0o644))
	must(os.MkdirAll(filepath.Join(dir, "mail", "agent"), 0o755))
	must(os.Chown(filepath.Join(dir, "mail"), 8, 8))
	must(os.Chown(filepath.Join(dir, "mail", "agent"), 8, 8))
	must(os.Chmod(dir, 0o755))
	// Dovecot daemonizes; its children keep the output descriptors, so a
	// pipe (CombinedOutput) would never reach EOF: write to a file.
	outFile := filepath.Join(dir, "start.out")
	out, err := os.Create(outFile)
	must(err)
	cmd := exec.Command("dovecot", "-c", d.conf)
	cmd.Stdout, cmd.Stderr = out, out
	err = cmd.Run()
	out.Close()
	if err != nil {
		b, _ := os.ReadFile(outFile)
		t.Fatalf("dovecot: %v\n%s", err, b)
	}
	t.Cleanup(func() { d.stop(t) })
	addr := fmt.Sprintf("127.0.0.1:%d", d.imapPort)
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		if time.Since(start) > 10*time.Second {
			log, _ := os.ReadFile(filepath.Join(dir, "dovecot.log"))
			t.Fatalf("dovecot not listening on %s after 10 s\n%s", addr, log)
		}
	}
	return d
}

func (d *dovecot) stop(t *testing.T) {
	pidFile := filepath.Join(d.dir, "run", "master.pid")
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return
	}
	exec.Command("kill", strings.TrimSpace(string(b))).Run()
	for start := time.Now(); time.Since(start) < 10*time.Second; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(pidFile); os.IsNotExist(err) {
			return
		}
	}
	t.Errorf("dovecot (pid %s) did not stop", strings.TrimSpace(string(b)))
}

func (d *dovecot) deliverLDA(t *testing.T, file string) error {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command("/usr/lib/dovecot/dovecot-lda", "-c", d.conf, "-d", "agent", "-f", "a@lab.test")
	cmd.Stdin = f
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("dovecot-lda %s: %v: %s", filepath.Base(file), err, out)
	}
	return nil
}

// maildirCount counts the mails of a maildir folder ("" = INBOX).
func (d *dovecot) maildirCount(t *testing.T, folder string) int {
	t.Helper()
	base := filepath.Join(d.dir, "mail", "agent", "Maildir")
	if folder != "" {
		base = filepath.Join(base, "."+folder)
	}
	n := 0
	for _, sub := range []string{"new", "cur"} {
		es, err := os.ReadDir(filepath.Join(base, sub))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		n += len(es)
	}
	return n
}

// buildEnvelopd builds the command once per test.
func buildEnvelopd(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "envelopd")
	out, err := exec.Command("go", "build", "-o", bin, "../cmd/envelopd").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

type pollRun struct {
	bin, db, pwFile string
	url             string
}

func (r *pollRun) once(t *testing.T, extra ...string) pollSummaryJSON {
	t.Helper()
	args := append([]string{"poll", "--once", "--db", r.db, "--imap", r.url, "--imap-password-file", r.pwFile, "--dkim-txt", dkimKeys()}, extra...)
	cmd := exec.Command(r.bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("envelopd %s: %v\n%s\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	var s pollSummaryJSON
	if err := json.Unmarshal(stdout.Bytes(), &s); err != nil {
		t.Fatalf("summary %q: %v", stdout.String(), err)
	}
	t.Logf("poll --once %s: %+v in %v", strings.Join(extra, " "), s, time.Since(start).Round(time.Millisecond))
	return s
}

type pollSummaryJSON struct {
	Mailboxes  int    `json:"mailboxes"`
	Seen       int    `json:"seen"`
	Stored     int    `json:"stored"`
	Redelivery int    `json:"redelivery"`
	Failed     int    `json:"failed"`
	Error      string `json:"error"`
}

// TestInteropDovecot: the testdata/eml corpus delivered with dovecot-lda is
// imported exactly once by `envelopd poll --once`, --move-to empties INBOX,
// and a mail delivered over LMTP while `envelopd poll` IDLEs shows up in
// `envelopd watch` (latency logged).
func TestInteropDovecot(t *testing.T) {
	if os.Getenv("ENVELOPD_INTEROP") != "1" {
		t.Skip("set ENVELOPD_INTEROP=1 to run against a real Dovecot")
	}
	if os.Geteuid() != 0 {
		t.Fatal("ENVELOPD_INTEROP=1: starting Dovecot needs root (see shared/interop/README.md)")
	}
	files, _ := filepath.Glob("../testdata/eml/*.eml")
	if len(files) == 0 {
		files, _ = filepath.Glob("../testdata/imap/*.eml")
	}
	if len(files) == 0 {
		t.Fatal("no corpus")
	}
	d := startDovecot(t)
	bin := buildEnvelopd(t)
	tmp := t.TempDir()
	r := &pollRun{bin: bin, db: filepath.Join(tmp, "poll.db"), pwFile: filepath.Join(tmp, "pw"),
		url: fmt.Sprintf("imap://agent@127.0.0.1:%d/INBOX", d.imapPort)}
	if err := os.WriteFile(r.pwFile, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	for _, f := range files {
		if err := d.deliverLDA(t, f); err != nil {
			t.Fatal(err)
		}
	}
	n := len(files)
	t.Logf("delivered %d mails with dovecot-lda in %v", n, time.Since(start).Round(time.Millisecond))
	if got := d.maildirCount(t, ""); got != n {
		t.Fatalf("INBOX holds %d mails after delivery, want %d", got, n)
	}

	// First run imports exactly the corpus, second run nothing.
	if s := r.once(t); s.Seen != n || s.Stored != n || s.Redelivery != 0 || s.Failed != 0 || s.Error != "" {
		t.Fatalf("first run %+v, want %d seen and stored", s, n)
	}
	if s := r.once(t); s != (pollSummaryJSON{Mailboxes: 1}) {
		t.Fatalf("second run %+v, want nothing", s)
	}
	// --move-to with a fresh cursor (new database): every mail is seen
	// again, moved, and INBOX is left empty; Dovecot offers MOVE.
	r2 := *r
	r2.db = filepath.Join(tmp, "move.db")
	if s := r2.once(t, "--move-to", "Processed"); s.Seen != n || s.Stored != n || s.Failed != 0 {
		t.Fatalf("--move-to run %+v, want %d seen and stored", s, n)
	}
	if got := d.maildirCount(t, ""); got != 0 {
		t.Errorf("INBOX holds %d mails after --move-to, want 0", got)
	}
	if got := d.maildirCount(t, "Processed"); got != n {
		t.Errorf("Processed holds %d mails, want %d", got, n)
	}
	if s := r2.once(t, "--move-to", "Processed"); s != (pollSummaryJSON{Mailboxes: 1}) {
		t.Fatalf("second --move-to run %+v, want nothing", s)
	}

	// poll in IDLE mode (interval an hour: only IDLE can be this fast),
	// watch streaming, one mail over LMTP.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	poll := exec.CommandContext(ctx, bin, "poll", "--db", r.db, "--imap", r.url, "--imap-password-file", r.pwFile,
		"--dkim-txt", dkimKeys(), "--interval", "1h")
	var pollErr syncBuffer
	poll.Stderr = &pollErr
	poll.Cancel = func() error { return poll.Process.Signal(os.Interrupt) }
	if err := poll.Start(); err != nil {
		t.Fatal(err)
	}
	watch := exec.CommandContext(ctx, bin, "watch", "--db", r.db)
	wout, err := watch.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	defer watch.Wait()
	// Wait until poll idles: its log says "connected", then a moment for
	// IDLE to be issued.
	for start := time.Now(); !strings.Contains(pollErr.String(), "imap: connected"); time.Sleep(20 * time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("poll did not connect:\n%s", pollErr.String())
		}
	}
	time.Sleep(300 * time.Millisecond)
	lines := make(chan string, 8)
	go func() {
		sc := bufio.NewScanner(wout)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	lmtpMail := fmt.Sprintf("From: lmtp@lab.test\r\nTo: agent@lab.test\r\nSubject: WHICH | over LMTP\r\nMessage-ID: <lmtp-%d@lab.test>\r\nContent-Type: application/json\r\n\r\n{\"v\":\"0.2.0\",\"type\":\"which\",\"id\":\"wch_lmtp\"}\r\n", time.Now().UnixNano())
	mailFile := filepath.Join(tmp, "lmtp.eml")
	if err := os.WriteFile(mailFile, []byte(lmtpMail), 0o644); err != nil {
		t.Fatal(err)
	}
	swaks := exec.Command("swaks", "--protocol", "LMTP", "--server", "127.0.0.1", "--port", fmt.Sprint(d.lmtp),
		"--from", "lmtp@lab.test", "--to", "agent@lab.test", "--data", "@"+mailFile)
	if out, err := swaks.CombinedOutput(); err != nil {
		t.Fatalf("swaks: %v\n%s", err, out)
	}
	delivered := time.Now()
	go func() {
		// The poller's own log line for the mail: IDLE push to stored.
		for time.Since(delivered) < 30*time.Second {
			if strings.Count(pollErr.String(), `"msg":"imap: mail"`) > 0 {
				t.Logf("LMTP delivery → stored by envelopd poll: ≤ %v", time.Since(delivered).Round(time.Millisecond))
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	select {
	case line := <-lines:
		latency := time.Since(delivered)
		if !strings.Contains(line, "wch_lmtp") && !strings.Contains(line, "lmtp-") {
			t.Errorf("watch printed %s, want the LMTP mail", line)
		}
		t.Logf("LMTP delivery → envelopd watch line: %v (IDLE push, watch store poll included)", latency.Round(time.Millisecond))
	case <-time.After(30 * time.Second):
		t.Fatalf("the LMTP mail did not show up in watch within 30 s; poll log:\n%s", pollErr.String())
	}
	cancel()
	poll.Wait()
	if s := r.once(t); s != (pollSummaryJSON{Mailboxes: 1}) {
		t.Errorf("run after IDLE %+v, want nothing (the LMTP mail was processed)", s)
	}
}
