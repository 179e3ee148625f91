package mailout

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// testRaw is a small CRLF message with a line that needs dot-stuffing.
var testRaw = []byte("From: alice@x.test\r\nTo: bob@y.test\r\nSubject: PAY\r\n\r\nline one\r\n.leading dot\r\n")

type submitCase struct {
	// URL has "{port}" replaced by the server's port; a host that is not
	// 127.0.0.1 is dialled on loopback all the same.
	URL      string `json:"url"`
	Password string `json:"password"`
	// Token, when set, authenticates with OAuth2 (NewTokenSubmitter) and
	// Mechanism ("" = auto); AuthMech is the mechanism the server saw.
	Token     string       `json:"token"`
	Mechanism string       `json:"mechanism"`
	AuthMech  string       `json:"auth_mech"`
	Server    serverScript `json:"server"`
	NoServer  bool         `json:"no_server"` // nothing listens: connection refused
	Untrusted bool         `json:"untrusted"` // the client does not trust the server's certificate
	Rcpts     []string     `json:"rcpts"`
	Want      []wantRcpt   `json:"want"`
	Delivered int          `json:"delivered"`
}

type wantRcpt struct {
	OK        bool   `json:"ok"`
	Permanent bool   `json:"permanent"`
	Stage     string `json:"stage"`
	Code      int    `json:"code"`
	Enhanced  string `json:"enhanced"`
}

func loadJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func TestSubmit(t *testing.T) {
	files, _ := filepath.Glob("../testdata/mailout/submit/*.json")
	if len(files) == 0 {
		t.Fatal("no test cases")
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".json"), func(t *testing.T) {
			var tc submitCase
			loadJSON(t, f, &tc)
			var ts *testServer
			var port string
			if tc.NoServer {
				l, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				_, port, _ = net.SplitHostPort(l.Addr().String())
				l.Close()
			} else {
				ts = startServer(t, tc.Server)
				_, port, _ = net.SplitHostPort(ts.Addr)
			}
			url := strings.ReplaceAll(tc.URL, "{port}", port)
			s, err := NewSubmitter(url, tc.Password)
			if tc.Token != "" {
				s, err = NewTokenSubmitter(url, staticToken(tc.Token), tc.Mechanism)
			}
			if err != nil {
				t.Fatal(err)
			}
			s.dialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, network, net.JoinHostPort("127.0.0.1", port))
			}
			if ts != nil && ts.Roots != nil && !tc.Untrusted {
				s.TLSConfig = &tls.Config{RootCAs: ts.Roots}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			res := s.Submit(ctx, "alice@x.test", tc.Rcpts, testRaw)
			if len(res) != len(tc.Want) {
				t.Fatalf("got %d results, want %d", len(res), len(tc.Want))
			}
			for i, w := range tc.Want {
				r := res[i]
				if r.Rcpt != tc.Rcpts[i] {
					t.Errorf("result %d is for %q, want %q", i, r.Rcpt, tc.Rcpts[i])
				}
				if w.OK {
					if r.Err != nil {
						t.Errorf("%s: unexpected error %v", r.Rcpt, r.Err)
					}
					continue
				}
				var se *SendError
				if !errors.As(r.Err, &se) {
					t.Errorf("%s: error %v is not a *SendError", r.Rcpt, r.Err)
					continue
				}
				got := wantRcpt{Permanent: se.Permanent, Stage: se.Stage, Code: se.Code, Enhanced: se.Enhanced}
				if got != w {
					t.Errorf("%s: got %+v, want %+v (%v)", r.Rcpt, got, w, se)
				}
				if IsPermanent(r.Err) != w.Permanent {
					t.Errorf("%s: IsPermanent = %v", r.Rcpt, !w.Permanent)
				}
			}
			if ts == nil {
				return
			}
			ts.mu.Lock()
			mechs := strings.Join(ts.authMechs, ",")
			ts.mu.Unlock()
			if tc.AuthMech != "" && mechs != tc.AuthMech {
				t.Errorf("server saw AUTH %q, want %q", mechs, tc.AuthMech)
			}
			msgs := ts.messages()
			if len(msgs) != tc.Delivered {
				t.Fatalf("server accepted %d messages, want %d", len(msgs), tc.Delivered)
			}
			for _, m := range msgs {
				if !bytes.Equal(m.Data, testRaw) {
					t.Errorf("server got %q, want %q", m.Data, testRaw)
				}
				if m.From != "alice@x.test" {
					t.Errorf("MAIL FROM %q", m.From)
				}
			}
		})
	}
}

// staticToken is a TokenSource with one token.
type staticToken string

func (s staticToken) Token(context.Context) (string, error) { return string(s), nil }

