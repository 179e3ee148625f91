package oauth

import (
	"bytes"
	"encoding/base64"
	"errors"
	"testing"
)

// TestInitialResponses pins the exact initial responses against the
// examples of the specifications.
func TestInitialResponses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		c      *Client
		mech   string
		raw    string
		base64 string // the example's base64 form, where the spec gives one
	}{{
		// RFC 7628 §4.1 (IMAP example), the AUTHENTICATE argument joined.
		name: "rfc7628-4.1",
		c:    NewOAuthBearerClient("user@example.com", "vF9dft4qmTc2Nvb3RlckBhbHRhdmlzdGEuY29tCg==", "server.example.com", 143),
		mech: "OAUTHBEARER",
		raw:  "n,a=user@example.com,\x01host=server.example.com\x01port=143\x01auth=Bearer vF9dft4qmTc2Nvb3RlckBhbHRhdmlzdGEuY29tCg==\x01\x01",
		base64: "bixhPXVzZXJAZXhhbXBsZS5jb20sAWhvc3Q9c2VydmVyLmV4YW1wbGUuY29tAXBvcnQ9MTQzAWF1dGg9QmVhcmVy" +
			"IHZGOWRmdDRxbVRjMk52YjNSbGNrQmhiSFJoZG1semRHRXVZMjl0Q2c9PQEB",
	}, {
		// Google's XOAUTH2 protocol document, "Initial client response".
		name:   "google-xoauth2",
		c:      NewXOAUTH2Client("someuser@example.com", "ya29.vF9dft4qmTc2Nvb3RlckBhdHRhdmlzdGEuY29tCg"),
		mech:   "XOAUTH2",
		raw:    "user=someuser@example.com\x01auth=Bearer ya29.vF9dft4qmTc2Nvb3RlckBhdHRhdmlzdGEuY29tCg\x01\x01",
		base64: "dXNlcj1zb21ldXNlckBleGFtcGxlLmNvbQFhdXRoPUJlYXJlciB5YTI5LnZGOWRmdDRxbVRjMk52YjNSbGNrQmhkSFJoZG1semRHRXVZMjl0Q2cBAQ==",
	}, {
		// No host and port: the GS2 header and auth only.
		name: "oauthbearer-no-host",
		c:    NewOAuthBearerClient("agent", "tok", "", 0),
		mech: "OAUTHBEARER",
		raw:  "n,a=agent,\x01auth=Bearer tok\x01\x01",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			mech, ir, err := tt.c.Start()
			if err != nil || mech != tt.mech {
				t.Fatalf("Start = %q, _, %v; want %q", mech, err, tt.mech)
			}
			if string(ir) != tt.raw {
				t.Errorf("initial response\n got %q\nwant %q", ir, tt.raw)
			}
			if tt.base64 != "" {
				if got := base64.StdEncoding.EncodeToString(ir); got != tt.base64 {
					t.Errorf("base64\n got %s\nwant %s", got, tt.base64)
				}
			}
		})
	}
}

// TestErrorChallenge: a challenge is the server's error report; the client
// answers as each mechanism requires and keeps a printable description.
func TestErrorChallenge(t *testing.T) {
	t.Parallel()
	challenge := []byte(`{"status":"401","schemes":"bearer","scope":"https://mail.google.com/"}`)
	for _, tt := range []struct {
		c    *Client
		want []byte
	}{
		{NewOAuthBearerClient("u", "t", "h", 1), []byte{0x01}}, // RFC 7628 §3.2.3
		{NewXOAUTH2Client("u", "t"), []byte{}},                 // Google: an empty response
	} {
		resp, err := tt.c.Next(challenge)
		if err != nil || resp == nil || !bytes.Equal(resp, tt.want) {
			t.Errorf("%s: Next = %q, %v; want %q", tt.c.mech, resp, err, tt.want)
		}
		if tt.c.ServerError != "status 401, scope https://mail.google.com/" {
			t.Errorf("%s: ServerError = %q", tt.c.mech, tt.c.ServerError)
		}
	}
	c := NewXOAUTH2Client("u", "t")
	c.Next([]byte("not json"))
	if c.ServerError != `"not json"` {
		t.Errorf("ServerError = %q", c.ServerError)
	}
}

func TestChoose(t *testing.T) {
	t.Parallel()
	offers := func(ms ...string) func(string) bool {
		return func(m string) bool {
			for _, x := range ms {
				if x == m {
					return true
				}
			}
			return false
		}
	}
	for _, tt := range []struct {
		want   string
		offers []string
		got    string
		err    error
	}{
		{"", []string{"XOAUTH2", "OAUTHBEARER"}, "OAUTHBEARER", nil}, // Gmail
		{"auto", []string{"XOAUTH2"}, "XOAUTH2", nil},                // Outlook
		{"xoauth2", []string{"XOAUTH2", "OAUTHBEARER"}, "XOAUTH2", nil},
		{"OAuthBearer", []string{"OAUTHBEARER"}, "OAUTHBEARER", nil},
		{"oauthbearer", []string{"XOAUTH2"}, "", ErrMechanism},
		{"", []string{"PLAIN"}, "", ErrMechanism},
		{"plain", []string{"PLAIN"}, "", ErrMechanism},
	} {
		got, err := Choose(tt.want, offers(tt.offers...))
		if got != tt.got || !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
			t.Errorf("Choose(%q, %v) = %q, %v; want %q, %v", tt.want, tt.offers, got, err, tt.got, tt.err)
		}
	}
}
