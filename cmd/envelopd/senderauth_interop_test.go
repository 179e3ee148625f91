package main

import (
	"encoding/json"
	"fmt"
	"net/smtp"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/envelopd/envelopd/internal/knottest"
)

// TestInteropSenderAuthServe runs `envelopd serve --dns` against Knot
// serving SPF, DMARC and the DKIM/ARC keys of the dkimpy chains, with
// --dmarc-enforce and --arc-trust list.test: the PAY a trusted list
// forwarded (DKIM broken, ARC sealed) is stored authenticated as its From
// domain, the same mail with a forged seal is refused (origin.test
// publishes p=reject), and `inbox --json` and `thread` show the verdict.
func TestInteropSenderAuthServe(t *testing.T) {
	if os.Getenv("ENVELOPD_INTEROP") != "1" {
		t.Skip("ENVELOPD_INTEROP=1 runs it against Knot")
	}
	recs := []knottest.Record{
		knottest.TXT("_dmarc.origin.test", "v=DMARC1; p=reject"),
		knottest.TXT("list.test", "v=spf1 ip4:127.0.0.0/8 -all"),
	}
	for _, r := range readRecords(t, "../../senderauth/testdata/arc/keys.txt") {
		recs = append(recs, knottest.TXT(r[0], r[1]))
	}
	dns := knottest.Start(t, recs)
	db := filepath.Join(t.TempDir(), "e.db")
	addr := startServe(t, db, "--dns", dns, "--dmarc-enforce", "--arc-trust", "list.test", "--hostname", "mx.shop.test")
	read := func(name string) []byte {
		b, err := os.ReadFile("../../senderauth/testdata/arc/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	smtpSend(t, addr, "bounce@list.test", "agent@shop.test", read("forwarded.eml"))
	if err := smtp.SendMail(addr, nil, "bounce@list.test", []string{"agent@shop.test"}, read("forged.eml")); err == nil || !strings.Contains(err.Error(), "550") {
		t.Fatalf("forged ARC seal: %v, want 550", err)
	}
	code, out, errs := runCmd(t, "", "inbox", "--json", "--db", db)
	if code != 0 {
		t.Fatalf("inbox: %d %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 1 {
		t.Fatalf("inbox shows %d messages, want the forwarded one only: %s", len(lines), out)
	}
	var m struct {
		ID              int64           `json:"id"`
		SPF             string          `json:"spf"`
		AuthenticatedAs *string         `json:"authenticated_as"`
		AuthenticatedBy string          `json:"authenticated_by"`
		DMARC           json.RawMessage `json:"dmarc"`
		ARC             struct {
			Result        string   `json:"result"`
			Sealers       []string `json:"sealers"`
			TrustedSealer string   `json:"trusted_sealer"`
		} `json:"arc"`
		Errors []struct {
			Code string `json:"code"`
		} `json:"errors"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &m); err != nil {
		t.Fatal(err)
	}
	if m.SPF != "pass" || m.AuthenticatedAs == nil || *m.AuthenticatedAs != "origin.test" || m.AuthenticatedBy != "arc" ||
		m.ARC.Result != "pass" || m.ARC.TrustedSealer != "list.test" || !strings.Contains(string(m.DMARC), `"result":"fail"`) {
		t.Fatalf("verdict in inbox --json: %s", lines[0])
	}
	for _, e := range m.Errors {
		if e.Code == "dkim_failed" {
			t.Fatalf("dkim_failed kept although the trusted sealer vouches: %s", lines[0])
		}
	}
	code, out, errs = runCmd(t, "", "thread", "--db", db, fmt.Sprint(m.ID))
	if code != 0 || !strings.Contains(out, `"authenticated_as":"origin.test"`) {
		t.Fatalf("thread: %d %s %s", code, out, errs)
	}
}
