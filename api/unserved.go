package api

import (
	"fmt"
	"net/http"
	"regexp"
)

// unserved names the AgentMail features envelopd does not serve, by
// path, with the docs/api.md section that says so: a 501 tells the
// caller what is missing and where to read why.
var unserved = []struct {
	path             *regexp.Regexp
	feature, section string
}{
	{regexp.MustCompile(`^/v0/(pods/[^/]+/)?domains(/|$)`), "updating domain settings (feedback, subdomains, tracking) or Domain Connect setup links", "Not implemented"},
	{regexp.MustCompile(`^/v0/agent/`), "agent sign-up and verification (AgentMail's hosted sign-up)", "Not implemented"},
	{regexp.MustCompile(`^/v0/(providers|accounts)(/|$)|^/v0/inboxes/[^/]+/authorize$`),
		"sign-in to third-party providers (AgentMail's hosted accounts, providers and inbox authorization)", "Not implemented"},
	{regexp.MustCompile(`^/v0/(organizations|pods)(/|$)`), "organisation and pod management beyond the one", "Pods and the organisation"},
}

// notServed is the 501 of a path under /v0 that no route serves.
func notServed(r *http.Request) *Error {
	for _, u := range unserved {
		if u.path.MatchString(r.URL.Path) {
			return &Error{Status: http.StatusNotImplemented, Name: "NotImplementedError",
				Message: fmt.Sprintf("%s %s: %s is not implemented by envelopd (docs/api.md, %q)", r.Method, r.URL.Path, u.feature, u.section)}
		}
	}
	return &Error{Status: http.StatusNotImplemented, Name: "NotImplementedError",
		Message: fmt.Sprintf("%s %s is not implemented by envelopd (docs/api.md, \"Not implemented\")", r.Method, r.URL.Path)}
}
