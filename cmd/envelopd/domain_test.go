package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/envelopd/envelopd/authdns/dnstest"
	"github.com/envelopd/envelopd/domain"
	"github.com/envelopd/envelopd/store"
)

// cliErr runs a command that must fail with exit 2; it returns stderr.
func cliErr(t *testing.T, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	if code := run(context.Background(), &env{args: args, stdin: strings.NewReader(""), stdout: &out, stderr: &errb}); code != 2 {
		t.Errorf("%v: exit %d, want 2 (%s)", args, code, out.String())
	}
	return errb.String()
}

// publish serves d's records on a dnstest server, except those of the
// kinds in skip.
func publish(t *testing.T, d domain.Domain, skip ...string) *dnstest.Server {
	t.Helper()
	s, err := dnstest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	s.A(d.Config.Hostname, "192.0.2.25")
	edit := map[string]string{}
	for _, k := range skip {
		edit[k] = ""
	}
	domain.Publish(s, domain.Records(d.Name, d.Config), edit)
	return s
}

// TestDomainCLI: add (with the DKIM key serve signs with), list, zone,
// check against an in-process DNS server (right, then a record
// missing), delete, and the bad names.
func TestDomainCLI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "d.db")
	key := filepath.Join(dir, "ed.pem")
	txt, _ := cli(t, "dkim", "keygen", "--domain", "agents.example.com", "--selector", "ed1", "--algo", "ed25519", "--out", key)
	out, _ := cli(t, "domain", "add", "Agents.Example.com.", "--hostname", "mx.example.net", "--dkim-key", key, "--dkim-selector", "ed1", "--json", "--db", db)
	var d domain.Domain
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("add --json: %v %q", err, out)
	}
	if d.Name != "agents.example.com" || d.Status != "pending" || len(d.Config.DKIM) != 1 ||
		"ed1._domainkey.agents.example.com "+d.Config.DKIM[0].TXT != strings.TrimSpace(txt) {
		t.Fatalf("added %+v (keygen printed %q)", d, txt)
	}
	list, _ := cli(t, "domain", "list", "--db", db)
	if !strings.Contains(list, "agents.example.com  pending  mx.example.net  never") {
		t.Errorf("list:\n%s", list)
	}
	zone, _ := cli(t, "domain", "zone", "agents.example.com", "--db", db)
	if zone != domain.Zone(d.Name, d.Config) || !strings.Contains(zone, "ed1._domainkey.agents.example.com.\t3600\tIN\tTXT\t\"v=DKIM1; k=ed25519; p=") {
		t.Errorf("zone:\n%s", zone)
	}

	dns := publish(t, d, "dmarc")
	out, code := cli(t, "domain", "check", "agents.example.com", "--json", "--dns", dns.Addr(), "--db", db)
	if code != 1 {
		t.Errorf("check with DMARC missing: exit %d, want 1", code)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 7 {
		t.Fatalf("check --json: %d lines:\n%s", len(lines), out)
	}
	for _, l := range lines {
		var r map[string]any
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"type", "name", "want", "got", "state"} {
			if _, ok := r[k]; !ok {
				t.Errorf("%s: no %q", l, k)
			}
		}
		if want := map[bool]string{true: "missing", false: "ok"}[r["name"] == "_dmarc.agents.example.com"]; r["state"] != want {
			t.Errorf("%s: want state %s", l, want)
		}
	}
	text, _ := cli(t, "domain", "check", "agents.example.com", "--dns", dns.Addr(), "--db", db)
	if !strings.Contains(text, "missing  TXT    _dmarc.agents.example.com") || !strings.Contains(text, "want: v=DMARC1; p=none; rua=mailto:dmarc-reports@agents.example.com") {
		t.Errorf("check:\n%s", text)
	}
	if _, code := cli(t, "domain", "check", "agents.example.com", "--dns", publish(t, d).Addr(), "--db", db); code != 0 {
		t.Errorf("check with every record: exit %d", code)
	}
	if list, _ := cli(t, "domain", "list", "--json", "--db", db); !strings.Contains(list, `"status":"verified"`) {
		t.Errorf("list after check: %s", list)
	}

	for _, tc := range []struct{ name, code string }{
		{"agents.example.com", "domain_exists"},
		{"*.example.com", "wildcard_domain"},
		{"co.uk", "public_suffix"},
		{"xn--zz.example", "invalid_domain"},
	} {
		if e := cliErr(t, "domain", "add", tc.name, "--hostname", "mx.example.net", "--db", db); !strings.Contains(e, tc.code) {
			t.Errorf("add %s: %q, want %s", tc.name, e, tc.code)
		}
	}
	if e := cliErr(t, "domain", "add", "b.example.org", "--db", db); !strings.Contains(e, "no_hostname") {
		t.Errorf("add without hostname: %q", e)
	}
	cli(t, "domain", "delete", "agents.example.com", "--db", db)
	if e := cliErr(t, "domain", "zone", "agents.example.com", "--db", db); !strings.Contains(e, "domain_not_found") {
		t.Errorf("zone after delete: %q", e)
	}
}

// TestMTASTSPolicy: the policy of a managed domain at
// mta-sts.DOMAIN/.well-known/mta-sts.txt; other hosts pass through.
func TestMTASTSPolicy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	svc := &domain.Service{Store: st}
	if _, err := svc.Add(ctx, "agents.example.com", domain.Config{Hostname: "mx.example.com", STSMode: "enforce"}, ""); err != nil {
		t.Fatal(err)
	}
	h := mtaSTS(svc, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("next")) }))
	for _, tc := range []struct {
		host, path string
		code       int
		body       string
	}{
		{"mta-sts.agents.example.com", "/.well-known/mta-sts.txt", 200, "version: STSv1\r\nmode: enforce\r\nmx: mx.example.com\r\nmax_age: 604800\r\n"},
		{"MTA-STS.Agents.Example.com:443", "/.well-known/mta-sts.txt", 200, "version: STSv1\r\nmode: enforce\r\nmx: mx.example.com\r\nmax_age: 604800\r\n"},
		{"mta-sts.other.example.com", "/.well-known/mta-sts.txt", 404, "404 page not found\n"},
		{"mta-sts.agents.example.com", "/", 404, "404 page not found\n"},
		{"mx.example.com", "/v0/inboxes", 200, "next"},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "https://"+tc.host+tc.path, nil))
		if rec.Code != tc.code || rec.Body.String() != tc.body {
			t.Errorf("%s%s: %d %q, want %d %q", tc.host, tc.path, rec.Code, rec.Body.String(), tc.code, tc.body)
		}
		if tc.code == 200 && tc.body != "next" && rec.Header().Get("Content-Type") != "text/plain" {
			t.Errorf("%s: Content-Type %q", tc.host, rec.Header().Get("Content-Type"))
		}
	}
}
