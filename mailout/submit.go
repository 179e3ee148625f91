package mailout

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/envelopd/envelopd/internal/oauth"
	"github.com/envelopd/envelopd/internal/secretfile"
)

// PasswordEnv is the environment variable a submission password is read
// from when no password file is given.
const PasswordEnv = "ENVELOPD_SMTP_PASSWORD"

// Submitter delivers mail to one submission server (the agent's smarthost)
// with go-smtp's client: implicit TLS for smtps:// (RFC 8314 section 3.3),
// STARTTLS for smtp:// (RFC 3207; required unless the host is loopback),
// and AUTH PLAIN (RFC 4954, RFC 4616) when the URL names a user.
//
// The password is held unexported and never printed or logged.
type Submitter struct {
	Host        string // host name or IP, also the TLS server name
	Port        string
	ImplicitTLS bool   // smtps://
	Username    string // "" means no AUTH
	// TLSConfig, when set, is used for TLS (tests give their own roots).
	TLSConfig *tls.Config
	// LocalName is the EHLO name; "" means "localhost".
	LocalName string
	// Timeout bounds each SMTP command (default 2 min); DataTimeout the
	// wait for the reply after the final dot (default 10 min).
	Timeout     time.Duration
	DataTimeout time.Duration
	Logger      *slog.Logger

	password string
	// tokens, when set, replaces the password: AUTH OAUTHBEARER (RFC 7628
	// §4.2) or XOAUTH2 with a token asked for on every connection; mech
	// is oauth.Auto, oauth.XOAUTH2 or oauth.OAUTHBEARER.
	tokens oauth.TokenSource
	mech   string
	// dialContext replaces the TCP dialer (tests reach a "remote" name on
	// loopback through it).
	dialContext func(ctx context.Context, network, addr string) (net.Conn, error)
}

// NewSubmitter parses a smarthost URL, smtps://USER@HOST[:465] or
// smtp://USER@HOST[:587] (the user part is optional), and keeps password for
// AUTH PLAIN. A password inside the URL is refused: it would show in process
// listings and shell history.
func NewSubmitter(rawURL, password string) (*Submitter, error) {
	s, err := parseSubmitURL(rawURL)
	if err != nil {
		return nil, err
	}
	s.password = password
	if s.Username != "" && password == "" {
		return nil, fmt.Errorf("mailout: smtp url names user %q but no password was given (password file or %s)", s.Username, PasswordEnv)
	}
	return s, nil
}

// NewTokenSubmitter is NewSubmitter for providers that want OAuth2 (Gmail,
// Office 365): the URL must name the user, and AUTH uses a bearer token
// from tokens, asked for on every connection, with mech (oauth.Auto or
// "": OAUTHBEARER when offered, else XOAUTH2).
func NewTokenSubmitter(rawURL string, tokens oauth.TokenSource, mech string) (*Submitter, error) {
	s, err := parseSubmitURL(rawURL)
	if err != nil {
		return nil, err
	}
	if s.Username == "" {
		return nil, fmt.Errorf("mailout: smtp url %q: OAuth2 needs the user in the url (smtps://USER@HOST)", redactURL(rawURL))
	}
	if s.mech, err = oauth.ParseMechanism(mech); err != nil {
		return nil, fmt.Errorf("mailout: %w", err)
	}
	s.tokens = tokens
	return s, nil
}

func parseSubmitURL(rawURL string) (*Submitter, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("mailout: smtp url: %w", err)
	}
	s := &Submitter{Host: u.Hostname(), Port: u.Port()}
	switch u.Scheme {
	case "smtps":
		s.ImplicitTLS = true
		if s.Port == "" {
			s.Port = "465"
		}
	case "smtp":
		if s.Port == "" {
			s.Port = "587"
		}
	default:
		return nil, fmt.Errorf("mailout: smtp url %q: scheme must be smtps or smtp", redactURL(rawURL))
	}
	if s.Host == "" {
		return nil, fmt.Errorf("mailout: smtp url %q: no host", redactURL(rawURL))
	}
	if _, err := strconv.ParseUint(s.Port, 10, 16); err != nil {
		return nil, fmt.Errorf("mailout: smtp url %q: bad port", redactURL(rawURL))
	}
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" {
		return nil, fmt.Errorf("mailout: smtp url %q: unexpected path or query", redactURL(rawURL))
	}
	if u.User != nil {
		if _, set := u.User.Password(); set {
			return nil, fmt.Errorf("mailout: smtp url: put the password in a password file or %s, not in the url", PasswordEnv)
		}
		s.Username = u.User.Username()
	}
	return s, nil
}