func TestNewSubmitterURL(t *testing.T) {
	for _, tc := range []struct {
		url, password, want, err string
	}{
		{"smtps://agent@mail.example.test", "pw", "smtps://agent@mail.example.test:465", ""},
		{"smtp://agent@mail.example.test", "pw", "smtp://agent@mail.example.test:587", ""},
		{"smtp://127.0.0.1:2525", "", "smtp://127.0.0.1:2525", ""},
		{"smtp://agent:hunter2@mail.example.test", "", "", "not in the url"},
		{"http://mail.example.test", "", "", "scheme must be smtps or smtp"},
		{"smtp://agent@mail.example.test", "", "", "no password was given"},
		{"smtp://:25", "", "", "no host"},
		{"smtp://mail.example.test:99999", "", "", "bad port"},
		{"smtp://mail.example.test/x", "", "", "unexpected path"},
	} {
		s, err := NewSubmitter(tc.url, tc.password)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: err %v, want %q", tc.url, err, tc.err)
			}
			if err != nil && strings.Contains(err.Error(), "hunter2") {
				t.Errorf("%s: error leaks the password: %v", tc.url, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.url, err)
			continue
		}
		if s.String() != tc.want {
			t.Errorf("%s: String() = %q, want %q", tc.url, s.String(), tc.want)
		}
	}
}

func TestLoadPassword(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "pw")
	if err := os.WriteFile(f, []byte("s3cret\nignored\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(k string) string {
		if k == PasswordEnv {
			return "from-env"
		}
		return ""
	}
	if p, err := LoadPassword(f, env); err != nil || p != "s3cret" {
		t.Errorf("file: %q, %v", p, err)
	}
	if p, err := LoadPassword("", env); err != nil || p != "from-env" {
		t.Errorf("env: %q, %v", p, err)
	}
	if _, err := LoadPassword(filepath.Join(dir, "missing"), env); err == nil {
		t.Error("missing file: no error")
	}
}

// countingTokens hands out tokens from a list, one per call, or fails.
type countingTokens struct {
	mu    sync.Mutex
	toks  []string
	calls int
	err   error
}

func (c *countingTokens) Token(context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	if c.err != nil {
		return "", c.err
	}
	return c.toks[min(c.calls-1, len(c.toks)-1)], nil
}

// TestSubmitToken: the token is asked for on every connection; a refused
// one fails with the server's OAuth2 status and without the token; a
// failing token source is temporary (the queue retries).
func TestSubmitToken(t *testing.T) {
	ts := startServer(t, serverScript{TLS: "starttls", OAuthMechs: []string{"XOAUTH2"},
		Tokens: map[string]string{"agent@example.com": "good-1"}})
	_, port, _ := net.SplitHostPort(ts.Addr)
	tokens := &countingTokens{toks: []string{"good-1", "stale-2"}}
	s, err := NewTokenSubmitter("smtp://agent@example.com@mail.example.test:"+port, tokens, "")
	if err != nil {
		t.Fatal(err)
	}
	s.TLSConfig = &tls.Config{RootCAs: ts.Roots}
	s.dialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, ts.Addr)
	}
	ctx := context.Background()
	if r := s.Submit(ctx, "agent@example.com", []string{"bob@y.test"}, testRaw); r[0].Err != nil {
		t.Fatalf("first submission: %v", r[0].Err)
	}
	r := s.Submit(ctx, "agent@example.com", []string{"bob@y.test"}, testRaw)
	if err := r[0].Err; err == nil || !IsPermanent(err) || !strings.Contains(err.Error(), "XOAUTH2: status 400, scope https://mail.google.com/") ||
		strings.Contains(err.Error(), "stale-2") {
		t.Fatalf("second submission: %v; want a permanent 535 naming the OAuth2 status, not the token", err)
	}
	if tokens.calls != 2 {
		t.Errorf("token source asked %d times, want once per connection (2)", tokens.calls)
	}
	tokens.err = errors.New("oauth: token command failed: exit status 1")
	r = s.Submit(ctx, "agent@example.com", []string{"bob@y.test"}, testRaw)
	var se *SendError
	if err := r[0].Err; !errors.As(err, &se) || se.Stage != "auth" || IsPermanent(err) {
		t.Fatalf("token source failure: %v; want a temporary auth error", err)
	}
	if len(ts.messages()) != 1 {
		t.Errorf("server accepted %d messages, want 1", len(ts.messages()))
	}
	if _, err := NewTokenSubmitter("smtps://mail.example.test", tokens, ""); err == nil || !strings.Contains(err.Error(), "needs the user") {
		t.Errorf("no user: %v", err)
	}
	if _, err := NewTokenSubmitter("smtps://a@mail.example.test", tokens, "plain"); err == nil {
		t.Error("mechanism plain accepted")
	}
}
