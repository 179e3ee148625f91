package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