// LoadPassword returns the submission password: the first line of file
// when file is not "", else the value of getenv(PasswordEnv) (getenv nil
// means os.Getenv). It returns "" without error when neither is set.
func LoadPassword(file string, getenv func(string) string) (string, error) {
	if file != "" {
		// A file the group or others can read is refused (secretfile).
		line, err := secretfile.FirstLine(file)
		if err != nil {
			return "", fmt.Errorf("mailout: password file: %w", err)
		}
		return line, nil
	}
	if getenv == nil {
		getenv = os.Getenv
	}
	return getenv(PasswordEnv), nil
}

// String is the URL without any secret.
func (s *Submitter) String() string {
	scheme := "smtp"
	if s.ImplicitTLS {
		scheme = "smtps"
	}
	user := ""
	if s.Username != "" {
		user = url.User(s.Username).String() + "@"
	}
	return scheme + "://" + user + net.JoinHostPort(s.Host, s.Port)
}

// LogValue keeps the password out of structured logs.
func (s *Submitter) LogValue() slog.Value { return slog.StringValue(s.String()) }

func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable)"
	}
	return u.Redacted()
}

// Loopback reports whether the host is a loopback address or "localhost",
// where plaintext submission is allowed.
func (s *Submitter) Loopback() bool {
	if strings.EqualFold(s.Host, "localhost") {
		return true
	}
	ip := net.ParseIP(s.Host)
	return ip != nil && ip.IsLoopback()
}

// RcptResult is the outcome for one recipient: Err is nil when the server
// accepted the message for it, else a *SendError.
type RcptResult struct {
	Rcpt string
	Err  error
}

