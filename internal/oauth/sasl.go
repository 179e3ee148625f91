// Package oauth authenticates envelopd to mail providers with OAuth 2.0
// bearer tokens: the SASL mechanisms OAUTHBEARER (RFC 7628) and Google's
// XOAUTH2 (https://developers.google.com/gmail/imap/xoauth2-protocol),
// used by IMAP AUTHENTICATE (RFC 9051 §6.2.2) and SMTP AUTH (RFC 4954),
// and the sources of the access token: a command run on each connection
// (as aerc and isync do) or a refresh token exchanged at the provider's
// token endpoint (RFC 6749 §6) with golang.org/x/oauth2.
//
// Tokens are secrets: no error, log line or String method of this package
// contains one.
package oauth

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/emersion/go-sasl"
)

// SASL mechanism names.
const (
	XOAUTH2     = "XOAUTH2"
	OAUTHBEARER = "OAUTHBEARER" // RFC 7628 §3
	// Auto picks OAUTHBEARER when the server offers it, else XOAUTH2.
	Auto = "auto"
)

// ErrMechanism: the server offers no usable OAuth2 SASL mechanism, or an
// unknown one was asked for.
var ErrMechanism = errors.New("oauth: no usable SASL mechanism")

// ParseMechanism normalises a mechanism name: "" and "auto" give Auto,
// "xoauth2" and "oauthbearer" (any case) their canonical names.
func ParseMechanism(s string) (string, error) {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "", "AUTO":
		return Auto, nil
	case XOAUTH2:
		return XOAUTH2, nil
	case OAUTHBEARER:
		return OAUTHBEARER, nil
	}
	return "", fmt.Errorf("%w: %q (want auto, xoauth2 or oauthbearer)", ErrMechanism, s)
}

// Choose returns the mechanism to use: want itself when offered (has
// reports a server's AUTH= capability), or with Auto ("" too) OAUTHBEARER,
// the standard one, before XOAUTH2 (Outlook offers only XOAUTH2).
func Choose(want string, has func(mech string) bool) (string, error) {
	want, err := ParseMechanism(want)
	if err != nil {
		return "", err
	}
	cands := []string{want}
	if want == Auto {
		cands = []string{OAUTHBEARER, XOAUTH2}
	}
	for _, m := range cands {
		if has(m) {
			return m, nil
		}
	}
	return "", fmt.Errorf("%w: the server offers neither %s", ErrMechanism, strings.Join(cands, " nor "))
}

// Client is a SASL client for one bearer token. After a failed exchange,
// ServerError holds the server's error challenge (a JSON object such as
// {"status":"401","schemes":"bearer","scope":"…"}, never a token) so the
// caller can report it.
type Client struct {
	mech string
	ir   []byte
	// ServerError is the error challenge the server sent, if any.
	ServerError string
}

// NewClient returns the client for mech (XOAUTH2 or OAUTHBEARER). host and
// port are the server's, sent by OAUTHBEARER (RFC 7628 §3.1: optional, but
// some servers check them); XOAUTH2 does not use them.
func NewClient(mech, user, token, host string, port int) (*Client, error) {
	switch mech {
	case XOAUTH2:
		return NewXOAUTH2Client(user, token), nil
	case OAUTHBEARER:
		return NewOAuthBearerClient(user, token, host, port), nil
	}
	return nil, fmt.Errorf("%w: %q", ErrMechanism, mech)
}

// NewXOAUTH2Client is Google's XOAUTH2: the initial response is
// "user=" USER ^A "auth=Bearer " TOKEN ^A ^A (^A is 0x01).
func NewXOAUTH2Client(user, token string) *Client {
	ir := "user=" + user + "\x01auth=Bearer " + token + "\x01\x01"
	return &Client{mech: XOAUTH2, ir: []byte(ir)}
}

// NewOAuthBearerClient is RFC 7628 OAUTHBEARER (§3.1): a GS2 header naming
// the user as authzid, then host, port and auth key-value pairs, each
// introduced by 0x01, closed by 0x01 0x01. The message is built by
// go-sasl's client.
func NewOAuthBearerClient(user, token, host string, port int) *Client {
	_, ir, _ := sasl.NewOAuthBearerClient(&sasl.OAuthBearerOptions{
		Username: user, Token: token, Host: host, Port: port,
	}).Start()
	return &Client{mech: OAUTHBEARER, ir: ir}
}

// Start implements sasl.Client: the mechanism and its initial response.
func (c *Client) Start() (string, []byte, error) { return c.mech, c.ir, nil }

// Next implements sasl.Client. Both mechanisms send everything in the
// initial response; a challenge is the server's error report. The client
// must answer it to let the server finish with a failure: OAUTHBEARER with
// the dummy response 0x01 (RFC 7628 §3.2.3), XOAUTH2 with an empty one
// (Google's XOAUTH2 document, "Error response").
func (c *Client) Next(challenge []byte) ([]byte, error) {
	c.ServerError = describeChallenge(challenge)
	if c.mech == OAUTHBEARER {
		return []byte{0x01}, nil
	}
	return []byte{}, nil
}

// describeChallenge makes an error challenge printable: the JSON status
// and scope when it parses, else the bytes quoted and bounded.
func describeChallenge(b []byte) string {
	var e struct {
		Status string `json:"status"`
		Scope  string `json:"scope"`
	}
	if json.Unmarshal(b, &e) == nil && e.Status != "" {
		s := "status " + printable(e.Status)
		if e.Scope != "" {
			s += ", scope " + printable(e.Scope)
		}
		return s
	}
	if len(b) > 60 {
		b = b[:60] // quoted, at most 242 bytes
	}
	return strconv.Quote(string(b))
}

// printable bounds a server-supplied string to 100 bytes and drops
// control characters, so it cannot forge log lines.
func printable(s string) string {
	if len(s) > 100 {
		s = s[:100]
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == utf8.RuneError {
			return -1
		}
		return r
	}, s)
}

var _ sasl.Client = (*Client)(nil)
