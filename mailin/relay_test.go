package mailin

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/envelopd/envelopd/store"
)

func TestPasswordHash(t *testing.T) {
	h, err := HashPassword("s3cret", 1000)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h, "pbkdf2-sha256$1000$") || strings.Contains(h, "s3cret") {
		t.Fatalf("hash %q", h)
	}
	h2, _ := HashPassword("s3cret", 1000)
	if h2 == h {
		t.Error("two hashes of one password are equal: no salt")
	}
	for _, c := range []struct {
		hash, pw string
		ok       bool
	}{
		{h, "s3cret", true},
		{h2, "s3cret", true},
		{h, "s3cret ", false},
		{h, "", false},
		{"", "s3cret", false},
		{"pbkdf2-sha256$0$AAAA$AAAA", "x", false},
		{"pbkdf2-sha256$1000$!!$AAAA", "x", false},
		{"md5$1$a$b", "x", false},
		{strings.Replace(h, "$1000$", "$1001$", 1), "s3cret", false},
	} {
		err := CheckPassword(c.hash, c.pw)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrBadPassword)) {
			t.Errorf("CheckPassword(%q, %q) = %v, want ok=%v", c.hash, c.pw, err, c.ok)
		}
	}
	if _, err := HashPassword("", 0); err == nil {
		t.Error("empty password hashed")
	}
}

func TestHeaderFrom(t *testing.T) {
	for _, c := range []struct{ raw, want string }{
		{"From: Bob <Bob@Agents.Test>\r\nTo: a@b\r\n\r\nx", "bob@agents.test"},
		{"To: a@b\r\nFrom:\r\n bob@agents.test\r\n\r\n", "bob@agents.test"},
		{"From: =?utf-8?q?B=C3=B6b?= <bob@agents.test>\r\n\r\n", "bob@agents.test"},
		{"To: a@b\r\n\r\nFrom: bob@agents.test\r\n", ""},        // in the body
		{"From: a@x.test\r\nFrom: bob@agents.test\r\n\r\n", ""}, // two From fields
		{"From: a@x.test, bob@agents.test\r\n\r\n", ""},         // two addresses
		{"From: not an address\r\n\r\n", ""},
	} {
		got, err := headerFrom([]byte(c.raw))
		if got != c.want || (c.want == "") != (err != nil) {
			t.Errorf("headerFrom(%q) = %q, %v; want %q", c.raw, got, err, c.want)
		}
	}
}

func TestRelayLocal(t *testing.T) {
	st, err := store.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "relay.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.SetMailboxPassword(context.Background(), "bob@agents.test", ""); err != nil {
		t.Fatal(err)
	}
	r := &Relay{Domains: []string{"agents.test", "b.test"}, Store: st}
	for addr, want := range map[string]bool{
		"bob@agents.test": true, "BOB@AGENTS.TEST": true, "x@b.test.": true,
		"@agents.test": false, "bob@sub.agents.test": false, "bob@other.test": false, "agents.test": false,
	} {
		if got := r.Local(addr); got != want {
			t.Errorf("Local(%q) = %v, want %v", addr, got, want)
		}
	}
	for _, to := range []struct {
		user, to string
		err      error
	}{
		{"", "bob@agents.test", nil},
		{"", "carol@agents.test", ErrNoMailbox}, // no mailbox: a stranger's mail creates none
		{"alice@agents.test", "carol@agents.test", nil},
		{"", "x@remote.test", ErrRelayDenied},
		{"alice@agents.test", "x@remote.test", ErrNoSmarthost},
	} {
		if err := r.Rcpt(to.user, "", to.to); err != to.err {
			t.Errorf("Rcpt(%q, %q) = %v, want %v", to.user, to.to, err, to.err)
		}
	}
	r.Smarthost = true
	if err := r.Rcpt("alice@agents.test", "", "x@remote.test"); err != nil {
		t.Errorf("authenticated relaying with a smarthost refused: %v", err)
	}
	if err := r.Submission().Rcpt("", "", "bob@agents.test"); err == nil {
		t.Error("submission without AUTH accepted")
	}
}
