package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/envelopd/envelopd/domain"
	"github.com/envelopd/envelopd/internal/knottest"
)

// TestInteropDomainsKnot: Knot DNS on loopback is the authoritative
// server of three managed domains — one with every record right (its
// zone is envelopd's own zone-file export, which Knot must load), one
// with none, one with each record wrong. The AgentMail SDK creates the
// domains and verifies them against `serve --dns`; `envelopd domain
// check --dns --json` must agree with the SDK record by record, and both
// with what Knot serves.
func TestInteropDomainsKnot(t *testing.T) {
	interop(t, "node", "npm", "knotd")
	npm := npmDir(t)
	const (
		right   = "right.envelopd.test"
		missing = "missing.envelopd.test"
		wrong   = "wrong.envelopd.test"
	)
	names := []string{right, missing, wrong}
	dns := knottest.FreeAddr(t)
	args := []string{"--hostname", "mx.envelopd.test", "--dns", dns, "--relay", "--sign-local"}
	for _, d := range names {
		args = append(args, "--domain", d)
	}
	srv := startAPIServerArgs(t, "", args)
	out := t.TempDir()
	sdk := func(phase string) {
		t.Helper()
		script, _ := filepath.Abs("../../testdata/api/domains.mjs")
		cmd := exec.Command("node", script)
		cmd.Env = append(os.Environ(), "ENVELOPD_API_URL="+srv.url, "ENVELOPD_API_KEY="+srv.key, "ENVELOPD_NPM_DIR="+npm,
			"DOMAINS="+strings.Join(names, ","), "OUT="+out, "PHASE="+phase)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("node domains.mjs (%s): %v\n%s", phase, err, b)
		}
	}
	sdk("create")

	export, err := os.ReadFile(filepath.Join(out, right+".zone"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(export), "envelopd._domainkey."+right+".\t3600\tIN\tTXT\t\"v=DKIM1; k=ed25519; p=") {
		t.Fatalf("the export has no DKIM key of the relay's signer:\n%s", export)
	}
	zoneWrong := knottest.SOA(wrong) + `@ IN MX 10 other.envelopd.test.
@ IN TXT "v=spf1 -all"
envelopd._domainkey IN TXT "v=DKIM1; k=ed25519; p=11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="
_dmarc IN TXT "v=DMARC1; p=reject; rua=mailto:someone@elsewhere.test"
_mta-sts IN TXT "v=STSv1; id=old1"
mta-sts IN A 192.0.2.99
_smtp._tls IN TXT "v=TLSRPTv1; rua=mailto:someone@elsewhere.test"
`
	knottest.StartZonesAt(t, dns, map[string]string{
		"envelopd.test": knottest.SOA("envelopd.test") + "mx IN A 192.0.2.25\nother IN A 192.0.2.99\n",
		right:           knottest.SOA(right) + string(export), // the export loads as is
		missing:         knottest.SOA(missing),
		wrong:           zoneWrong,
	})
	sdk("verify")

	sdkState := map[string]string{"VALID": domain.StateOK, "MISSING": domain.StateMissing, "INVALID": domain.StateDifferent}
	for _, tc := range []struct {
		name, state, sdkStatus string
	}{
		{right, domain.StateOK, "VERIFIED"},
		{missing, domain.StateMissing, "PENDING"},
		{wrong, domain.StateDifferent, "PENDING"},
	} {
		b, err := os.ReadFile(filepath.Join(out, tc.name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Status  string `json:"status"`
			Records []struct {
				Type, Name, Value, Status string
			} `json:"records"`
		}
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if got.Status != tc.sdkStatus || len(got.Records) != 7 {
			t.Errorf("%s: SDK status %s with %d records, want %s: %s", tc.name, got.Status, len(got.Records), tc.sdkStatus, b)
		}
		cmd := exec.Command(srv.bin, "domain", "check", tc.name, "--json", "--dns", dns, "--db", srv.db)
		cli, err := cmd.Output()
		if code := cmd.ProcessState.ExitCode(); code != map[bool]int{true: 0, false: 1}[tc.state == domain.StateOK] {
			t.Errorf("%s: domain check exit %d (%v)", tc.name, code, err)
		}
		lines := strings.Split(strings.TrimSpace(string(cli)), "\n")
		if len(lines) != len(got.Records) {
			t.Fatalf("%s: domain check printed %d records, the SDK has %d:\n%s", tc.name, len(lines), len(got.Records), cli)
		}
		for i, l := range lines {
			var r domain.Result
			if err := json.Unmarshal([]byte(l), &r); err != nil {
				t.Fatal(err)
			}
			s := got.Records[i]
			if r.Type != s.Type || r.Name != s.Name || sdkState[s.Status] != r.State {
				t.Errorf("%s: CLI %s %s %s, SDK %s %s %s", tc.name, r.Type, r.Name, r.State, s.Type, s.Name, s.Status)
			}
			if r.State != tc.state {
				t.Errorf("%s: %s %s is %s (want %q got %q), want %s", tc.name, r.Type, r.Name, r.State, r.Want, r.Got, tc.state)
			}
		}
	}
}
