package mailin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// testIdP is the test's OAuth2 provider: a token endpoint (RFC 6749 §6,
// refresh_token grant) issuing numbered access tokens, and the token
// introspection endpoint (RFC 7662) Dovecot's oauth2 passdb asks.
type testIdP struct {
	mu            sync.Mutex
	valid         map[string]string // access token → user
	refresh       string            // the refresh token accepted
	issued        int
	introspected  []string // tokens Dovecot asked about
	tokenRequests int
}

func (p *testIdP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := r.ParseForm(); err != nil || r.Method != http.MethodPost {
		http.Error(w, "want a POST form", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/introspect":
		tok := r.PostForm.Get("token")
		p.introspected = append(p.introspected, tok)
		if user, ok := p.valid[tok]; ok {
			fmt.Fprintf(w, `{"active":true,"username":%q,"scope":"imap"}`, user)
			return
		}
		fmt.Fprint(w, `{"active":false}`)
	case "/token":
		p.tokenRequests++
		id, secret, ok := r.BasicAuth()
		if !ok {
			id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
		}
		if r.PostForm.Get("grant_type") != "refresh_token" || r.PostForm.Get("refresh_token") != p.refresh ||
			id != "envelopd-test" || secret != "client-s3cret" {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":"invalid_grant","error_description":"Token has been expired or revoked."}`)
			return
		}
		p.issued++
		tok := fmt.Sprintf("ya29.refreshed-%d", p.issued)
		p.valid[tok] = "agent"
		fmt.Fprintf(w, `{"access_token":%q,"token_type":"Bearer","expires_in":3600}`, tok)
	default:
		http.NotFound(w, r)
	}
}

func (p *testIdP) seen() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.introspected...)
}

// dovecotOAuth2 is the auth part of the Dovecot config: the oauth2 passdb
// (Dovecot 2.3) for XOAUTH2 and OAUTHBEARER, validating tokens by POSTing
// them to the test's introspection endpoint. FILE is the oauth2 settings
// file (dovecot-oauth2.conf.ext).
const dovecotOAuth2 = `auth_mechanisms = xoauth2 oauthbearer
auth_verbose = yes
passdb {
  driver = oauth2
  mechanisms = xoauth2 oauthbearer
  args = FILE
}`

