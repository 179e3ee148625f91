package oauth

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/envelopd/envelopd/internal/conflines"
)

// ErrConfig: OAuth2 settings are incomplete or contradictory, or a line of
// an OAuth2 config file is malformed.
var ErrConfig = errors.New("oauth: bad OAuth2 settings")

// Provider presets: the token endpoint and scopes of the two providers
// most agent mailboxes are at. Their IMAP and SMTP hosts are in the
// README ("Polling a provider mailbox").
var Providers = map[string]struct {
	TokenURL string
	Scopes   []string
}{
	// https://developers.google.com/identity/protocols/oauth2/web-server;
	// the scope for IMAP, POP and SMTP is https://mail.google.com/.
	"gmail": {"https://oauth2.googleapis.com/token", []string{"https://mail.google.com/"}},
	// https://learn.microsoft.com/exchange/client-developer/legacy-protocols/how-to-authenticate-an-imap-pop-smtp-application-by-using-oauth
	"outlook": {"https://login.microsoftonline.com/common/oauth2/v2.0/token", []string{
		"https://outlook.office.com/IMAP.AccessAsUser.All", "https://outlook.office.com/SMTP.Send", "offline_access"}},
}

// Settings say where an account's access token comes from: a command, or a
// refresh token file with the client and the token endpoint. The zero
// value means "no OAuth2" (password authentication).
type Settings struct {
	TokenCommand     string   // token-command
	Provider         string   // provider: gmail or outlook (token URL and scopes)
	TokenURL         string   // token-url
	ClientID         string   // client-id
	ClientSecretFile string   // client-secret-file
	RefreshTokenFile string   // refresh-token-file
	Scopes           []string // scope (repeatable, or blank-separated)
	Mechanism        string   // mechanism: auto, xoauth2, oauthbearer
}

// Enabled reports whether any token setting is given.
func (s Settings) Enabled() bool {
	return s.TokenCommand != "" || s.RefreshTokenFile != ""
}

// Empty reports whether no setting at all is given.
func (s Settings) Empty() bool {
	return s.TokenCommand == "" && s.Provider == "" && s.TokenURL == "" && s.ClientID == "" &&
		s.ClientSecretFile == "" && s.RefreshTokenFile == "" && len(s.Scopes) == 0 && s.Mechanism == ""
}

// Source checks the settings and builds the token source, reading the
// client secret file now. Exactly one of TokenCommand and RefreshTokenFile
// must be set; a refresh token needs a client id and a token URL (given,
// or from Provider).
func (s Settings) Source() (TokenSource, error) {
	if _, err := ParseMechanism(s.Mechanism); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	switch {
	case s.TokenCommand != "" && s.RefreshTokenFile != "":
		return nil, fmt.Errorf("%w: give a token command or a refresh token file, not both", ErrConfig)
	case s.TokenCommand != "":
		if s.TokenURL != "" || s.ClientID != "" || s.ClientSecretFile != "" || s.Provider != "" || len(s.Scopes) > 0 {
			return nil, fmt.Errorf("%w: provider, token URL, client id, secret and scopes go with a refresh token file, not a token command", ErrConfig)
		}
		return &Command{Cmd: s.TokenCommand}, nil
	case s.RefreshTokenFile == "":
		return nil, fmt.Errorf("%w: give a token command or a refresh token file", ErrConfig)
	}
	r := &Refresh{TokenURL: s.TokenURL, ClientID: s.ClientID, Scopes: s.Scopes, RefreshTokenFile: s.RefreshTokenFile}
	if s.Provider != "" {
		p, ok := Providers[strings.ToLower(s.Provider)]
		if !ok {
			return nil, fmt.Errorf("%w: provider %q (want gmail or outlook)", ErrConfig, s.Provider)
		}
		if r.TokenURL == "" {
			r.TokenURL = p.TokenURL
		}
		if len(r.Scopes) == 0 {
			r.Scopes = p.Scopes
		}
	}
	if r.TokenURL == "" {
		return nil, fmt.Errorf("%w: a refresh token needs a token URL (or a provider)", ErrConfig)
	}
	if !strings.HasPrefix(r.TokenURL, "https://") && !isLoopbackHTTP(r.TokenURL) {
		return nil, fmt.Errorf("%w: token URL %q: want https:// (plain http only to loopback)", ErrConfig, r.TokenURL)
	}
	if r.ClientID == "" {
		return nil, fmt.Errorf("%w: a refresh token needs a client id", ErrConfig)
	}
	if s.ClientSecretFile != "" {
		sec, err := ReadSecretFile(s.ClientSecretFile)
		if err != nil {
			return nil, err
		}
		r.ClientSecret = sec
	}
	return r, nil
}

