package mailout

// Interop: envelopd's outbound path (Compose, Sign, the queue Worker and
// the Submitter) against a real Postfix 3.7 relay on loopback (recipe in
// shared/interop/README.md), which relays to an in-process capture server;
// the bytes received there must pass dkimpy's verification. Skipped unless
// ENVELOPD_INTEROP=1; then a missing program is a failure.

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-message/mail"

	"github.com/envelopd/envelopd/dkim"
	"github.com/envelopd/envelopd/parse"
	"github.com/envelopd/envelopd/store"
)

// dkimpyVerify verifies every DKIM-Signature of argv[1] with keys from the
// static key file argv[2] (name TXT-value lines) and prints one result per
// signature.
const dkimpyVerify = `
import sys, dkim
msg = open(sys.argv[1], 'rb').read()
keys = {}
for line in open(sys.argv[2]):
    line = line.strip()
    if line:
        name, txt = line.split(' ', 1)
        keys[name.rstrip('.').lower()] = txt.encode()
def dnsfunc(name, timeout=5):
    n = name.decode() if isinstance(name, bytes) else name
    return keys.get(n.rstrip('.').lower(), b'')
head = msg.split(b'\r\n\r\n', 1)[0]
n = sum(1 for l in head.split(b'\r\n') if l.lower().startswith(b'dkim-signature:'))
d = dkim.DKIM(msg)
def check(i):
    try:
        return 'pass' if d.verify(idx=i, dnsfunc=dnsfunc) else 'fail'
    except dkim.ValidationError:
        return 'fail'
print(' '.join(check(i) for i in range(n)))
`

func needProgram(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("interop: %s not installed: %v", name, err)
	}
	return p
}

