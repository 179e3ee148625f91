package oauth

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParseConfig: any config text gives settings or ErrConfig, never a
// panic; what parses has no empty key value.
func FuzzParseConfig(f *testing.F) {
	f.Add("provider = gmail\nclient-id = x\nrefresh-token-file = r\n")
	f.Add("# c\n\ntoken-command = oama access a@b\nmechanism = xoauth2\n")
	f.Add("scope = a b\nscope = c\nclient-id = =\n")
	f.Add("client-id\n")
	f.Fuzz(func(t *testing.T, text string) {
		s, err := ParseConfig(strings.NewReader(text), "/etc/envelopd/x.conf")
		if err != nil {
			return
		}
		for _, sc := range s.Scopes {
			if sc == "" {
				t.Fatalf("empty scope from %q", text)
			}
		}
		_, _ = s.Source() // validation must not panic either
	})
}

// FuzzClientNext: a server's challenge, whatever its bytes, gets the
// mechanism's fixed answer and a bounded, printable description.
func FuzzClientNext(f *testing.F) {
	f.Add([]byte(`{"status":"401","schemes":"bearer","scope":"https://mail.google.com/"}`))
	f.Add([]byte("\xff\x00"))
	f.Add([]byte(`{"status":"4\n01` + strings.Repeat("x", 300) + `"}`))
	f.Fuzz(func(t *testing.T, ch []byte) {
		for _, c := range []*Client{NewXOAUTH2Client("u", "t"), NewOAuthBearerClient("u", "t", "h", 993)} {
			resp, err := c.Next(ch)
			if err != nil || resp == nil || len(resp) > 1 {
				t.Fatalf("Next = %q, %v", resp, err)
			}
			if len(c.ServerError) > 250 || strings.ContainsAny(c.ServerError, "\r\n") || !utf8.ValidString(c.ServerError) {
				t.Fatalf("ServerError %q", c.ServerError)
			}
		}
	})
}