func isLoopbackHTTP(u string) bool {
	rest, ok := strings.CutPrefix(u, "http://")
	if !ok {
		return false
	}
	host, _, _ := strings.Cut(rest, "/")
	for _, p := range []string{"127.0.0.1", "localhost", "[::1]"} {
		if host == p || strings.HasPrefix(host, p+":") {
			return true
		}
	}
	return false
}

// Or returns s with every unset field taken from def.
func (s Settings) Or(def Settings) Settings {
	pick := func(a, b string) string {
		if a != "" {
			return a
		}
		return b
	}
	out := Settings{
		TokenCommand: pick(s.TokenCommand, def.TokenCommand), Provider: pick(s.Provider, def.Provider),
		TokenURL: pick(s.TokenURL, def.TokenURL), ClientID: pick(s.ClientID, def.ClientID),
		ClientSecretFile: pick(s.ClientSecretFile, def.ClientSecretFile),
		RefreshTokenFile: pick(s.RefreshTokenFile, def.RefreshTokenFile),
		Scopes:           s.Scopes, Mechanism: pick(s.Mechanism, def.Mechanism),
	}
	if len(out.Scopes) == 0 {
		out.Scopes = def.Scopes
	}
	return out
}

// LoadConfig reads an OAuth2 config file: one "key = value" a line, blank
// lines and # comments ignored; keys as the Settings fields' comments say.
// Relative file paths are taken relative to the config file's directory.
//
//	# Gmail, refresh token
//	provider = gmail
//	client-id = 1234-abc.apps.googleusercontent.com
//	client-secret-file = gmail.secret
//	refresh-token-file = gmail.refresh
//
//	# any provider, through a helper such as oama
//	token-command = oama access agent@gmail.com
func LoadConfig(path string) (Settings, error) {
	f, err := os.Open(path)
	if err != nil {
		return Settings{}, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	defer f.Close()
	// Its token-command is run: a file others may write is refused, as
	// OpenSSH refuses a writable config (StrictModes).
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o022 != 0 {
		return Settings{}, fmt.Errorf("%w: %s: permissions %04o: writable by group or others, and its token-command is run (chmod go-w %s)",
			ErrConfig, path, fi.Mode().Perm(), path)
	}
	return ParseConfig(f, path)
}

// ParseConfig reads an OAuth2 config (LoadConfig's format) from r; name is
// its path, for relative file paths and error messages.
func ParseConfig(r io.Reader, name string) (Settings, error) {
	var s Settings
	path := name
	dir := filepath.Dir(path)
	rel := func(p string) string {
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	seen := map[string]int{}
	sc := conflines.New(r)
	for sc.Scan() {
		n, line := sc.Line()
		k, v, ok := strings.Cut(line, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" || v == "" {
			return s, fmt.Errorf("%w: %s:%d: want key = value", ErrConfig, path, n)
		}
		if prev, dup := seen[k]; dup && k != "scope" {
			return s, fmt.Errorf("%w: %s:%d: %s already set on line %d", ErrConfig, path, n, k, prev)
		}
		seen[k] = n
		switch k {
		case "token-command":
			s.TokenCommand = v
		case "provider":
			s.Provider = v
		case "token-url":
			s.TokenURL = v
		case "client-id":
			s.ClientID = v
		case "client-secret-file":
			s.ClientSecretFile = rel(v)
		case "refresh-token-file":
			s.RefreshTokenFile = rel(v)
		case "scope":
			s.Scopes = append(s.Scopes, strings.Fields(v)...)
		case "mechanism":
			s.Mechanism = v
		default:
			return s, fmt.Errorf("%w: %s:%d: unknown key %q (want token-command, provider, token-url, client-id, client-secret-file, refresh-token-file, scope, mechanism)", ErrConfig, path, n, k)
		}
	}
	if err := sc.Err(); err != nil {
		return s, fmt.Errorf("%w: %s: %v", ErrConfig, path, err)
	}
	return s, nil
}
