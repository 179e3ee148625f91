package mailin

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"
	"github.com/emersion/go-sasl"

	"github.com/envelopd/envelopd/internal/oauth"
)

// oauthIMAP makes go-imap's in-memory server take OAuth2: it offers mechs
// (AUTH=…) and logs the test user in for the one valid token.
type oauthIMAP struct {
	mechs []string
	valid string
	mu    sync.Mutex
	used  []string // mechanisms of successful logins
}

func (o *oauthIMAP) wrap(opts *imapserver.Options) {
	inner := opts.NewSession
	opts.NewSession = func(c *imapserver.Conn) (imapserver.Session, *imapserver.GreetingData, error) {
		s, g, err := inner(c)
		return &oauthSession{Session: s, srv: o}, g, err
	}
}

type oauthSession struct {
	imapserver.Session
	srv *oauthIMAP
}

func (s *oauthSession) AuthenticateMechanisms() []string { return s.srv.mechs }

func (s *oauthSession) Authenticate(mech string) (sasl.Server, error) {
	login := func(user, token string) bool {
		if user != testIMAPUser || token != s.srv.valid || s.Session.Login(testIMAPUser, testIMAPPass) != nil {
			return false
		}
		s.srv.mu.Lock()
		s.srv.used = append(s.srv.used, mech)
		s.srv.mu.Unlock()
		return true
	}
	switch mech {
	case sasl.OAuthBearer:
		return sasl.NewOAuthBearerServer(func(o sasl.OAuthBearerOptions) *sasl.OAuthBearerError {
			if o.Host == "127.0.0.1" && o.Port != 0 && login(o.Username, o.Token) {
				return nil
			}
			return &sasl.OAuthBearerError{Status: "invalid_token", Schemes: "bearer"}
		}), nil
	case oauth.XOAUTH2:
		return &imapXOAUTH2{check: login}, nil
	}
	return nil, &imap.Error{Type: imap.StatusResponseTypeNo, Text: "SASL mechanism not supported"}
}

// imapXOAUTH2 is the server side of XOAUTH2 for the test.
type imapXOAUTH2 struct {
	check  func(user, token string) bool
	failed bool
}

func (x *imapXOAUTH2) Next(resp []byte) ([]byte, bool, error) {
	if x.failed {
		return nil, true, &imap.Error{Type: imap.StatusResponseTypeNo, Code: imap.ResponseCodeAuthenticationFailed, Text: "invalid credentials"}
	}
	if resp == nil {
		return []byte{}, false, nil
	}
	rest, _ := strings.CutPrefix(string(resp), "user=")
	user, rest, _ := strings.Cut(rest, "\x01auth=Bearer ")
	token, _ := strings.CutSuffix(rest, "\x01\x01")
	if x.check(user, token) {
		return nil, true, nil
	}
	x.failed = true
	return []byte(`{"status":"400","schemes":"Bearer","scope":"https://mail.google.com/"}`), false, nil
}

// tokenList hands out one token per call (the last one repeats) or fails.
type tokenList struct {
	mu    sync.Mutex
	toks  []string
	err   error
	calls int
}

func (l *tokenList) Token(context.Context) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	if l.err != nil {
		return "", l.err
	}
	return l.toks[min(l.calls, len(l.toks))-1], nil
}

// TestPollOAuth: the poller logs in with a token asked for on every
// connect, with the mechanism the server offers (OAUTHBEARER first), and
// sorts failures into permanent (refused token, no mechanism) and
// transient (token source down).
func TestPollOAuth(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		mechs []string
		want  string // mechanism chosen
		force string
	}{
		{"gmail-auto", []string{"XOAUTH2", "OAUTHBEARER"}, "OAUTHBEARER", ""},
		{"outlook-auto", []string{"XOAUTH2"}, "XOAUTH2", ""},
		{"gmail-forced", []string{"XOAUTH2", "OAUTHBEARER"}, "XOAUTH2", "xoauth2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := &oauthIMAP{mechs: tc.mechs, valid: "ya29.good"}
			f := newPollFixture(t, capsBare)
			f.srv = newMemIMAP(t, capsBare, nil, srv.wrap)
			mails := corpus(t)
			for _, m := range mails {
				f.srv.append(t, "INBOX", m)
			}
			p := f.poller(t)
			p.Account.Password = ""
			tokens := &tokenList{toks: []string{"ya29.good", "ya29.good", "ya29.stale"}}
			p.Tokens, p.Mechanism = tokens, tc.force
			for run := 1; run <= 2; run++ {
				if _, err := p.Once(context.Background()); err != nil {
					t.Fatalf("run %d: %v", run, err)
				}
			}
			if got := f.stored(t); got != len(mails) {
				t.Errorf("stored %d, want %d", got, len(mails))
			}
			if got := strings.Join(srv.used, ","); got != tc.want+","+tc.want {
				t.Errorf("logins %q, want two with %s", got, tc.want)
			}
			// The third connect gets a token the server refuses.
			_, err := p.Once(context.Background())
			if !errors.Is(err, ErrIMAPLogin) || !Permanent(err) || strings.Contains(err.Error(), "ya29") {
				t.Fatalf("stale token: %v; want a permanent login error without the token", err)
			}
			if tc.want == "XOAUTH2" && !strings.Contains(err.Error(), "(status 400, scope https://mail.google.com/)") {
				t.Errorf("stale token: %v does not carry the server's status", err)
			}
			if tokens.calls != 3 {
				t.Errorf("token source asked %d times, want 3 (once per connect)", tokens.calls)
			}
		})
	}

	t.Run("errors", func(t *testing.T) {
		t.Parallel()
		srv := &oauthIMAP{mechs: []string{"XOAUTH2"}, valid: "ya29.good"}
		f := newPollFixture(t, capsBare)
		f.srv = newMemIMAP(t, capsBare, nil, srv.wrap)
		for _, tc := range []struct {
			name      string
			tokens    oauth.TokenSource
			mech      string
			sentinel  error
			permanent bool
		}{
			{"source-down", &tokenList{err: oauth.ErrTokenRefresh}, "", ErrIMAPConn, false},
			{"refresh-revoked", &tokenList{err: oauth.ErrTokenRejected}, "", ErrIMAPLogin, true},
			{"mechanism-not-offered", &tokenList{toks: []string{"ya29.good"}}, "oauthbearer", oauth.ErrMechanism, true},
		} {
			p := f.poller(t)
			p.Tokens, p.Mechanism = tc.tokens, tc.mech
			_, err := p.Once(context.Background())
			if !errors.Is(err, tc.sentinel) || Permanent(err) != tc.permanent {
				t.Errorf("%s: %v (permanent %v); want %v (permanent %v)", tc.name, err, Permanent(err), tc.sentinel, tc.permanent)
			}
		}
	})
}
