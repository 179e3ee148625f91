package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/envelopd/envelopd/dkim"
	"github.com/envelopd/envelopd/parse"
)

// dkimConfigSetup writes dir/dkim.conf with two signers for agents.test
// (Ed25519 selector ed1 under a relative key path, RSA selector rsa1 under
// an absolute one) and an Ed25519 key for alice.test selector ed2 meant
// for --dkim-key; the verifier knows all three.
func dkimConfigSetup(t *testing.T) (conf, flagKey string, v *dkim.Verifier) {
	t.Helper()
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys")
	if err := os.Mkdir(keys, 0o700); err != nil {
		t.Fatal(err)
	}
	_, v = dkimSetup(t, keys, "agents.test") // keys/agents.test.pem, selector ed1
	r := v.Resolver.(*dkim.StaticResolver)
	addKey := func(algo, domain, selector, file string) {
		k, err := dkim.GenerateKey(algo)
		if err != nil {
			t.Fatal(err)
		}
		pemb, err := dkim.MarshalKeyPEM(k)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, pemb, 0o600); err != nil {
			t.Fatal(err)
		}
		line, err := dkim.TXTRecord(domain, selector, k.Public())
		if err != nil {
			t.Fatal(err)
		}
		name, txt, _ := strings.Cut(line, " ")
		r.Add(name, txt)
	}
	rsaKey := filepath.Join(t.TempDir(), "rsa.pem")
	addKey("rsa", "agents.test", "rsa1", rsaKey)
	flagKey = filepath.Join(dir, "alice.pem")
	addKey("ed25519", "alice.test", "ed2", flagKey)
	conf = filepath.Join(dir, "dkim.conf")
	text := "# agents.test signs with Ed25519 and RSA\n\ndomain=agents.test selector=ed1 key=keys/agents.test.pem\n" +
		"domain=agents.test selector=rsa1 key=" + rsaKey + "\n"
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return conf, flagKey, v
}

// verifyDKIMAll checks that raw carries exactly the signatures want
// ("domain/selector", in header order) and that all pass.
func verifyDKIMAll(t *testing.T, v *dkim.Verifier, raw []byte, want ...string) {
	t.Helper()
	res, err := v.Verify(context.Background(), raw)
	if err != nil || !dkim.AllPass(res) {
		t.Fatalf("DKIM: %+v %v", res, err)
	}
	var got []string
	for _, r := range res {
		got = append(got, r.Domain+"/"+r.Selector)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("DKIM signatures %v, want %v", got, want)
	}
}

// TestComposeDKIMConfig: compose and send sign with every signer of
// --dkim-config (relative key paths against the file's directory), and
// --dkim-key adds one more; all signatures verify.
func TestComposeDKIMConfig(t *testing.T) {
	conf, flagKey, v := dkimConfigSetup(t)
	pay := []string{"--from", "agent@agents.test", "--to", "friend@example.test", "--type", "PAY", "--note", "Dinner split", "--json", cliData + "pay.json"}

	code, out, errs := runCmd(t, "", append([]string{"compose", "--dkim-config", conf}, pay...)...)
	if code != 0 {
		t.Fatalf("compose: %d %s", code, errs)
	}
	if r := parse.Parse([]byte(out), parse.Options{}); !r.Valid || r.Type != "pay" {
		t.Fatalf("composed PAY: valid=%v type=%q %v", r.Valid, r.Type, r.Errors)
	}
	verifyDKIMAll(t, v, []byte(out), "agents.test/ed1", "agents.test/rsa1")

	code, out, errs = runCmd(t, "", append([]string{"compose", "--dkim-config", conf,
		"--dkim-key", flagKey, "--dkim-selector", "ed2", "--dkim-domain", "alice.test"}, pay...)...)
	if code != 0 {
		t.Fatalf("compose with config and flags: %d %s", code, errs)
	}
	verifyDKIMAll(t, v, []byte(out), "agents.test/ed1", "agents.test/rsa1", "alice.test/ed2")

	srv := startCapture(t)
	code, out, errs = runCmd(t, "", append([]string{"send", "--db", filepath.Join(t.TempDir(), "s.db"), "--smtp-url", "smtp://" + srv.Addr,
		"--dkim-config", conf}, pay...)...)
	if code != 0 {
		t.Fatalf("send: %d %s %s", code, out, errs)
	}
	verifyDKIMAll(t, v, srv.last(t, 1), "agents.test/ed1", "agents.test/rsa1")
}

// TestDKIMConfigErrors: a bad --dkim-config is a usage error (exit 2)
// naming file:line, before anything is composed or queued.
func TestDKIMConfigErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	unknown := write("unknown.conf", "# ok so far\ndomain=a.test selector=s1 key=k.pem colour=blue\n")
	noKey := write("nokey.conf", "domain=a.test selector=s1 key=absent.pem\n")
	pay := []string{"--from", "agent@agents.test", "--to", "friend@example.test", "--type", "PAY", "--json", cliData + "pay.json"}
	db := filepath.Join(dir, "s.db")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"compose unknown setting", []string{"compose", "--dkim-config", unknown}, unknown + `:2: bad DKIM config: unknown setting "colour"`},
		{"compose missing key", []string{"compose", "--dkim-config", noKey}, noKey + ":1: bad DKIM config: "},
		{"compose missing config", []string{"compose", "--dkim-config", filepath.Join(dir, "none.conf")}, "none.conf: bad DKIM config: "},
		{"send unknown setting", []string{"send", "--db", db, "--dkim-config", unknown}, unknown + ":2: "},
	} {
		code, out, errs := runCmd(t, "", append(tc.args, pay...)...)
		if code != 2 || out != "" || !strings.Contains(errs, tc.want) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want 2 and %q", tc.name, code, out, errs, tc.want)
		}
	}
	if _, err := os.Stat(db); err == nil {
		t.Errorf("send with a bad --dkim-config created the store")
	}
}
