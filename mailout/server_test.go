package mailout

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"log"
	"math/big"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// serverScript is how an in-process test SMTP server answers; testdata
// files hold it. A reply is "250" or "550 5.1.1 no such user"; lists are
// indexed by attempt (per recipient for Rcpt, per transaction for Data),
// and an attempt past the end of a list is answered 250.
type serverScript struct {
	TLS   string            `json:"tls"`   // "", "starttls" or "implicit"
	Users map[string]string `json:"users"` // AUTH PLAIN accounts; none: no AUTH
	// OAuth2: the mechanisms offered (XOAUTH2, OAUTHBEARER) and the one
	// access token each user may log in with.
	OAuthMechs []string            `json:"oauth_mechs"`
	Tokens     map[string]string   `json:"tokens"`
	Rcpt       map[string][]string `json:"rcpt"`
	Data       []string            `json:"data"`
}

type received struct {
	From  string
	Rcpts []string
	Data  []byte
}

type testServer struct {
	t      *testing.T
	script serverScript
	Addr   string
	Roots  *x509.CertPool

	mu       sync.Mutex
	rcptSeen map[string]int
	dataSeen int
	Msgs     []received
	// authMechs lists the SASL mechanisms clients used successfully.
	authMechs []string
}

// startServer runs a go-smtp server on 127.0.0.1:0 until the test ends.
func startServer(t *testing.T, script serverScript) *testServer {
	t.Helper()
	ts := &testServer{t: t, script: script, rcptSeen: map[string]int{}}
	s := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		return &testSession{srv: ts}, nil
	}))
	s.Domain = "mx.lab.test"
	s.MaxMessageBytes = 1 << 20
	s.MaxRecipients = 50
	s.ReadTimeout = 10 * time.Second
	s.WriteTimeout = 10 * time.Second
	s.AllowInsecureAuth = script.TLS == ""
	s.ErrorLog = log.New(io.Discard, "", 0)
	if script.TLS != "" {
		cert, roots := testCert(t)
		s.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}}
		ts.Roots = roots
	}
	var l net.Listener
	var err error
	if script.TLS == "implicit" {
		l, err = tls.Listen("tcp", "127.0.0.1:0", s.TLSConfig)
	} else {
		l, err = net.Listen("tcp", "127.0.0.1:0")
	}
	if err != nil {
		t.Fatal(err)
	}
	ts.Addr = l.Addr().String()
	go s.Serve(l)
	t.Cleanup(func() { s.Close() })
	return ts
}

func (ts *testServer) messages() []received {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]received(nil), ts.Msgs...)
}

func parseReply(s string) error {
	if s == "" || strings.HasPrefix(s, "250") {
		return nil
	}
	code, rest, _ := strings.Cut(s, " ")
	n, err := strconv.Atoi(code)
	if err != nil {
		panic("bad scripted reply " + s)
	}
	e := &smtp.SMTPError{Code: n, EnhancedCode: smtp.EnhancedCodeNotSet, Message: rest}
	if f := strings.Fields(rest); len(f) > 0 && strings.Count(f[0], ".") == 2 {
		p := strings.Split(f[0], ".")
		for i := range 3 {
			e.EnhancedCode[i], _ = strconv.Atoi(p[i])
		}
		e.Message = strings.TrimSpace(strings.TrimPrefix(rest, f[0]))
	}
	return e
}

type testSession struct {
	srv   *testServer
	authd bool
	from  string
	rcpts []string
}

func (s *testSession) AuthMechanisms() []string {
	var out []string
	if len(s.srv.script.Users) > 0 {
		out = append(out, sasl.Plain)
	}
	return append(out, s.srv.script.OAuthMechs...)
}

