package oauth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tt := range []struct {
		name, cmd string
		timeout   time.Duration
		tok       string
		err       error
		msg       []string // in the error text
	}{
		{name: "trimmed", cmd: `printf '  ya29.tok-1_~+/==\n\n'`, tok: "ya29.tok-1_~+/=="},
		{name: "exit", cmd: `echo 'refresh failed: no network' >&2; echo half-token; exit 3`, err: ErrTokenCommand,
			msg: []string{"exit status 3", "refresh failed: no network"}},
		{name: "empty", cmd: `true`, err: ErrTokenCommand, msg: []string{"empty output"}},
		{name: "two-lines", cmd: `printf 'tok1\ntok2\n'`, err: ErrTokenCommand, msg: []string{"not a bearer token"}},
		{name: "blank-inside", cmd: `echo 'Bearer tok'`, err: ErrTokenCommand, msg: []string{"not a bearer token"}},
		{name: "sasl-separator", cmd: `printf 'tok\001x'`, err: ErrTokenCommand, msg: []string{"not a bearer token"}},
		{name: "too-long", cmd: fmt.Sprintf(`head -c %d /dev/zero | tr '\0' a`, MaxCommandOutput+1), err: ErrTokenCommand,
			msg: []string{"longer than 65536 bytes"}},
		{name: "timeout", cmd: `sleep 10`, timeout: 100 * time.Millisecond, err: ErrTokenCommand, msg: []string{"no token within 100ms"}},
		{name: "missing", cmd: filepath.Join(dir, "no-such-helper"), err: ErrTokenCommand, msg: []string{"exit status 127", "not found"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tok, err := (&Command{Cmd: tt.cmd, Timeout: tt.timeout}).Token(context.Background())
			if tok != tt.tok || !errors.Is(err, tt.err) || (err == nil) != (tt.err == nil) {
				t.Fatalf("Token = %q, %v; want %q, %v", tok, err, tt.tok, tt.err)
			}
			for _, m := range tt.msg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not say %q", err, m)
				}
			}
			if err != nil && strings.Contains(err.Error(), "half-token") {
				t.Errorf("error %q quotes the command's standard output", err)
			}
		})
	}
}

// TestCommandEachCall: the command runs again on every Token call (every
// (re)connect), so a helper that refreshes on its own is always asked.
func TestCommandEachCall(t *testing.T) {
	t.Parallel()
	n := filepath.Join(t.TempDir(), "n")
	c := &Command{Cmd: fmt.Sprintf(`echo x >> %s; printf tok%%s "$(wc -l < %s | tr -d ' ')"`, n, n)}
	for i := 1; i <= 3; i++ {
		tok, err := c.Token(context.Background())
		if err != nil || tok != fmt.Sprintf("tok%d", i) {
			t.Fatalf("call %d: %q, %v", i, tok, err)
		}
	}
}

// tokenEndpoint is an RFC 6749 §6 token endpoint: it checks the client and
// the refresh token, hands out numbered access tokens and, when rotate is
// set, a new refresh token each time.
type tokenEndpoint struct {
	mu        sync.Mutex
	refresh   string // the refresh token it accepts
	rotate    bool
	expiresIn int
	calls     int
	fail      int    // HTTP status to fail with (0: none)
	errCode   string // OAuth error code to fail with
}

