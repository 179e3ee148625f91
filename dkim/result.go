package dkim

import (
	"strings"

	"github.com/emersion/go-msgauth/authres"
)

// Result words (RFC 8601 section 2.7.1).
const (
	Pass      = "pass"
	Fail      = "fail"
	PermError = "permerror"
	TempError = "temperror"
	Neutral   = "neutral"
)

// Result is the outcome of one DKIM-Signature field. Its JSON form is part of
// envelopd's output contract.
//
// Result is one of:
//   - pass: the signature verified;
//   - fail: the signature or body hash did not verify, or the signature uses
//     l= (body length), which envelopd refuses (RFC 6376 section 8.2);
//   - permerror: the signature cannot be verified and never will: malformed
//     or unsupported tags, rsa-sha1, no key record (key not found), a
//     revoked or malformed key, a key too short;
//   - temperror: the key could not be fetched now (DNS timeout or temporary
//     failure); a later attempt may succeed;
//   - neutral: the signature was not checked because the message has more
//     signatures than the verifier's limit.
type Result struct {
	Domain    string `json:"domain"`
	Selector  string `json:"selector"`
	Algorithm string `json:"algorithm"`
	Result    string `json:"result"`
	// Error says why the result is not pass; empty on pass.
	Error string `json:"error"`
}

// Failed reports whether the message carries a DKIM signature that is
// demonstrably bad: any result fail or permerror. That is what the message
// level error dkim_failed (protocols.CodeDKIMFailed) stands for.
//
// temperror and neutral do not count: a key that could not be fetched right
// now, or a signature left unchecked because of the signature limit, says
// nothing against the message (an unsigned message is not flagged either).
// Callers that need "every signature passed" use AllPass.
func Failed(results []Result) bool {
	for _, r := range results {
		if r.Result == Fail || r.Result == PermError {
			return true
		}
	}
	return false
}

// AllPass reports whether every result is pass (true for none): the rule
// behind `envelopd dkim verify`'s exit status.
func AllPass(results []Result) bool {
	for _, r := range results {
		if r.Result != Pass {
			return false
		}
	}
	return true
}

// AuthResults returns the value of an Authentication-Results header field
// (RFC 8601) for the results, e.g.
//
//	mx.example.org; dkim=pass header.a=ed25519-sha256 header.d=example.com header.s=ed1
//
// with reason="..." for results other than pass, and "dkim=none" when there
// are no signatures.
func AuthResults(authServID string, results []Result) string {
	if len(results) == 0 {
		return authServID + "; dkim=none"
	}
	var b strings.Builder
	b.WriteString(authServID)
	for _, r := range results {
		ar := &authres.GenericResult{
			Method: "dkim",
			Value:  authres.ResultValue(r.Result),
			Params: map[string]string{
				"reason":   r.Error,
				"header.d": r.Domain,
				"header.s": r.Selector,
				"header.a": r.Algorithm,
			},
		}
		// Format with an empty identity gives "; dkim=... params"; it adds
		// a trailing space when there are no params.
		b.WriteString(strings.TrimRight(authres.Format("", []authres.Result{ar}), " "))
	}
	return b.String()
}
