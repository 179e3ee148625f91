package main

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/envelopd/envelopd/store"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// imaplibFetch is the Python side: log in, LIST, SELECT INBOX, FETCH the
// first message's BODY[] and write it to a file; print the LIST lines and
// the UIDVALIDITY.
const imaplibFetch = `
import imaplib, sys
host, port, user, pw, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
m = imaplib.IMAP4(host, port)
m.login(user, pw)
typ, boxes = m.list()
assert typ == "OK", typ
for b in boxes:
    print("LIST", b.decode())
typ, data = m.select("INBOX")
assert typ == "OK", (typ, data)
print("EXISTS", data[0].decode())
typ, data = m.status("INBOX", "(UIDVALIDITY UIDNEXT)")
print("STATUS", data[0].decode())
typ, data = m.fetch("1", "(UID BODY[])")
assert typ == "OK", typ
open(out, "wb").write(data[0][1])
typ, data = m.fetch("1", "(FLAGS)")
print("FLAGS", data[0].decode())
m.logout()
`

// TestInteropRelaySwaksImaplib runs `envelopd serve --relay` with
// --submission, --imap and --sign-local: swaks (a client nobody here
// wrote) submits an ORDER with AUTH PLAIN; unauthenticated relaying and
// submission without AUTH are refused; Python's imaplib logs into the IMAP
// view, lists the folders, and FETCH BODY[] returns exactly the bytes
// stored for bob (DKIM-signed by the relay, verified: pass).
func TestInteropRelaySwaksImaplib(t *testing.T) {
	interop(t, "swaks", "/usr/bin/python3")
	dir := t.TempDir()
	db := filepath.Join(dir, "relay.db")
	for _, u := range []string{"alice", "bob"} {
		pf := filepath.Join(dir, u+".pw")
		os.WriteFile(pf, []byte(u+"-secret\n"), 0o600)
		if _, code := cli(t, "mailbox", "add", u+"@agents.test", "--password-file", pf, "--db", db); code != 0 {
			t.Fatalf("mailbox add %s: exit %d", u, code)
		}
	}
	sub, imapAddr := freeAddr(t), freeAddr(t)
	mx := startServe(t, db, "--relay", "--domain", "agents.test", "--submission", sub, "--imap", imapAddr, "--sign-local")

	order, err := os.ReadFile("../../testdata/flows/first-contact-unpaid/03-order.eml")
	if err != nil {
		t.Fatal(err)
	}
	// The relay takes mail only From the authenticated user.
	raw := strings.NewReplacer("buyer@", "alice@", "seller@", "bob@").Replace(string(order))
	raw = replaceHeader(raw, "From", "alice@agents.test")
	raw = replaceHeader(raw, "To", "bob@agents.test")
	eml := filepath.Join(dir, "order.eml")
	os.WriteFile(eml, []byte(raw), 0o644)

	swaks := func(args ...string) (string, error) {
		out, err := exec.Command("swaks", args...).CombinedOutput()
		return string(out), err
	}
	host, port, _ := strings.Cut(sub, ":")
	out, err := swaks("--server", host, "--port", port, "--auth", "PLAIN", "--auth-user", "alice@agents.test",
		"--auth-password", "alice-secret", "--from", "alice@agents.test", "--to", "bob@agents.test", "--data", "@"+eml)
	if err != nil || !strings.Contains(out, "250 2.0.0 OK delivered to 1 local mailbox(es)") {
		t.Fatalf("swaks AUTH submission: %v\n%s", err, out)
	}
	// Refusals: no AUTH on the submission port; relaying for a stranger on
	// the MX port; a wrong password.
	if out, err := swaks("--server", host, "--port", port, "--from", "alice@agents.test", "--to", "bob@agents.test", "--data", "@"+eml); err == nil ||
		!strings.Contains(out, "5.7.0") {
		t.Errorf("submission without AUTH accepted: %s", out)
	}
	mh, mp, _ := strings.Cut(mx, ":")
	if out, err := swaks("--server", mh, "--port", mp, "--from", "x@else.test", "--to", "y@remote.test", "--data", "@"+eml); err == nil ||
		!strings.Contains(out, "550 5.7.1") {
		t.Errorf("open relay: %s", out)
	}
	if out, err := swaks("--server", host, "--port", port, "--auth", "PLAIN", "--auth-user", "alice@agents.test",
		"--auth-password", "wrong", "--from", "alice@agents.test", "--to", "bob@agents.test", "--data", "@"+eml); err == nil ||
		!strings.Contains(out, "535") {
		t.Errorf("wrong password accepted: %s", out)
	}

	st, err := store.OpenSQLite(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var got *store.Message
	for deadline := time.Now().Add(5 * time.Second); got == nil && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		ms, err := st.Messages(context.Background(), store.Filter{Mailbox: "bob@agents.test", WithRaw: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) > 0 {
			got = &ms[0]
		}
	}
	if got == nil {
		t.Fatal("no message stored for bob@agents.test")
	}
	var dk []struct{ Domain, Result string }
	json.Unmarshal(got.DKIM, &dk)
	if got.Type != "order" || got.Status != store.StatusAccepted || len(dk) != 1 || dk[0].Result != "pass" || dk[0].Domain != "agents.test" {
		t.Errorf("stored ORDER: %s %s %v dkim %s", got.Type, got.Status, got.Errors, got.DKIM)
	}

	ih, ip, _ := strings.Cut(imapAddr, ":")
	fetched := filepath.Join(dir, "fetched.eml")
	py, err := exec.Command("/usr/bin/python3", "-c", imaplibFetch, ih, ip, "bob@agents.test", "bob-secret", fetched).CombinedOutput()
	if err != nil {
		t.Fatalf("imaplib: %v\n%s", err, py)
	}
	t.Logf("imaplib:\n%s", py)
	for _, want := range []string{`LIST (\Subscribed) "/" INBOX`, `LIST (\Subscribed) "/" "Sent"`, "EXISTS 1", "UIDVALIDITY", `\Seen`} {
		if !strings.Contains(string(py), want) {
			t.Errorf("imaplib output lacks %q", want)
		}
	}
	b, err := os.ReadFile(fetched)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != string(got.Raw) {
		t.Errorf("FETCH BODY[] returned %d bytes that differ from the %d stored bytes", len(b), len(got.Raw))
	}
	if !strings.HasPrefix(string(b), "DKIM-Signature:") || !strings.Contains(string(b), "\r\n\r\n") {
		t.Errorf("fetched message is not the signed message as delivered:\n%.200s", b)
	}
}

// replaceHeader sets the first header field name to value.
func replaceHeader(raw, name, value string) string {
	lines := strings.SplitAfter(raw, "\n")
	for i, l := range lines {
		if l == "\r\n" || l == "\n" {
			break
		}
		if strings.HasPrefix(strings.ToLower(l), strings.ToLower(name)+":") {
			end := "\n"
			if strings.HasSuffix(l, "\r\n") {
				end = "\r\n"
			}
			lines[i] = name + ": " + value + end
			break
		}
	}
	return strings.Join(lines, "")
}
