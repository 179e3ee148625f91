package store

import "testing"

// TestSenderVerdict: the sender verdict the caller gives decides, without
// reading the result; not given, the result's "sender" key decides.
func TestSenderVerdict(t *testing.T) {
	t.Parallel()
	const (
		none   = `{"type":null,"note":""}`
		unauth = `{"type":null,"note":"","sender":{"spf":"none","authenticated_as":null}}`
		auth   = `{"type":null,"note":"","sender":{"spf":"pass","authenticated_as":"x.test"}}`
		inBody = `{"type":null,"note":"","body":{"sender":{"authenticated_as":null}}}`
	)
	for _, c := range []struct {
		given  SenderVerdict
		result string
		want   bool
	}{
		{SenderVerdictInResult, none, false},
		{SenderVerdictInResult, unauth, true},
		{SenderVerdictInResult, auth, false},
		{SenderVerdictInResult, inBody, false},
		{SenderVerdictUnauthenticated, unauth, true},
		{SenderVerdictAuthenticated, auth, false},
		{SenderVerdictAuthenticated, none, false},
		// Given, it is trusted as the caller wrote the result.
		{SenderVerdictUnauthenticated, none, true},
		{SenderVerdictAuthenticated, unauth, false},
	} {
		in := &Incoming{Result: []byte(c.result), SenderVerdict: c.given}
		if got := in.unauthenticated(); got != c.want {
			t.Errorf("SenderVerdict %d, result %s: unauthenticated %v, want %v", c.given, c.result, got, c.want)
		}
	}
}
