package mailin

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/envelopd/envelopd/internal/conflines"
	"github.com/envelopd/envelopd/internal/oauth"
	"github.com/envelopd/envelopd/internal/secretfile"
)

// ErrPollConfig: a line of a poll config file is malformed.
var ErrPollConfig = errors.New("mailin: bad poll config")

// PollAccountConfig is one line of a poll config file.
type PollAccountConfig struct {
	Line    int
	Account IMAPAccount // Password is empty: read PasswordFile
	// Optional per-account settings (key=value after the URL).
	PasswordFile string // password-file=PATH
	MoveTo       string // move-to=FOLDER
	Address      string // address=ADDR (the account's own mail address)
	StoreMailbox string // mailbox=NAME (store mailbox, relay mode)
	OAuth2Config string // oauth2=FILE (OAuth2 config: token command or refresh token)
	// Tokens and Mechanism, set by the caller from OAuth2Config or flags,
	// replace the password (Poller.Tokens).
	Tokens    oauth.TokenSource
	Mechanism string
}

// ParsePollConfig reads a poll config: one mailbox per line, the account
// URL first, then optional key=value settings separated by blanks;
// blank lines and lines starting with # are ignored.
//
//	imaps://me@fastmail.com@imap.fastmail.com/INBOX password-file=/etc/envelopd/fm.pw move-to=Processed
//	imaps://agent%40gmail.com@imap.gmail.com/INBOX password-file=/etc/envelopd/gmail.pw
//	imaps://agent%40outlook.com@outlook.office365.com/INBOX oauth2=/etc/envelopd/outlook.oauth2
func ParsePollConfig(r io.Reader) ([]PollAccountConfig, error) {
	var out []PollAccountConfig
	seen := map[string]int{}
	sc := conflines.New(r)
	for sc.Scan() {
		n, line := sc.Line()
		fields := strings.Fields(line)
		a, err := ParseIMAPURL(fields[0])
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %w", ErrPollConfig, n, err)
		}
		c := PollAccountConfig{Line: n, Account: a}
		for _, kv := range fields[1:] {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || v == "" {
				return nil, fmt.Errorf("%w: line %d: %q: want key=value", ErrPollConfig, n, kv)
			}
			var dst *string
			switch k {
			case "password-file":
				dst = &c.PasswordFile
			case "move-to":
				dst = &c.MoveTo
			case "address":
				dst = &c.Address
			case "mailbox":
				dst = &c.StoreMailbox
			case "oauth2":
				dst = &c.OAuth2Config
			default:
				return nil, fmt.Errorf("%w: line %d: unknown setting %q (want password-file, oauth2, move-to, address, mailbox)", ErrPollConfig, n, k)
			}
			if *dst != "" {
				return nil, fmt.Errorf("%w: line %d: %s given twice", ErrPollConfig, n, k)
			}
			*dst = v
		}
		if c.PasswordFile != "" && c.OAuth2Config != "" {
			return nil, fmt.Errorf("%w: line %d: password-file and oauth2 both given; the account logs in with one", ErrPollConfig, n)
		}
		if prev, dup := seen[a.Key()]; dup {
			return nil, fmt.Errorf("%w: line %d: %s already listed on line %d", ErrPollConfig, n, a.Key(), prev)
		}
		seen[a.Key()] = n
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPollConfig, err)
	}
	return out, nil
}

// IMAPPasswordEnv is the environment variable the IMAP password is read
// from when no password file is given.
const IMAPPasswordEnv = "ENVELOPD_IMAP_PASSWORD"

// ErrIMAPPassword: no usable password (missing file, empty).
var ErrIMAPPassword = errors.New("mailin: no IMAP password")

// LoadIMAPPassword reads the first line of file, or $ENVELOPD_IMAP_PASSWORD
// (through getenv; nil means os.Getenv) when file is "". An empty password
// is an error. The error never contains the password.
func LoadIMAPPassword(file string, getenv func(string) string) (string, error) {
	var pw string
	if file != "" {
		// A file the group or others can read is refused (secretfile).
		line, err := secretfile.FirstLine(file)
		if err != nil {
			return "", fmt.Errorf("%w: %w", ErrIMAPPassword, err)
		}
		pw = line
		if pw == "" {
			return "", fmt.Errorf("%w: %s: first line is empty", ErrIMAPPassword, file)
		}
		return pw, nil
	}
	if getenv == nil {
		getenv = os.Getenv
	}
	if pw = getenv(IMAPPasswordEnv); pw == "" {
		return "", fmt.Errorf("%w: give a password file or set %s", ErrIMAPPassword, IMAPPasswordEnv)
	}
	return pw, nil
}
