package oauth

import (
	"github.com/envelopd/envelopd/internal/secretfile"

	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
)

// Errors of the token sources. Every failure wraps one of them
// (errors.Is); none contains a token.
var (
	// ErrTokenCommand: the token command failed (non-zero exit, timeout,
	// no output, output too large or not a token).
	ErrTokenCommand = errors.New("oauth: token command failed")
	// ErrTokenRefresh: the token endpoint could not be reached or answered
	// with a server error (transient: retried).
	ErrTokenRefresh = errors.New("oauth: token refresh failed")
	// ErrTokenRejected: the token endpoint refused the refresh token or the
	// client (RFC 6749 §5.2 invalid_grant, invalid_client,
	// unauthorized_client): permanent until the user acts.
	ErrTokenRejected = errors.New("oauth: refresh token rejected")
	// ErrTokenFile: a secret file (refresh token, client secret) cannot be
	// read or written, or is empty.
	ErrTokenFile = errors.New("oauth: token file unusable")
)

// A TokenSource gives the access token to use for the next connection.
// Implementations are safe for concurrent use.
type TokenSource interface {
	Token(ctx context.Context) (string, error)
}

// Limits of the token command.
const (
	// MaxCommandOutput bounds what a token command may print: Microsoft's
	// access tokens are a few KiB, Google's a few hundred bytes.
	MaxCommandOutput = 64 << 10
	// DefaultCommandTimeout bounds one run of the token command.
	DefaultCommandTimeout = 60 * time.Second
)

// Command runs a shell command (sh -c) on every call and takes its
// standard output, trimmed of surrounding white space, as the access
// token, as aerc's and isync's token commands do. Standard input is empty;
// the environment is inherited.
type Command struct {
	Cmd     string
	Timeout time.Duration // 0: DefaultCommandTimeout
}

// String names the source without running anything.
func (c *Command) String() string { return "token command" }

// Token runs the command.
func (c *Command) Token(ctx context.Context) (string, error) {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultCommandTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", c.Cmd)
	out := &limitedBuffer{max: MaxCommandOutput}
	errOut := &limitedBuffer{max: 4 << 10}
	cmd.Stdout, cmd.Stderr = out, errOut
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		return "", fmt.Errorf("%w: no token within %v", ErrTokenCommand, timeout)
	}
	if err != nil {
		// The exit status and the first line of what the command said on
		// standard error (bounded): a command does not print its token
		// there.
		msg := err.Error()
		if line := firstLine(errOut.String()); line != "" {
			msg += ": " + line
		}
		return "", fmt.Errorf("%w: %s", ErrTokenCommand, msg)
	}
	if out.overflow {
		return "", fmt.Errorf("%w: output longer than %d bytes", ErrTokenCommand, MaxCommandOutput)
	}
	tok := strings.TrimSpace(out.String())
	if tok == "" {
		return "", fmt.Errorf("%w: empty output", ErrTokenCommand)
	}
	if err := checkToken(tok); err != nil {
		return "", fmt.Errorf("%w: output %v", ErrTokenCommand, err)
	}
	return tok, nil
}

// checkToken accepts an RFC 6750 §2.1 b64token: 1*( ALPHA / DIGIT / "-" /
// "." / "_" / "~" / "+" / "/" ) *"=". Anything else (white space inside, a
// second line, a 0x01 that would end the SASL field) is refused.
func checkToken(tok string) error {
	body := strings.TrimRight(tok, "=")
	if body == "" {
		return errors.New("is not a bearer token")
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("-._~+/", c) >= 0:
		default:
			return fmt.Errorf("is not a bearer token (byte %d is %q; RFC 6750 §2.1 allows letters, digits and -._~+/=)", i, c)
		}
	}
	return nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	line = strings.TrimSpace(line)
	if len(line) > 200 {
		line = line[:200] + "…"
	}
	return line
}

