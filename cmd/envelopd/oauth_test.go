package main

import (
	"context"
	"io"
	"log"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/envelopd/envelopd/internal/oauth"
)

// TestPollAccountsOAuth: which accounts log in with a token, which with a
// password, and the contradictions refused.
func TestPollAccountsOAuth(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pw := write("pw", "secret\n")
	linePw := write("line.pw", "line-secret\n")
	oconf := write("gmail.oauth2", "token-command = printf ya29.from-config\nmechanism = xoauth2\n")
	config := write("poll.conf", "imaps://a%40x.test@imap.x.test/INBOX password-file="+linePw+"\n"+
		"imaps://b%40x.test@imap.x.test/INBOX oauth2="+oconf+"\n"+
		"imaps://c%40x.test@imap.x.test/INBOX\n")
	const url = "imaps://agent%40gmail.com@imap.gmail.com/INBOX"
	cmd := oauthFlags{s: oauth.Settings{TokenCommand: "printf ya29.from-flag"}}

	accts, err := pollAccounts([]string{url}, config, "", "", "", &cmd)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ password, token, mech string }{
		{"", "ya29.from-flag", ""},          // --imap with --token-command
		{"line-secret", "", ""},             // the line's own password file wins
		{"", "ya29.from-config", "xoauth2"}, // oauth2=FILE
		{"", "ya29.from-flag", ""},          // a bare line takes the flags
	}
	if len(accts) != len(want) {
		t.Fatalf("%d accounts, want %d", len(accts), len(want))
	}
	for i, w := range want {
		a := accts[i]
		tok := ""
		if a.Tokens != nil {
			if tok, err = a.Tokens.Token(context.Background()); err != nil {
				t.Fatalf("%s: %v", a.Account, err)
			}
		}
		if a.Account.Password != w.password || tok != w.token || a.Mechanism != w.mech {
			t.Errorf("%s: password %q, token %q, mechanism %q; want %+v", a.Account, a.Account.Password, tok, a.Mechanism, w)
		}
	}

	for _, tc := range []struct {
		name   string
		pwFile string
		flags  oauthFlags
		msg    string
	}{
		{"password and token", pw, cmd, "--imap-password-file and an OAuth2 token"},
		{"client id alone", "", oauthFlags{s: oauth.Settings{ClientID: "c"}}, "give a token command or a refresh token file"},
		{"refresh without client", "", oauthFlags{s: oauth.Settings{RefreshTokenFile: pw, Provider: "gmail"}}, "needs a client id"},
		{"bad mechanism", "", oauthFlags{s: oauth.Settings{TokenCommand: "x", Mechanism: "plain"}}, `"plain"`},
		{"missing config", "", oauthFlags{config: filepath.Join(dir, "nope")}, "no such file"},
	} {
		_, err := pollAccounts([]string{url}, "", tc.pwFile, "", "", &tc.flags)
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.msg)
		}
	}
}

// TestNewSubmitterOAuth: --smtp-token-command / --smtp-oauth2-config make
// a token submitter; with --password-file too it is refused.
func TestNewSubmitterOAuth(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "o365.oauth2")
	os.WriteFile(conf, []byte("provider = outlook\nclient-id = 00000000-aaaa\nrefresh-token-file = o365.refresh\n"), 0o600)
	pw := filepath.Join(dir, "pw")
	os.WriteFile(pw, []byte("pw\n"), 0o600)
	const url = "smtp://agent%40contoso.test@smtp.office365.com:587"
	if s, err := newSubmitter(url, "", &oauthFlags{config: conf}); err != nil || s.Username != "agent@contoso.test" {
		t.Errorf("config: %v, %v", s, err)
	}
	if _, err := newSubmitter(url, pw, &oauthFlags{s: oauth.Settings{TokenCommand: "x"}}); err == nil || !strings.Contains(err.Error(), "not both") {
		t.Errorf("password and token: %v", err)
	}
	if _, err := newSubmitter("smtp://smtp.office365.com", "", &oauthFlags{s: oauth.Settings{TokenCommand: "x"}}); err == nil || !strings.Contains(err.Error(), "needs the user") {
		t.Errorf("no user: %v", err)
	}
	if s, err := newSubmitter(url, pw, &oauthFlags{}); err != nil || s.Username != "agent@contoso.test" {
		t.Errorf("password: %v, %v", s, err)
	}
}

