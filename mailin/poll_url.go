package mailin

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// Errors of the IMAP poller. Every failure wraps one of them (errors.Is).
var (
	// ErrIMAPURL: the account URL is not imaps://USER@HOST[:PORT]/MAILBOX
	// or imap://USER@HOST[:PORT]/MAILBOX.
	ErrIMAPURL = errors.New("mailin: bad IMAP URL")
	// ErrIMAPNoTLS: an imap:// server offers no STARTTLS and is not on
	// loopback (allowed only with Insecure).
	ErrIMAPNoTLS = errors.New("mailin: IMAP server offers no TLS")
	// ErrIMAPLogin: the server rejected the credentials.
	ErrIMAPLogin = errors.New("mailin: IMAP login rejected")
	// ErrIMAPMailbox: the mailbox (or the --move-to folder) cannot be used.
	ErrIMAPMailbox = errors.New("mailin: IMAP mailbox unusable")
	// ErrIMAPConn: the connection failed or broke (transient: retried).
	ErrIMAPConn = errors.New("mailin: IMAP connection failed")
	// ErrIMAPIngest: a fetched mail could not be stored (transient: the
	// mail stays unmarked and is fetched again).
	ErrIMAPIngest = errors.New("mailin: IMAP mail not stored")
)

// IMAPAccount is one mailbox to poll, as given by an account URL
// (RFC 5092 imap:// syntax, reduced to user, host, port and mailbox).
type IMAPAccount struct {
	// TLS is true for imaps:// (implicit TLS, RFC 8314 §3.3); imap:// uses
	// STARTTLS (RFC 9051 §6.2.1) when offered.
	TLS      bool
	Host     string
	Port     int
	Username string
	Password string // never logged; see LogValue
	Mailbox  string // e.g. "INBOX"
}

// ParseIMAPURL parses imaps://USER@HOST[:PORT]/MAILBOX or
// imap://USER@HOST[:PORT]/MAILBOX. USER may contain "@" (percent-encoded or
// not); an empty MAILBOX means INBOX. A password in the URL is refused: it
// would end up in the process list and shell history.
func ParseIMAPURL(s string) (IMAPAccount, error) {
	var a IMAPAccount
	u, err := url.Parse(s)
	if err != nil {
		return a, fmt.Errorf("%w: %v", ErrIMAPURL, redactURLError(err))
	}
	switch strings.ToLower(u.Scheme) {
	case "imaps":
		a.TLS, a.Port = true, 993
	case "imap":
		a.Port = 143
	default:
		return a, fmt.Errorf("%w: scheme %q, want imaps:// or imap://", ErrIMAPURL, u.Scheme)
	}
	if u.Opaque != "" {
		return a, fmt.Errorf("%w: want %s://USER@HOST/MAILBOX", ErrIMAPURL, u.Scheme)
	}
	if u.User == nil || u.User.Username() == "" {
		return a, fmt.Errorf("%w: no user (want %s://USER@HOST/MAILBOX)", ErrIMAPURL, u.Scheme)
	}
	if _, ok := u.User.Password(); ok {
		return a, fmt.Errorf("%w: password in the URL; use --imap-password-file (password-file= in a --config line) or $%s", ErrIMAPURL, IMAPPasswordEnv)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return a, fmt.Errorf("%w: query or fragment not supported", ErrIMAPURL)
	}
	a.Username = u.User.Username()
	a.Host = strings.ToLower(u.Hostname())
	if a.Host == "" {
		return a, fmt.Errorf("%w: no host", ErrIMAPURL)
	}
	// A host with a colon is an IPv6 literal, and must be one (RFC 3986
	// section 3.2.2): "imap://u@::" would otherwise name the host ":".
	if strings.Contains(a.Host, ":") && net.ParseIP(a.Host) == nil {
		return a, fmt.Errorf("%w: host %q is neither a name nor an IP address", ErrIMAPURL, a.Host)
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return a, fmt.Errorf("%w: port %q", ErrIMAPURL, p)
		}
		a.Port = n
	}
	a.Mailbox = strings.TrimPrefix(u.Path, "/")
	if a.Mailbox == "" {
		a.Mailbox = "INBOX"
	}
	if strings.ContainsAny(a.Mailbox, "\r\n\x00") {
		return a, fmt.Errorf("%w: control character in mailbox name", ErrIMAPURL)
	}
	return a, nil
}

// redactURLError drops the URL text from a url.Parse error: it may hold a
// password the user typed by mistake.
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// Addr is HOST:PORT.
func (a IMAPAccount) Addr() string {
	return net.JoinHostPort(a.Host, strconv.Itoa(a.Port))
}

// Key names this account and mailbox in the store's IMAP state:
// "user@host:port/MAILBOX".
func (a IMAPAccount) Key() string {
	return a.Username + "@" + a.Addr() + "/" + a.Mailbox
}

// String is the URL without any secret.
func (a IMAPAccount) String() string {
	scheme := "imap"
	if a.TLS {
		scheme = "imaps"
	}
	u := url.URL{Scheme: scheme, User: url.User(a.Username), Host: a.Addr(), Path: "/" + a.Mailbox}
	return u.String()
}

// LogValue makes slog print the account without its password.
func (a IMAPAccount) LogValue() slog.Value { return slog.StringValue(a.String()) }

// Loopback reports whether the server is on this host (plain-text IMAP is
// allowed there without Insecure).
func (a IMAPAccount) Loopback() bool {
	if a.Host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(a.Host, "[]"))
	return ip != nil && ip.IsLoopback()
}