func (e *tokenEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls++
	w.Header().Set("Content-Type", "application/json")
	if e.fail != 0 {
		w.WriteHeader(e.fail)
		if e.errCode != "" {
			fmt.Fprintf(w, `{"error":%q,"error_description":"Token has been expired or revoked."}`, e.errCode)
		}
		return
	}
	if err := r.ParseForm(); err != nil || r.Method != http.MethodPost {
		http.Error(w, "bad request", 400)
		return
	}
	id, secret, ok := r.BasicAuth()
	if !ok {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	if r.PostForm.Get("grant_type") != "refresh_token" || id != "client-1" || secret != "s3cret" ||
		r.PostForm.Get("refresh_token") != e.refresh {
		w.WriteHeader(400)
		fmt.Fprint(w, `{"error":"invalid_grant"}`)
		return
	}
	resp := fmt.Sprintf(`{"access_token":"at-%d","token_type":"Bearer","expires_in":%d`, e.calls, e.expiresIn)
	if e.rotate {
		e.refresh = fmt.Sprintf("rt-%d", e.calls+1)
		resp += fmt.Sprintf(`,"refresh_token":%q`, e.refresh)
	}
	fmt.Fprint(w, resp+"}")
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRefresh(t *testing.T) {
	t.Parallel()
	ep := &tokenEndpoint{refresh: "rt-1", expiresIn: 3600}
	srv := httptest.NewServer(ep)
	defer srv.Close()
	dir := t.TempDir()
	s := Settings{TokenURL: srv.URL + "/token", ClientID: "client-1",
		ClientSecretFile: writeFile(t, dir, "secret", "s3cret\n"), RefreshTokenFile: writeFile(t, dir, "refresh", "rt-1\n")}
	ts, err := s.Source()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// A valid access token is reused: one request for two calls.
	for i := 0; i < 2; i++ {
		if tok, err := ts.Token(ctx); err != nil || tok != "at-1" {
			t.Fatalf("call %d: %q, %v", i, tok, err)
		}
	}
	if ep.calls != 1 {
		t.Errorf("%d token requests, want 1", ep.calls)
	}
}

// TestRefreshRotation: an access token about to expire is refreshed, and a
// rotated refresh token replaces the file's content (mode 0600), so the
// next start uses it.
func TestRefreshRotation(t *testing.T) {
	t.Parallel()
	ep := &tokenEndpoint{refresh: "rt-1", rotate: true, expiresIn: 1} // within oauth2's 10 s expiry delta
	srv := httptest.NewServer(ep)
	defer srv.Close()
	dir := t.TempDir()
	rtFile := writeFile(t, dir, "refresh", "rt-1\n")
	s := Settings{TokenURL: srv.URL, ClientID: "client-1", ClientSecretFile: writeFile(t, dir, "secret", "s3cret"), RefreshTokenFile: rtFile}
	ts, err := s.Source()
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		tok, err := ts.Token(context.Background())
		if err != nil || tok != fmt.Sprintf("at-%d", i) {
			t.Fatalf("call %d: %q, %v", i, tok, err)
		}
		b, _ := os.ReadFile(rtFile)
		if want := fmt.Sprintf("rt-%d\n", i+1); string(b) != want {
			t.Errorf("call %d: refresh file holds %q, want %q", i, b, want)
		}
	}
	if fi, err := os.Stat(rtFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("refresh file mode %v, %v; want 0600", fi.Mode(), err)
	}
	// A fresh source (a restart) reads the rotated token.
	ts2, _ := s.Source()
	if tok, err := ts2.Token(context.Background()); err != nil || tok != "at-4" {
		t.Fatalf("after restart: %q, %v", tok, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("%d files in the directory, want 2 (no temporary file left)", len(ents))
	}
}

func TestRefreshErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	secret := writeFile(t, dir, "secret", "s3cret")
	for _, tt := range []struct {
		name      string
		ep        *tokenEndpoint
		rtFile    string
		err       error
		permanent bool
		msg       string
	}{
		{"revoked", &tokenEndpoint{fail: 400, errCode: "invalid_grant"}, "rt", ErrTokenRejected, true, "invalid_grant: Token has been expired or revoked."},
		{"wrong-refresh-token", &tokenEndpoint{refresh: "other"}, "rt", ErrTokenRejected, true, "invalid_grant"},
		{"server-error", &tokenEndpoint{fail: 503}, "rt", ErrTokenRefresh, false, "503"},
		{"no-file", &tokenEndpoint{refresh: "rt"}, "", ErrTokenFile, true, "no such file"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(tt.ep)
			defer srv.Close()
			rtFile := filepath.Join(dir, tt.name+".missing")
			if tt.rtFile != "" {
				rtFile = writeFile(t, dir, tt.name, tt.rtFile+"\n")
			}
			ts, err := Settings{TokenURL: srv.URL, ClientID: "client-1", ClientSecretFile: secret, RefreshTokenFile: rtFile}.Source()
			if err != nil {
				t.Fatal(err)
			}
			_, err = ts.Token(context.Background())
			if !errors.Is(err, tt.err) || Permanent(err) != tt.permanent || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("err = %v (permanent %v); want %v (permanent %v) saying %q", err, Permanent(err), tt.err, tt.permanent, tt.msg)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error %q holds the client secret", err)
			}
		})
	}
}