// xoauth2Capture is an Office 365-like submission server on loopback: AUTH
// XOAUTH2 only, one valid token for one user; it counts what it accepts.
type xoauth2Capture struct {
	mu     sync.Mutex
	tokens []string // tokens presented
	msgs   int
	addr   string
}

type xoauth2Session struct {
	c     *xoauth2Capture
	authd bool
}

func (s *xoauth2Session) AuthMechanisms() []string { return []string{"XOAUTH2"} }
func (s *xoauth2Session) Auth(string) (sasl.Server, error) {
	failed := false
	return saslServerFunc(func(resp []byte) ([]byte, bool, error) {
		if failed {
			return nil, true, smtp.ErrAuthFailed
		}
		rest, _ := strings.CutPrefix(string(resp), "user=agent@contoso.test\x01auth=Bearer ")
		tok, ok := strings.CutSuffix(rest, "\x01\x01")
		s.c.mu.Lock()
		s.c.tokens = append(s.c.tokens, tok)
		s.c.mu.Unlock()
		if ok && tok == "EwBIA8l6-valid" {
			s.authd = true
			return nil, true, nil
		}
		failed = true
		return []byte(`{"status":"401","schemes":"bearer"}`), false, nil
	}), nil
}
func (s *xoauth2Session) Mail(string, *smtp.MailOptions) error {
	if !s.authd {
		return smtp.ErrAuthRequired
	}
	return nil
}
func (s *xoauth2Session) Rcpt(string, *smtp.RcptOptions) error { return nil }
func (s *xoauth2Session) Data(r io.Reader) error {
	io.Copy(io.Discard, r)
	s.c.mu.Lock()
	s.c.msgs++
	s.c.mu.Unlock()
	return nil
}
func (s *xoauth2Session) Reset()        {}
func (s *xoauth2Session) Logout() error { return nil }

type saslServerFunc func([]byte) ([]byte, bool, error)

func (f saslServerFunc) Next(r []byte) ([]byte, bool, error) { return f(r) }

// TestSendSmtpTokenCommand: `send --smtp-token-command` submits with AUTH
// XOAUTH2 and the command's token; a token the server refuses fails the
// recipient (exit 1), and the token shows nowhere in the output.
func TestSendSmtpTokenCommand(t *testing.T) {
	c := &xoauth2Capture{}
	srv := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return &xoauth2Session{c: c}, nil }))
	srv.Domain, srv.AllowInsecureAuth = "smtp.lab.test", true
	srv.ReadTimeout, srv.WriteTimeout, srv.MaxMessageBytes = 10*time.Second, 10*time.Second, 1<<20
	srv.ErrorLog = log.New(io.Discard, "", 0)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	dir := t.TempDir()
	url := "smtp://agent%40contoso.test@" + l.Addr().String()
	send := func(token string) (int, string) {
		// A database per send: the same ORDER twice in one would be refused.
		code, out, errs := runCmd(t, "", "send", "--db", filepath.Join(dir, token+".db"), "--smtp-url", url,
			"--smtp-token-command", "printf '%s\\n' "+token, "--format", "json",
			"--from", "agent@contoso.test", "--to", "worker@example.test", "--type", "ORDER", "--json", cliData+"order.json")
		if strings.Contains(out+errs, token) {
			t.Errorf("output holds the token:\n%s\n%s", out, errs)
		}
		return code, out
	}
	if code, out := send("EwBIA8l6-valid"); code != 0 || !strings.Contains(out, `"status":"sent"`) {
		t.Fatalf("send with a valid token: exit %d, %s", code, out)
	}
	if code, out := send("EwBIA8l6-expired"); code != 1 || !strings.Contains(out, `"status":"failed"`) || !strings.Contains(out, "535") {
		t.Fatalf("send with a refused token: exit %d, %s", code, out)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.msgs != 1 || strings.Join(c.tokens, ",") != "EwBIA8l6-valid,EwBIA8l6-expired" {
		t.Errorf("server accepted %d messages, saw tokens %q", c.msgs, c.tokens)
	}
}