// Submit sends raw from the envelope sender to rcpts in one SMTP
// transaction and returns one result per recipient, in order. A failure
// before RCPT (connection, TLS, AUTH, MAIL) or at DATA applies to every
// recipient concerned; a refused RCPT only to its recipient.
func (s *Submitter) Submit(ctx context.Context, from string, rcpts []string, raw []byte) []RcptResult {
	res := make([]RcptResult, len(rcpts))
	for i, r := range rcpts {
		res[i].Rcpt = r
	}
	all := func(err error) []RcptResult {
		for i := range res {
			if res[i].Err == nil {
				res[i].Err = err
			}
		}
		return res
	}
	if len(rcpts) == 0 {
		return res
	}
	c, err := s.dial(ctx)
	if err != nil {
		return all(err)
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	ctxErr := func(stage string, err error) error {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return classify(stage, err)
	}

	opts := &smtp.MailOptions{UTF8: !isASCII(from) || !allASCII(rcpts)}
	if err := c.Mail(from, opts); err != nil {
		return all(ctxErr("mail", err))
	}
	accepted := 0
	for i, r := range rcpts {
		if err := c.Rcpt(r, nil); err != nil {
			res[i].Err = ctxErr("rcpt", err)
			if !isSMTPReply(err) { // the connection is gone
				return all(res[i].Err)
			}
			continue
		}
		accepted++
	}
	if accepted == 0 {
		_ = c.Quit()
		return res
	}
	w, err := c.Data()
	if err != nil {
		return all(ctxErr("data", err))
	}
	if _, err := w.Write(raw); err != nil {
		return all(ctxErr("data", err))
	}
	if err := w.Close(); err != nil {
		return all(ctxErr("data", err))
	}
	_ = c.Quit()
	return res
}

// dial connects, says EHLO, upgrades to TLS as the URL demands and
// authenticates.
func (s *Submitter) dial(ctx context.Context) (*smtp.Client, error) {
	addr := net.JoinHostPort(s.Host, s.Port)
	tcfg := s.tlsConfig()
	dial := s.dialContext
	if dial == nil {
		dial = (&net.Dialer{Timeout: 30 * time.Second}).DialContext
	}
	conn, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil, classify("connect", err)
	}
	if s.ImplicitTLS {
		tc := tls.Client(conn, tcfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, classify("tls", err)
		}
		conn = tc
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	fail := func(stage string, err error) (*smtp.Client, error) {
		conn.Close()
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, classify(stage, err)
	}
	var c *smtp.Client
	if s.ImplicitTLS || s.Loopback() {
		c = smtp.NewClient(conn)
	} else {
		// RFC 3207: STARTTLS before anything else; a server that does not
		// offer it is refused (go-smtp says EHLO localhost before TLS).
		c, err = smtp.NewClientStartTLS(conn, tcfg)
		if err != nil {
			if !isSMTPReply(err) && ctx.Err() == nil && strings.Contains(err.Error(), "doesn't support STARTTLS") {
				err = &policyError{"server does not offer STARTTLS; refusing plaintext submission to a non-loopback host"}
			}
			return fail("starttls", err)
		}
	}
	c.CommandTimeout = orDefault(s.Timeout, 2*time.Minute)
	c.SubmissionTimeout = orDefault(s.DataTimeout, 10*time.Minute)
	name := s.LocalName
	if name == "" {
		name = "localhost"
	}
	if err := c.Hello(name); err != nil {
		return fail("connect", err)
	}
	if s.tokens != nil {
		if err := s.authToken(ctx, c); err != nil {
			return fail("auth", err)
		}
	} else if s.Username != "" {
		if ok, _ := c.Extension("AUTH"); !ok || !c.SupportsAuth("PLAIN") {
			return fail("auth", &policyError{"server does not offer AUTH PLAIN"})
		}
		if err := c.Auth(sasl.NewPlainClient("", s.Username, s.password)); err != nil {
			return fail("auth", err)
		}
	}
	return c, nil
}

// authToken authenticates with an OAuth2 bearer token: OAUTHBEARER (RFC
// 7628 §4.2) or XOAUTH2 (Gmail, Office 365), as chosen from what the
// server offers. A failing token source is a temporary error (the queue
// retries; the user fixes the command or refresh token meanwhile); the
// server's refusal is its SMTP reply (535: permanent), with the OAuth2
// status it sent. The token is never logged.
func (s *Submitter) authToken(ctx context.Context, c *smtp.Client) error {
	ok, _ := c.Extension("AUTH")
	mech, err := oauth.Choose(s.mech, func(m string) bool { return ok && c.SupportsAuth(m) })
	if err != nil {
		return &policyError{err.Error()}
	}
	tok, err := s.tokens.Token(ctx)
	if err != nil {
		return err
	}
	port, _ := strconv.Atoi(s.Port)
	sc, err := oauth.NewClient(mech, s.Username, tok, s.Host, port)
	if err != nil {
		return &policyError{err.Error()}
	}
	if err := c.Auth(sc); err != nil {
		var se *smtp.SMTPError
		if sc.ServerError != "" && errors.As(err, &se) {
			se2 := *se
			se2.Message += " (" + mech + ": " + sc.ServerError + ")"
			return &se2
		}
		return err
	}
	return nil
}

func (s *Submitter) tlsConfig() *tls.Config {
	if s.TLSConfig != nil {
		c := s.TLSConfig.Clone()
		if c.ServerName == "" {
			c.ServerName = s.Host
		}
		return c
	}
	return &tls.Config{ServerName: s.Host, MinVersion: tls.VersionTLS12}
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func allASCII(ss []string) bool {
	for _, s := range ss {
		if !isASCII(s) {
			return false
		}
	}
	return true
}

func isSMTPReply(err error) bool {
	var se *smtp.SMTPError
	return errors.As(err, &se)
}

// policyError is a local refusal (no STARTTLS, no AUTH PLAIN): retrying
// does not help, so it is permanent.
type policyError struct{ msg string }

func (e *policyError) Error() string { return e.msg }
