package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/envelopd/envelopd/dkim"
)

// interop skips unless ENVELOPD_INTEROP=1; then every named program must
// be there (a missing peer fails the run, it is not skipped).
func interop(t *testing.T, programs ...string) {
	t.Helper()
	if os.Getenv("ENVELOPD_INTEROP") != "1" {
		t.Skip("interop test: set ENVELOPD_INTEROP=1")
	}
	for _, p := range programs {
		if _, err := exec.LookPath(p); err != nil {
			t.Fatalf("interop peer %s is missing: %v", p, err)
		}
	}
}

// TestInteropServeSwaksAndSmtpSource: swaks (a client nobody here wrote)
// delivers a DKIM-signed ORDER, then the same mail again; Postfix's
// smtp-source sends 2000 mails over 10 concurrent sessions. `envelopd
// inbox --json` must then list exactly 2001 messages: one accepted ORDER
// with dkim pass (the redelivery stored once), 2000 quarantined
// non-Envelopay mails.
func TestInteropServeSwaksAndSmtpSource(t *testing.T) {
	interop(t, "swaks", "smtp-source")
	dir := t.TempDir()
	key, err := dkim.GenerateKey("ed25519")
	if err != nil {
		t.Fatal(err)
	}
	txt, err := dkim.TXTRecord("buyer.test", "sel1", key.Public())
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "keys.txt")
	os.WriteFile(keyFile, []byte(txt+"\n"), 0o644)
	order, err := os.ReadFile("../../testdata/flows/first-contact-unpaid/03-order.eml")
	if err != nil {
		t.Fatal(err)
	}
	signed, err := dkim.Sign(order, dkim.Signer{Domain: "buyer.test", Selector: "sel1", Key: key})
	if err != nil {
		t.Fatal(err)
	}
	eml := filepath.Join(dir, "order.eml")
	os.WriteFile(eml, signed, 0o644)

	db := filepath.Join(dir, "envelopd.db")
	addr := startServe(t, db, "--dkim-txt", keyFile)
	host, port, _ := strings.Cut(addr, ":")
	for i := range 2 {
		out, err := exec.Command("swaks", "--server", host, "--port", port, "--from", "alice@buyer.test",
			"--to", "bob@worker.test", "--data", eml).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "<-  250 2.0.0 OK") {
			t.Fatalf("swaks delivery %d: %v\n%s", i+1, err, out)
		}
		if i == 1 && !strings.Contains(string(out), "already stored") {
			t.Errorf("second delivery of the same mail was not recognised:\n%s", out)
		}
	}
	out, err := exec.Command("smtp-source", "-s", "10", "-m", "2000", "-l", "1024", "-f", "load@source.test",
		"-t", "sink@worker.test", addr).CombinedOutput()
	if err != nil {
		t.Fatalf("smtp-source: %v\n%s", err, out)
	}

	all := inboxJSON(t, db)
	if len(all) != 2001 {
		t.Fatalf("inbox lists %d messages, want 2001", len(all))
	}
	if o := all[0]; o.Type != "order" || o.Status != "accepted" {
		t.Errorf("the swaks ORDER: %+v", o)
	}
	dk, _ := cli(t, "inbox", "--json", "--db", db, "--type", "order")
	if !strings.Contains(dk, `"dkim":[{"domain":"buyer.test","selector":"sel1","algorithm":"ed25519-sha256","result":"pass","error":""}]`) {
		t.Errorf("ORDER's dkim results: %s", dk)
	}
	if q := inboxJSON(t, db, "--status", "quarantined"); len(q) != 2000 {
		t.Errorf("%d quarantined (smtp-source mails are not Envelopay), want 2000", len(q))
	}
}