// limitedBuffer keeps the first max bytes and notes that more came. (The
// buffer is a named field: an embedded bytes.Buffer would lend its
// ReadFrom to io.Copy, which would then bypass Write and its bound.)
type limitedBuffer struct {
	buf      bytes.Buffer
	max      int
	overflow bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.buf.Len(); len(p) > room {
		b.overflow = true
		b.buf.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return b.buf.Write(p)
}

func (b *limitedBuffer) String() string { return b.buf.String() }

// Refresh exchanges a refresh token, kept in a file, for access tokens at
// the provider's token endpoint (RFC 6749 §6) with golang.org/x/oauth2. An
// access token is reused until shortly before it expires. When the
// provider returns a new refresh token (Microsoft rotates them), it
// replaces the file's content (written to a temporary file, mode 0600,
// then renamed).
type Refresh struct {
	TokenURL         string
	ClientID         string
	ClientSecret     string // may be "" (public clients)
	Scopes           []string
	RefreshTokenFile string
	// HTTPClient makes the token requests (default: 30 s timeout).
	HTTPClient *http.Client
	// Logger reports a rotated refresh token that could not be saved
	// (default slog.Default()).
	Logger *slog.Logger

	mu      sync.Mutex
	ts      oauth2.TokenSource
	refresh string // the refresh token last written to or read from the file
}

// String names the source without any secret.
func (r *Refresh) String() string { return "refresh token " + r.RefreshTokenFile }

// Token returns a valid access token, refreshing it when needed.
func (r *Refresh) Token(ctx context.Context) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ts == nil {
		rt, err := ReadSecretFile(r.RefreshTokenFile)
		if err != nil {
			return "", err
		}
		hc := r.HTTPClient
		if hc == nil {
			hc = &http.Client{Timeout: 30 * time.Second}
		}
		conf := &oauth2.Config{ClientID: r.ClientID, ClientSecret: r.ClientSecret, Scopes: r.Scopes,
			Endpoint: oauth2.Endpoint{TokenURL: r.TokenURL}}
		// The context only carries the HTTP client: the token source
		// lives as long as the poller, beyond this call's ctx.
		octx := context.WithValue(context.Background(), oauth2.HTTPClient, hc)
		r.ts = oauth2.ReuseTokenSource(nil, conf.TokenSource(octx, &oauth2.Token{RefreshToken: rt}))
		r.refresh = rt
	}
	type result struct {
		tok *oauth2.Token
		err error
	}
	done := make(chan result, 1)
	go func() { t, err := r.ts.Token(); done <- result{t, err} }()
	var res result
	select {
	case res = <-done:
	case <-ctx.Done():
		return "", fmt.Errorf("%w: %v", ErrTokenRefresh, ctx.Err())
	}
	if res.err != nil {
		return "", classifyRefresh(res.err)
	}
	if err := checkToken(res.tok.AccessToken); err != nil {
		return "", fmt.Errorf("%w: the token endpoint's access_token %v", ErrTokenRefresh, err)
	}
	if nrt := res.tok.RefreshToken; nrt != "" && nrt != r.refresh {
		// The access token is good either way: a file that cannot be
		// written is reported and tried again on the next call (the
		// source keeps the new refresh token in memory meanwhile).
		if err := writeSecretFile(r.RefreshTokenFile, nrt); err != nil {
			log := r.Logger
			if log == nil {
				log = slog.Default()
			}
			log.Warn("oauth: the provider rotated the refresh token but it could not be saved; "+
				"the next start would use the old one", "file", r.RefreshTokenFile, "err", err)
		} else {
			r.refresh = nrt
		}
	}
	return res.tok.AccessToken, nil
}

// classifyRefresh maps golang.org/x/oauth2's errors to ours: an error
// response naming the grant or the client (RFC 6749 §5.2) is permanent,
// anything else transient. The response body is not quoted (it is the
// endpoint's error text, but stays out of logs anyway).
func classifyRefresh(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		desc := re.ErrorCode
		if re.ErrorDescription != "" {
			desc += ": " + firstLine(re.ErrorDescription)
		}
		if desc == "" && re.Response != nil {
			desc = re.Response.Status
		}
		switch re.ErrorCode {
		case "invalid_grant", "invalid_client", "unauthorized_client", "unsupported_grant_type", "invalid_scope":
			return fmt.Errorf("%w: %s", ErrTokenRejected, desc)
		}
		return fmt.Errorf("%w: %s", ErrTokenRefresh, desc)
	}
	return fmt.Errorf("%w: %v", ErrTokenRefresh, err)
}

// ReadSecretFile returns the first line of a secret file, without its line
// end; an empty first line is an error. The error never holds the content.
func ReadSecretFile(path string) (string, error) {
	b, err := secretfile.Read(path) // refuses a file the group or others may read
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrTokenFile, err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	line = strings.TrimSpace(line)
	if line == "" {
		return "", fmt.Errorf("%w: %s: first line is empty", ErrTokenFile, path)
	}
	return line, nil
}

// writeSecretFile replaces path's content with secret and a newline,
// atomically, mode 0600.
func writeSecretFile(path, secret string) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("%w: save the new refresh token: %v", ErrTokenFile, err)
	}
	tmp := f.Name()
	_, err = f.WriteString(secret + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("%w: save the new refresh token: %v", ErrTokenFile, err)
	}
	return nil
}

// Permanent reports whether err is a token failure retrying cannot fix:
// a rejected refresh token or client, an unusable secret file.
func Permanent(err error) bool {
	return errors.Is(err, ErrTokenRejected) || errors.Is(err, ErrTokenFile)
}