func TestSettings(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	secret := writeFile(t, dir, "secret", "s3cret")
	conf := writeFile(t, dir, "gmail.conf", `# Gmail
provider = gmail
client-id = 1234.apps.googleusercontent.com
client-secret-file = secret
refresh-token-file = /var/lib/envelopd/gmail.refresh
mechanism = xoauth2
`)
	s, err := LoadConfig(conf)
	if err != nil {
		t.Fatal(err)
	}
	want := Settings{Provider: "gmail", ClientID: "1234.apps.googleusercontent.com", ClientSecretFile: secret,
		RefreshTokenFile: "/var/lib/envelopd/gmail.refresh", Mechanism: "xoauth2"}
	if fmt.Sprint(s) != fmt.Sprint(want) {
		t.Errorf("LoadConfig =\n %+v\nwant\n %+v", s, want)
	}
	ts, err := s.Source()
	if err != nil {
		t.Fatal(err)
	}
	r := ts.(*Refresh)
	if r.TokenURL != "https://oauth2.googleapis.com/token" || strings.Join(r.Scopes, " ") != "https://mail.google.com/" || r.ClientSecret != "s3cret" {
		t.Errorf("gmail preset: %q %q", r.TokenURL, r.Scopes)
	}
	o, _ := Settings{Provider: "Outlook", ClientID: "c", RefreshTokenFile: "f"}.Source()
	if r := o.(*Refresh); r.TokenURL != "https://login.microsoftonline.com/common/oauth2/v2.0/token" ||
		strings.Join(r.Scopes, " ") != "https://outlook.office.com/IMAP.AccessAsUser.All https://outlook.office.com/SMTP.Send offline_access" {
		t.Errorf("outlook preset: %q %q", r.TokenURL, r.Scopes)
	}
	if c, err := (Settings{TokenCommand: "oama access a@b"}).Source(); err != nil || c.(*Command).Cmd != "oama access a@b" {
		t.Errorf("token command: %v, %v", c, err)
	}

	for _, tt := range []struct {
		name string
		s    Settings
		msg  string
	}{
		{"nothing", Settings{}, "give a token command or a refresh token file"},
		{"both", Settings{TokenCommand: "x", RefreshTokenFile: "f"}, "not both"},
		{"command-with-client", Settings{TokenCommand: "x", ClientID: "c"}, "not a token command"},
		{"no-url", Settings{RefreshTokenFile: "f", ClientID: "c"}, "needs a token URL"},
		{"no-client", Settings{RefreshTokenFile: "f", TokenURL: "https://t"}, "needs a client id"},
		{"plain-http", Settings{RefreshTokenFile: "f", ClientID: "c", TokenURL: "http://idp.example/token"}, "want https://"},
		{"provider", Settings{RefreshTokenFile: "f", ClientID: "c", Provider: "yahoo"}, `provider "yahoo"`},
		{"mechanism", Settings{TokenCommand: "x", Mechanism: "plain"}, `"plain"`},
		{"secret-missing", Settings{RefreshTokenFile: "f", ClientID: "c", Provider: "gmail", ClientSecretFile: filepath.Join(dir, "nope")}, "no such file"},
	} {
		if _, err := tt.s.Source(); err == nil || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.msg)
		}
	}
	for name, content := range map[string]string{
		"unknown": "password = x\n", "twice": "client-id = a\nclient-id = b\n", "no-value": "client-id =\n", "no-equals": "client-id\n",
	} {
		if _, err := LoadConfig(writeFile(t, dir, name, content)); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: err = %v, want ErrConfig", name, err)
		}
	}
	// Scopes may repeat or be blank-separated.
	if s, err := LoadConfig(writeFile(t, dir, "scopes", "scope = a b\nscope = c\n")); err != nil || strings.Join(s.Scopes, ",") != "a,b,c" {
		t.Errorf("scopes: %q, %v", s.Scopes, err)
	}
}

// TestRefreshRotationUnsaved: a rotated refresh token that cannot be saved
// still gives the access token, is reported, and is saved once it can be.
func TestRefreshRotationUnsaved(t *testing.T) {
	t.Parallel()
	ep := &tokenEndpoint{refresh: "rt-1", expiresIn: 1}
	srv := httptest.NewServer(ep)
	defer srv.Close()
	dir := filepath.Join(t.TempDir(), "state")
	os.Mkdir(dir, 0o700)
	rtFile := writeFile(t, dir, "refresh", "rt-1\n")
	var logBuf strings.Builder
	r := &Refresh{TokenURL: srv.URL, ClientID: "client-1", ClientSecret: "s3cret", RefreshTokenFile: rtFile,
		Logger: slog.New(slog.NewTextHandler(&logBuf, nil))}
	if tok, err := r.Token(context.Background()); err != nil || tok != "at-1" {
		t.Fatalf("Token = %q, %v", tok, err)
	}
	// The directory goes away (even root cannot write there now), and the
	// provider starts rotating.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	ep.mu.Lock()
	ep.rotate = true
	ep.mu.Unlock()
	if tok, err := r.Token(context.Background()); err != nil || tok != "at-2" {
		t.Fatalf("Token = %q, %v", tok, err)
	}
	if !strings.Contains(logBuf.String(), "could not be saved") || strings.Contains(logBuf.String(), "rt-3") {
		t.Errorf("log %q", logBuf.String())
	}
	os.Mkdir(dir, 0o700)
	if tok, err := r.Token(context.Background()); err != nil || tok != "at-3" {
		t.Fatalf("Token = %q, %v", tok, err)
	}
	if b, _ := os.ReadFile(rtFile); string(b) != "rt-4\n" {
		t.Errorf("refresh file %q, want rt-4", b)
	}
}
