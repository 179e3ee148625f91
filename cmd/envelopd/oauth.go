package main

import (
	"errors"
	"flag"

	"github.com/envelopd/envelopd/internal/oauth"
	"github.com/envelopd/envelopd/mailout"
)

// oauthFlags say where an OAuth2 access token comes from: a
// command run on every connect, or a refresh token file with the client
// and the token endpoint, given as flags or in an --oauth2-config file
// (flags win). poll registers them bare for IMAP; the smarthost's have the
// prefix "smtp-".
type oauthFlags struct {
	prefix string
	config string
	scopes multiFlag
	s      oauth.Settings
}

func (o *oauthFlags) register(fs *flag.FlagSet, prefix, what string) {
	o.prefix = prefix
	fs.StringVar(&o.s.TokenCommand, prefix+"token-command", "", what+" OAuth2: shell command that prints an access token, run on each connect (e.g. oama access USER)")
	fs.StringVar(&o.config, prefix+"oauth2-config", "", what+" OAuth2 config `FILE`: key = value lines (token-command, provider, token-url, client-id, client-secret-file, refresh-token-file, scope, mechanism)")
	fs.StringVar(&o.s.RefreshTokenFile, prefix+"oauth2-refresh-token-file", "", what+" OAuth2: file holding the refresh token (rewritten when the provider rotates it)")
	fs.StringVar(&o.s.Provider, prefix+"oauth2-provider", "", what+" OAuth2: gmail or outlook (sets the token URL and scopes)")
	fs.StringVar(&o.s.TokenURL, prefix+"oauth2-token-url", "", what+" OAuth2: the provider's token endpoint")
	fs.StringVar(&o.s.ClientID, prefix+"oauth2-client-id", "", what+" OAuth2: client id the refresh token was issued to")
	fs.StringVar(&o.s.ClientSecretFile, prefix+"oauth2-client-secret-file", "", what+" OAuth2: file holding the client secret")
	fs.Var(&o.scopes, prefix+"oauth2-scope", what+" OAuth2: scope to ask for (repeatable; default: the provider's)")
	fs.StringVar(&o.s.Mechanism, prefix+"oauth2-mechanism", "", what+" OAuth2 SASL mechanism: auto (OAUTHBEARER if offered, else XOAUTH2), xoauth2 or oauthbearer")
}

// settings merges the flags over the --oauth2-config file.
func (o *oauthFlags) settings() (oauth.Settings, error) {
	if o == nil {
		return oauth.Settings{}, nil
	}
	s := o.s
	s.Scopes = append([]string(nil), o.scopes...)
	if o.config != "" {
		c, err := oauth.LoadConfig(o.config)
		if err != nil {
			return s, err
		}
		s = s.Or(c)
	}
	return s, nil
}

// newSubmitter builds the smarthost client: with an OAuth2 token when any
// --smtp-token-command / --smtp-oauth2-* flag is given, else with the
// password of pwFile (or $ENVELOPD_SMTP_PASSWORD).
func newSubmitter(url, pwFile string, of *oauthFlags) (*mailout.Submitter, error) {
	s, err := of.settings()
	if err != nil {
		return nil, err
	}
	if !s.Empty() {
		if pwFile != "" {
			return nil, errors.New("give the smarthost a password file or an OAuth2 token, not both")
		}
		ts, err := s.Source()
		if err != nil {
			return nil, err
		}
		return mailout.NewTokenSubmitter(url, ts, s.Mechanism)
	}
	pw, err := mailout.LoadPassword(pwFile, nil)
	if err != nil {
		return nil, err
	}
	return mailout.NewSubmitter(url, pw)
}