// TestInteropDovecotOAuth2: `envelopd poll` logs into a real Dovecot with
// OAuth2 — a token from --token-command (OAUTHBEARER, chosen
// automatically, and XOAUTH2, forced), and one refreshed from a refresh
// token file at the test's token endpoint — and imports the mailbox; a
// token Dovecot's introspection calls inactive is a login failure (exit
// 2, "login rejected"), a failing token command a clear error.
func TestInteropDovecotOAuth2(t *testing.T) {
	if os.Getenv("ENVELOPD_INTEROP") != "1" {
		t.Skip("set ENVELOPD_INTEROP=1 to run against a real Dovecot")
	}
	if os.Geteuid() != 0 {
		t.Fatal("ENVELOPD_INTEROP=1: starting Dovecot needs root (see shared/interop/README.md)")
	}
	idp := &testIdP{valid: map[string]string{"ya29.from-command": "agent"}, refresh: "1//refresh-token"}
	srv := httptest.NewServer(idp)
	defer srv.Close()

	// The oauth2 settings file sits next to Dovecot's directory, readable
	// by its auth process.
	base, err := os.MkdirTemp("", "envelopd-oauth2-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(base)
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	ext := fmt.Sprintf(`introspection_mode = post
introspection_url = %s/introspect
force_introspection = yes
username_attribute = username
active_attribute = active
active_value = true
`, srv.URL)
	if err := os.MkdirAll(filepath.Join(base, "oauth2"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, "oauth2", "dovecot-oauth2.conf.ext"), []byte(ext), 0o644); err != nil {
		t.Fatal(err)
	}
	auth := strings.Replace(dovecotOAuth2, "FILE", filepath.Join(base, "oauth2", "dovecot-oauth2.conf.ext"), 1)
	d := startDovecot(t, auth)

	files, _ := filepath.Glob("../testdata/imap/*.eml")
	if len(files) == 0 {
		t.Fatal("no testdata/imap corpus")
	}
	for _, f := range files {
		if err := d.deliverLDA(t, f); err != nil {
			t.Fatal(err)
		}
	}
	n := len(files)
	bin := buildEnvelopd(t)
	tmp := t.TempDir()
	url := fmt.Sprintf("imap://agent@127.0.0.1:%d/INBOX", d.imapPort)
	dbn := 0
	poll := func(wantExit int, args ...string) pollSummaryJSON {
		t.Helper()
		dbn++ // a fresh database: every run imports the whole mailbox
		all := append([]string{"poll", "--once", "--db", filepath.Join(tmp, fmt.Sprintf("%d.db", dbn)),
			"--dkim-txt", dkimKeys()}, args...)
		if !strings.HasPrefix(args[0], "--config") {
			all = append(all, "--imap", url)
		}
		cmd := exec.Command(bin, all...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		start := time.Now()
		err := cmd.Run()
		code := cmd.ProcessState.ExitCode()
		if code != wantExit {
			log, _ := os.ReadFile(filepath.Join(d.dir, "dovecot.log"))
			t.Fatalf("envelopd %s: exit %d (%v), want %d\n%s\n%s\ndovecot.log:\n%s", strings.Join(args, " "), code, err, wantExit,
				stdout.String(), stderr.String(), log)
		}
		var s pollSummaryJSON
		if err := json.Unmarshal(stdout.Bytes(), &s); err != nil {
			t.Fatalf("summary %q: %v\n%s", stdout.String(), err, stderr.String())
		}
		t.Logf("poll --once %s: %+v in %v", strings.Join(args, " "), s, time.Since(start).Round(time.Millisecond))
		for _, tok := range []string{"ya29.", "1//refresh", "client-s3cret"} {
			if strings.Contains(stderr.String(), tok) || strings.Contains(stdout.String(), tok) {
				t.Errorf("envelopd's output holds a secret (%q):\n%s", tok, stderr.String())
			}
		}
		return s
	}
	mech := func(m string) int {
		log, _ := os.ReadFile(filepath.Join(d.dir, "dovecot.log"))
		return strings.Count(string(log), "method="+m)
	}

	// 1. Token command, mechanism chosen: Dovecot offers both, OAUTHBEARER wins.
	if s := poll(0, "--token-command", "printf '%s\\n' ya29.from-command"); s.Stored != n || s.Error != "" {
		t.Fatalf("token command: %+v, want %d stored", s, n)
	}
	if got := idp.seen(); len(got) != 1 || got[0] != "ya29.from-command" {
		t.Errorf("Dovecot introspected %q, want the command's token once", got)
	}
	if mech("OAUTHBEARER") != 1 {
		t.Errorf("Dovecot logged %d OAUTHBEARER logins, want 1", mech("OAUTHBEARER"))
	}
	// 2. The same, XOAUTH2 forced (Outlook offers only XOAUTH2).
	if s := poll(0, "--token-command", "echo ya29.from-command", "--oauth2-mechanism", "xoauth2"); s.Stored != n || s.Error != "" {
		t.Fatalf("XOAUTH2: %+v, want %d stored", s, n)
	}
	if mech("XOAUTH2") != 1 {
		t.Errorf("Dovecot logged %d XOAUTH2 logins, want 1", mech("XOAUTH2"))
	}
	// 3. Refresh token file, client secret file, token URL: envelopd
	// exchanges the refresh token, Dovecot validates the new access token.
	secret := filepath.Join(tmp, "client.secret")
	refresh := filepath.Join(tmp, "refresh.token")
	os.WriteFile(secret, []byte("client-s3cret\n"), 0o600)
	os.WriteFile(refresh, []byte("1//refresh-token\n"), 0o600)
	if s := poll(0, "--oauth2-token-url", srv.URL+"/token", "--oauth2-client-id", "envelopd-test",
		"--oauth2-client-secret-file", secret, "--oauth2-refresh-token-file", refresh); s.Stored != n || s.Error != "" {
		t.Fatalf("refresh token: %+v, want %d stored", s, n)
	}
	if got := idp.seen(); got[len(got)-1] != "ya29.refreshed-1" {
		t.Errorf("Dovecot last introspected %q, want the refreshed token", got[len(got)-1])
	}
	// The same through a config line, oauth2=FILE, whose relative paths
	// are the config file's, XOAUTH2 chosen there.
	conf := filepath.Join(tmp, "oauth2.conf")
	os.WriteFile(conf, []byte(fmt.Sprintf("# test IdP\ntoken-url = %s/token\nclient-id = envelopd-test\n"+
		"client-secret-file = client.secret\nrefresh-token-file = refresh.token\nmechanism = xoauth2\n", srv.URL)), 0o600)
	pollConf := filepath.Join(tmp, "poll.conf")
	os.WriteFile(pollConf, []byte(fmt.Sprintf("%s oauth2=%s\n", url, conf)), 0o600)
	if s := poll(0, "--config", pollConf); s.Stored != n || s.Error != "" {
		t.Fatalf("config line oauth2=: %+v, want %d stored", s, n)
	}
	if got := idp.seen(); got[len(got)-1] != "ya29.refreshed-2" || mech("XOAUTH2") != 2 {
		t.Errorf("config line: Dovecot last introspected %q (%d XOAUTH2 logins), want ya29.refreshed-2 over XOAUTH2", got[len(got)-1], mech("XOAUTH2"))
	}

	// 4. A token the provider does not know: Dovecot refuses, permanent.
	s := poll(2, "--token-command", "echo ya29.revoked")
	if s.Stored != 0 || !strings.Contains(s.Error, "login rejected") {
		t.Errorf("revoked token: %+v, want a login rejection", s)
	}
	// 5. A failing token command: a clear error, nothing stored.
	s = poll(2, "--token-command", "echo 'oama: no such account' >&2; exit 4")
	if s.Stored != 0 || !strings.Contains(s.Error, "token command failed: exit status 4: oama: no such account") {
		t.Errorf("failing command: %+v", s)
	}
	// 6. A refresh token the provider revoked: permanent, says so.
	os.WriteFile(refresh, []byte("1//revoked\n"), 0o600)
	s = poll(2, "--oauth2-token-url", srv.URL+"/token", "--oauth2-client-id", "envelopd-test",
		"--oauth2-client-secret-file", secret, "--oauth2-refresh-token-file", refresh)
	if !strings.Contains(s.Error, "refresh token rejected: invalid_grant") {
		t.Errorf("revoked refresh token: %+v", s)
	}
}
