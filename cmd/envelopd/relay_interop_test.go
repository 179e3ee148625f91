package main

import (
	"context"
	"encoding/json"
	"fmt"
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
typ, data = m.select("Quarantine", readonly=True)
assert typ == "OK", (typ, data)
print("QUARANTINE EXISTS", data[0].decode())
if int(data[0]) > 0:
    typ, data = m.fetch("1", "(RFC822.SIZE BODY.PEEK[])")
    assert typ == "OK", typ
    print("QUARANTINE FETCH", data[0][0].decode())
    open(out + ".quarantine", "wb").write(data[0][1])
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
	mx := startServe(t, db, "--relay", "--domain", "agents.test", "--submission", sub, "--imap", imapAddr, "--sign-local",
		"--hostname", "mx.agents.test")

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

	// The same mail From alice without AUTH on the MX port
	// (a stranger writing as a local user) is refused at DATA.
	if out, err := swaks("--server", mh, "--port", mp, "--from", "alice@agents.test", "--to", "bob@agents.test", "--data", "@"+eml); err == nil ||
		!strings.Contains(out, "<** 550 5.7.1 From is an address at a local domain") {
		t.Errorf("unauthenticated local From on the MX port: %v\n%s", err, out)
	}
	// A PAY, then a second PAY replaying its payment proof under a new id
	// (testdata/flows/replay): the second is stored as a duplicate
	// (duplicate_proof) and served in Quarantine, not in INBOX.
	for _, f := range []string{"01-pay.eml", "02-pay-same-proof.eml"} {
		b, err := os.ReadFile("../../testdata/flows/replay/" + f)
		if err != nil {
			t.Fatal(err)
		}
		pay := replaceHeader(replaceHeader(string(b), "From", "alice@agents.test"), "To", "bob@agents.test")
		pay = strings.ReplaceAll(pay, "\r\n", "\n")
		pay = strings.ReplaceAll(pay, "\n", "\r\n")
		pf := filepath.Join(dir, f)
		os.WriteFile(pf, []byte(pay), 0o644)
		if out, err := swaks("--server", host, "--port", port, "--auth", "PLAIN", "--auth-user", "alice@agents.test",
			"--auth-password", "alice-secret", "--from", "alice@agents.test", "--to", "bob@agents.test", "--data", "@"+pf); err != nil {
			t.Fatalf("swaks %s: %v\n%s", f, err, out)
		}
	}

	st, err := store.OpenSQLite(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var got, dup *store.Message
	for deadline := time.Now().Add(5 * time.Second); dup == nil && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		all, err := st.Messages(context.Background(), store.Filter{Mailbox: "bob@agents.test", WithRaw: true})
		if err != nil {
			t.Fatal(err)
		}
		var ms []store.Message // received; bob's relay also keeps the courtesy OOPS it sent
		for _, m := range all {
			if m.Direction == store.DirIn {
				ms = append(ms, m)
			}
		}
		if len(ms) > 3 {
			t.Fatalf("%d messages received by bob@agents.test, want 3 (the forged one must not be stored)", len(ms))
		}
		if len(ms) == 3 {
			got, dup = &ms[0], &ms[2]
		}
	}
	if dup == nil {
		t.Fatal("the ORDER and the two PAYs are not all stored for bob@agents.test")
	}
	if dup.Status != store.StatusDuplicate || len(dup.Errors) != 1 || dup.Errors[0].Code != "duplicate_proof" {
		t.Errorf("replayed PAY: %s %v, want duplicate (duplicate_proof)", dup.Status, dup.Errors)
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
	for _, want := range []string{`LIST (\Subscribed) "/" INBOX`, `LIST (\Subscribed) "/" "Quarantine"`, `LIST (\Subscribed) "/" "Sent"`,
		"EXISTS 2", "UIDVALIDITY", `\Seen`, "QUARANTINE EXISTS 1", "RFC822.SIZE"} {
		if !strings.Contains(string(py), want) {
			t.Errorf("imaplib output lacks %q", want)
		}
	}
	b, err := os.ReadFile(fetched)
	if err != nil {
		t.Fatal(err)
	}
	// BODY[] is the view's verdict fields followed by exactly the stored
	// bytes (DKIM-signed by the relay); INBOX has the accepted ORDER.
	// Authentication-Results is the sender verdict's: SPF does not apply
	// to an authenticated submission, DKIM passes, no DMARC record.
	wantHead := "Authentication-Results: mx.agents.test;\r\n\tspf=none reason=\"authenticated submission (AUTH)\";\r\n" +
		"\tdkim=pass header.a=ed25519-sha256 header.d=agents.test header.s=envelopd;\r\n" +
		"\tdmarc=none reason=\"no DMARC record for agents.test or its organizational domain\" header.from=agents.test;\r\n" +
		"\tarc=none\r\n" +
		"X-Envelopd-Status: accepted\r\n"
	if string(b) != wantHead+string(got.Raw) {
		t.Errorf("FETCH BODY[] returned %d bytes, want the verdict fields and the %d stored bytes:\n%.300s", len(b), len(got.Raw), b)
	}
	if !strings.HasPrefix(string(got.Raw), "DKIM-Signature:") || !strings.Contains(string(got.Raw), "\r\n\r\n") {
		t.Errorf("stored message is not the signed message as delivered:\n%.200s", got.Raw)
	}
	q, err := os.ReadFile(fetched + ".quarantine")
	if err != nil {
		t.Fatal(err)
	}
	wantHead = strings.Replace(wantHead, "accepted", "duplicate; errors=duplicate_proof; payment=duplicate", 1)
	if string(q) != wantHead+string(dup.Raw) {
		t.Errorf("Quarantine BODY[]: %d bytes, want the verdict fields and the %d stored bytes:\n%.300s", len(q), len(dup.Raw), q)
	}
	if !strings.Contains(string(py), fmt.Sprintf("RFC822.SIZE %d", len(q))) {
		t.Errorf("Quarantine RFC822.SIZE is not the %d bytes served", len(q))
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