func (s *testSession) Auth(mech string) (sasl.Server, error) {
	ok := func() {
		s.authd = true
		s.srv.mu.Lock()
		s.srv.authMechs = append(s.srv.authMechs, mech)
		s.srv.mu.Unlock()
	}
	tokenOK := func(user, token string) bool {
		want, found := s.srv.script.Tokens[user]
		return found && token == want
	}
	switch mech {
	case sasl.Plain:
		return sasl.NewPlainServer(func(identity, user, pass string) error {
			if want, found := s.srv.script.Users[user]; found && want == pass {
				ok()
				return nil
			}
			return smtp.ErrAuthFailed
		}), nil
	case sasl.OAuthBearer:
		// go-sasl's server, its error mapped to Gmail's 535 5.7.8.
		return authFailed{sasl.NewOAuthBearerServer(func(o sasl.OAuthBearerOptions) *sasl.OAuthBearerError {
			// RFC 7628 §3.1: host and port are the server's as the
			// client named it.
			if tokenOK(o.Username, o.Token) && o.Host == "mail.example.test" && o.Port != 0 {
				ok()
				return nil
			}
			return &sasl.OAuthBearerError{Status: "invalid_token", Schemes: "bearer"}
		})}, nil
	case "XOAUTH2":
		return &xoauth2Server{check: func(user, token string) bool {
			if tokenOK(user, token) {
				ok()
				return true
			}
			return false
		}}, nil
	}
	return nil, smtp.ErrAuthUnsupported
}

// authFailed turns a SASL failure into 535 5.7.8, as providers answer.
type authFailed struct{ sasl.Server }

func (a authFailed) Next(resp []byte) ([]byte, bool, error) {
	ch, done, err := a.Server.Next(resp)
	if err != nil {
		err = smtp.ErrAuthFailed
	}
	return ch, done, err
}

// xoauth2Server is the server side of Google's XOAUTH2: the initial
// response "user=U\x01auth=Bearer T\x01\x01"; a bad token gets an error
// challenge (JSON), the client's empty answer then 535 5.7.8.
type xoauth2Server struct {
	check  func(user, token string) bool
	failed bool
}

func (x *xoauth2Server) Next(resp []byte) ([]byte, bool, error) {
	if x.failed {
		if len(resp) != 0 {
			return nil, true, errors.New("XOAUTH2: want an empty response after the error challenge")
		}
		return nil, true, smtp.ErrAuthFailed
	}
	if resp == nil {
		return []byte{}, false, nil
	}
	rest, ok := strings.CutPrefix(string(resp), "user=")
	user, rest, ok2 := strings.Cut(rest, "\x01auth=Bearer ")
	token, ok3 := strings.CutSuffix(rest, "\x01\x01")
	if ok && ok2 && ok3 && x.check(user, token) {
		return nil, true, nil
	}
	x.failed = true
	return []byte(`{"status":"400","schemes":"Bearer","scope":"https://mail.google.com/"}`), false, nil
}

func (s *testSession) Mail(from string, _ *smtp.MailOptions) error {
	if len(s.srv.script.Users) > 0 && !s.authd {
		return smtp.ErrAuthRequired
	}
	s.from = from
	return nil
}

func (s *testSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.srv.mu.Lock()
	n := s.srv.rcptSeen[to]
	s.srv.rcptSeen[to]++
	s.srv.mu.Unlock()
	if l := s.srv.script.Rcpt[to]; n < len(l) {
		if err := parseReply(l[n]); err != nil {
			return err
		}
	}
	s.rcpts = append(s.rcpts, to)
	return nil
}

func (s *testSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.srv.mu.Lock()
	defer s.srv.mu.Unlock()
	n := s.srv.dataSeen
	s.srv.dataSeen++
	if l := s.srv.script.Data; n < len(l) {
		if err := parseReply(l[n]); err != nil {
			return err
		}
	}
	s.srv.Msgs = append(s.srv.Msgs, received{From: s.from, Rcpts: s.rcpts, Data: b})
	return nil
}

func (s *testSession) Reset()        { s.from, s.rcpts = "", nil }
func (s *testSession) Logout() error { return nil }

// testCert makes a self-signed certificate for mail.example.test and
// 127.0.0.1 and the pool that trusts it.
func testCert(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "mail.example.test"},
		DNSNames:              []string{"mail.example.test"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:                  true,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(c)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pool
}