// pythonWithDKIM finds a python3 that imports dkimpy (Debian's package is
// on /usr/bin/python3's path, not necessarily on a pyenv python3's).
func pythonWithDKIM(t *testing.T, dir string) string {
	t.Helper()
	for _, c := range []string{os.Getenv("ENVELOPD_PYTHON"), "/usr/bin/python3", "python3"} {
		if c == "" {
			continue
		}
		cmd := exec.Command(c, "-c", "import dkim; dkim.DKIM")
		cmd.Dir = dir // not the repository: its dkim/ directory would shadow the module
		if cmd.Run() == nil {
			return c
		}
	}
	t.Fatal("interop: no python3 with dkimpy (apt-get install python3-dkim)")
	return ""
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startPostfix runs a Postfix relay on 127.0.0.1:port that relays
// everything to relayPort, with its own configuration and queue under dir.
func startPostfix(t *testing.T, dir string, port, relayPort int) {
	t.Helper()
	postfix := needProgram(t, "postfix")
	postconf := needProgram(t, "postconf")
	pu, err := user.Lookup("postfix")
	if err != nil {
		t.Fatalf("interop: no postfix user: %v", err)
	}
	uid, _ := strconv.Atoi(pu.Uid)
	etc := filepath.Join(dir, "etc")
	for _, d := range []string{etc, filepath.Join(dir, "queue"), filepath.Join(dir, "data")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(filepath.Join(dir, "data"), uid, -1); err != nil {
		t.Fatal(err)
	}
	mainCF := strings.Join([]string{
		"compatibility_level=3.6",
		"myhostname=relay.lab.test",
		"mydestination=",
		"inet_interfaces=loopback-only",
		"inet_protocols=ipv4",
		"mynetworks=127.0.0.0/8",
		"relayhost=[127.0.0.1]:" + strconv.Itoa(relayPort),
		"smtpd_relay_restrictions=permit_mynetworks, reject",
		"queue_directory=" + filepath.Join(dir, "queue"),
		"data_directory=" + filepath.Join(dir, "data"),
		"maillog_file=/dev/stdout",
		"smtp_tls_security_level=none",
		"smtpd_tls_security_level=none",
		"alias_maps=",
		"local_recipient_maps=",
		"smtputf8_enable=no",
		"",
	}, "\n")
	if err := os.WriteFile(filepath.Join(etc, "main.cf"), []byte(mainCF), 0o644); err != nil {
		t.Fatal(err)
	}
	master, err := os.ReadFile("/etc/postfix/master.cf")
	if err != nil {
		t.Fatalf("interop: %v", err)
	}
	smtpd := regexp.MustCompile(`(?m)^smtp\s+inet\s.*smtpd$`)
	if !smtpd.Match(master) {
		t.Fatal("interop: no smtpd line in /etc/postfix/master.cf")
	}
	master = smtpd.ReplaceAll(master, []byte("127.0.0.1:"+strconv.Itoa(port)+" inet n - n - - smtpd"))
	if err := os.WriteFile(filepath.Join(etc, "master.cf"), master, 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	run(postconf, "-c", etc, "-F", "*/*/chroot = n")
	run(postfix, "-c", etc, "check")

	var log bytes.Buffer
	fg := exec.Command(postfix, "-c", etc, "start-fg")
	fg.Stdout, fg.Stderr = &log, &log
	if err := fg.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- fg.Wait() }()
	t.Cleanup(func() {
		exec.Command(postfix, "-c", etc, "stop").Run()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			fg.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("postfix log:\n%s", log.String())
		}
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
		if err == nil {
			c.Close()
			return
		}
		select {
		case err := <-done:
			t.Fatalf("postfix exited: %v\n%s", err, log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("postfix did not listen on %d\n%s", port, log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestInteropPostfixRelay(t *testing.T) {
	if os.Getenv("ENVELOPD_INTEROP") != "1" {
		t.Skip("interop test: set ENVELOPD_INTEROP=1 (needs postfix, python3-dkim)")
	}
	dir := t.TempDir()
	// Postfix's unprivileged processes must reach the queue below dir.
	for d := dir; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	python := pythonWithDKIM(t, dir)

	capture := startServer(t, serverScript{})
	_, cport, _ := net.SplitHostPort(capture.Addr)
	relayPort, _ := strconv.Atoi(cport)
	port := freePort(t)
	startPostfix(t, dir, port, relayPort)

	// Keys: Ed25519 and RSA for lab.test, in a static key file for dkimpy.
	var signers []dkim.Signer
	var keyLines []string
	for _, algo := range []string{"ed25519", "rsa"} {
		k, err := dkim.GenerateKey(algo)
		if err != nil {
			t.Fatal(err)
		}
		sel := "s" + algo
		line, err := dkim.TXTRecord("lab.test", sel, k.Public())
		if err != nil {
			t.Fatal(err)
		}
		keyLines = append(keyLines, line)
		signers = append(signers, dkim.Signer{Domain: "lab.test", Selector: sel, Key: k})
	}
	keyFile := filepath.Join(dir, "keys.txt")
	if err := os.WriteFile(keyFile, []byte(strings.Join(keyLines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	// An ORDER with 8-bit text, a dot-stuffed line and a long JSON line.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	body, _ := json.Marshal(map[string]any{
		"id": "ord_interop", "note": "Grüße — épub",
		"task": map[string]any{"description": strings.Repeat("long task ", 120)},
	})
	mailer := &Mailer{Signers: signers}
	out, err := mailer.Prepare(Draft{
		From: &mail.Address{Name: "Agent Ä", Address: "agent@lab.test"},
		To:   []*mail.Address{{Address: "worker@remote.test"}},
		Type: "ORDER", Note: "Grüße — épub",
		Text: "Hello,\n.a line that starts with a dot\nthanks",
		Body: body,
	}, "send")
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.OpenSQLite(ctx, filepath.Join(dir, "q.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	id, err := st.Enqueue(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := NewSubmitter("smtp://127.0.0.1:"+strconv.Itoa(port), "")
	if err != nil {
		t.Fatal(err)
	}
	w := &Worker{Store: st, Sender: sub}
	if n, err := w.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("worker: %d attempts, %v", n, err)
	}
	q, err := st.Queue(ctx, "")
	if err != nil || len(q) != 1 || q[0].ID != id || q[0].Recipients[0].State != store.QueueSent {
		t.Fatalf("queue after delivery to postfix: %+v %v", q, err)
	}

	// Postfix relays to the capture server.
	var got []byte
	for deadline := time.Now().Add(30 * time.Second); ; {
		if msgs := capture.messages(); len(msgs) > 0 {
			if len(msgs) != 1 || msgs[0].From != "agent@lab.test" || len(msgs[0].Rcpts) != 1 || msgs[0].Rcpts[0] != "worker@remote.test" {
				t.Fatalf("relayed: %+v", msgs)
			}
			got = msgs[0].Data
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("postfix did not relay the message within 30 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !bytes.Contains(got, []byte("by relay.lab.test (Postfix)")) {
		t.Errorf("no Postfix Received field in:\n%s", got)
	}
	if !bytes.HasPrefix(out.Raw, []byte("DKIM-Signature:")) || !bytes.HasSuffix(got, out.Raw) {
		t.Errorf("the relayed message is not our signed message byte for byte:\n%s", got)
	}
	r := parse.Parse(got, parse.Options{})
	if !r.Valid || r.Type != "order" || r.Subject != "ORDER | Grüße — épub" {
		t.Errorf("relayed message: valid=%v type=%q subject=%q %v", r.Valid, r.Type, r.Subject, r.Errors)
	}

	// The relayed bytes must verify; a copy with one body byte changed must
	// not (so the check itself can fail).
	tampered := bytes.Replace(got, []byte("thanks"), []byte("thankz"), 1)
	for _, c := range []struct {
		name string
		raw  []byte
		want string
	}{{"received.eml", got, "pass pass"}, {"tampered.eml", tampered, "fail fail"}} {
		msgFile := filepath.Join(dir, c.name)
		if err := os.WriteFile(msgFile, c.raw, 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(python, "-c", dkimpyVerify, msgFile, keyFile)
		cmd.Dir = dir
		res, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("dkimpy: %v\n%s", err, res)
		}
		if strings.TrimSpace(string(res)) != c.want {
			t.Errorf("dkimpy on %s: %q, want %q", c.name, res, c.want)
		}
	}
}
