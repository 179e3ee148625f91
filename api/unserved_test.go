package api_test

import (
	"strings"
	"testing"
)

// TestNotServed: what envelopd does not serve is a 501 naming the
// feature and the docs/api.md section.
func TestNotServed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.createInbox("a", "shop.test")
	for _, tc := range []struct{ method, path, want string }{
		{"POST", "/v0/agent/sign-up", `agent sign-up and verification (AgentMail's hosted sign-up) is not implemented by envelopd (docs/api.md, "Not implemented")`},
		{"GET", "/v0/providers", `sign-in to third-party providers (AgentMail's hosted accounts, providers and inbox authorization) is not implemented`},
		{"POST", "/v0/inboxes/a@shop.test/authorize", `sign-in to third-party providers`},
		{"GET", "/v0/accounts/acc_1", `sign-in to third-party providers`},
		{"PATCH", "/v0/pods/envelopd/domains/x.example", `updating domain settings (feedback, subdomains, tracking) or Domain Connect setup links is not implemented by envelopd (docs/api.md, "Not implemented")`},
		{"GET", "/v0/nothing/here", `GET /v0/nothing/here is not implemented by envelopd (docs/api.md, "Not implemented")`},
	} {
		var er struct{ Name, Message string }
		if c := e.do(e.key, tc.method, tc.path, nil, &er); c != 501 || er.Name != "NotImplementedError" || !strings.Contains(er.Message, tc.want) {
			t.Errorf("%s %s: %d %+v", tc.method, tc.path, c, er)
		}
	}
}
