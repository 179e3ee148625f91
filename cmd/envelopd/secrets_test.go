package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/envelopd/envelopd/mailin"
	"github.com/envelopd/envelopd/mailout"
)

// TestExecCleanEnvironment: the --exec agent got
// envelopd's whole environment, smarthost and IMAP passwords included. It
// now gets an allow-list (PATH, HOME, LANG, …), the variables named by
// --exec-env, and ENVELOPD_DB, ENVELOPD_MESSAGE_ID (the "id" of the JSON
// on its stdin), ENVELOPD_EVENT_ID and ENVELOPD_ATTEMPT.
func TestExecCleanEnvironment(t *testing.T) {
	// Not parallel: it sets the process environment poll runs with.
	t.Setenv(mailout.PasswordEnv, "smtp-secret-1")
	t.Setenv(mailin.IMAPPasswordEnv, "imap-secret-2")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "aws-secret-3")
	t.Setenv("ENVELOPD_OTHER", "own-4")
	t.Setenv("AGENT_API_KEY", "passed-5")
	t.Setenv("LC_TIME", "C")
	url, pwFile := startMemIMAP(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "envelopd.db")
	out := filepath.Join(dir, "out")
	if err := os.Mkdir(out, 0o700); err != nil {
		t.Fatal(err)
	}
	// One file per message: the environment, then the JSON it was given.
	cmd := `env > ` + out + `/env-$ENVELOPD_MESSAGE_ID; cat > ` + out + `/json-$ENVELOPD_MESSAGE_ID`
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), &env{args: []string{"poll", "--once", "--db", db, "--dkim-txt", os.DevNull,
		"--imap", url, "--imap-password-file", pwFile, "--exec", cmd, "--exec-env", "AGENT_API_KEY"},
		stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr})
	if code != 0 {
		t.Fatalf("poll exited %d: %s%s", code, stdout.String(), stderr.String())
	}
	envs, _ := filepath.Glob(filepath.Join(out, "env-*"))
	if n := acceptedCount(t, db); len(envs) != n || n == 0 {
		t.Fatalf("%d exec runs, want one per accepted mail (%d)", len(envs), n)
	}
	absDB, _ := filepath.Abs(db)
	for _, p := range envs {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		vars := map[string]string{}
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			k, v, _ := strings.Cut(l, "=")
			vars[k] = v
		}
		for _, secret := range []string{"smtp-secret-1", "imap-secret-2", "aws-secret-3", "own-4"} {
			if strings.Contains(string(b), secret) {
				t.Errorf("%s: the exec saw %q:\n%s", filepath.Base(p), secret, b)
			}
		}
		id := strings.TrimPrefix(filepath.Base(p), "env-")
		var view struct {
			ID json.Number `json:"id"`
		}
		j, _ := os.ReadFile(filepath.Join(out, "json-"+id))
		if err := json.Unmarshal(j, &view); err != nil || view.ID.String() != id {
			t.Errorf("ENVELOPD_MESSAGE_ID %s, but the JSON on stdin has id %s (%v)", id, view.ID, err)
		}
		for k, want := range map[string]string{
			"ENVELOPD_DB": absDB, "ENVELOPD_MESSAGE_ID": id, "ENVELOPD_ATTEMPT": "1",
			"AGENT_API_KEY": "passed-5", "LC_TIME": "C", "PATH": os.Getenv("PATH"),
		} {
			if vars[k] != want {
				t.Errorf("%s: %s=%q, want %q", filepath.Base(p), k, vars[k], want)
			}
		}
		if !strings.HasPrefix(vars["ENVELOPD_EVENT_ID"], "evt_") {
			t.Errorf("ENVELOPD_EVENT_ID=%q", vars["ENVELOPD_EVENT_ID"])
		}
		for k := range vars {
			// sh may add PWD, SHLVL and _ of its own.
			if !slices.Contains(mailin.ExecEnvAllowed, k) && !strings.HasPrefix(k, "LC_") && !slices.Contains([]string{
				"ENVELOPD_DB", "ENVELOPD_MESSAGE_ID", "ENVELOPD_EVENT_ID", "ENVELOPD_ATTEMPT", "AGENT_API_KEY", "PWD", "SHLVL", "_", "OLDPWD"}, k) {
				t.Errorf("%s: unexpected variable %s in the exec environment", filepath.Base(p), k)
			}
		}
	}
}

// TestExecEnvRefusesOwnSecrets: --exec-env cannot hand envelopd's own
// passwords to the agent.
func TestExecEnvRefusesOwnSecrets(t *testing.T) {
	t.Parallel()
	if !slices.Contains(mailin.ExecSecretEnv, mailout.PasswordEnv) || !slices.Contains(mailin.ExecSecretEnv, mailin.IMAPPasswordEnv) {
		t.Fatalf("ExecSecretEnv %v misses the smarthost or IMAP password variable", mailin.ExecSecretEnv)
	}
	db := filepath.Join(t.TempDir(), "e.db")
	for _, v := range mailin.ExecSecretEnv {
		code, _, stderr := runCmd(t, "", "serve", "--smtp", "127.0.0.1:0", "--db", db, "--exec", "true", "--exec-env", v)
		if code != 2 || !strings.Contains(stderr, "--exec-env "+v+": envelopd's own secret") {
			t.Errorf("--exec-env %s: exit %d, %q", v, code, stderr)
		}
	}
	if code, _, stderr := runCmd(t, "", "serve", "--smtp", "127.0.0.1:0", "--db", db, "--exec-env", "X"); code != 2 || !strings.Contains(stderr, "--exec-env needs --exec") {
		t.Errorf("--exec-env without --exec: exit %d, %q", code, stderr)
	}
	if _, err := os.Stat(db); err == nil {
		t.Errorf("a refused start created the database")
	}
}

// TestSecretFileModes: a password or key file the group or
// others can read is refused at start, naming the file and its mode, as
// ssh does; the same file at 0600 is accepted. Before, a world-readable
// --auth-file was used without complaint.
func TestSecretFileModes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	open := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pw := open("pw", "s3cret\n")
	auth := open("users", "alice:s3cret\n")
	key := open("key.pem", mustRead(t, dkimTestdata+"keys/ed25519.pem"))
	cert := filepath.Join(dir, "none.crt")
	db := filepath.Join(dir, "m.db")
	pay := []string{"--from", "a@alice.test", "--to", "b@example.test", "--type", "PAY", "--json", cliData + "pay.json"}
	for _, tc := range []struct {
		name string
		args []string
		file string
	}{
		{"serve --auth-file", []string{"serve", "--smtp", "127.0.0.1:0", "--db", db, "--auth-file", auth}, auth},
		{"serve --webhook-secret-file", []string{"serve", "--smtp", "127.0.0.1:0", "--db", db, "--webhook", "http://127.0.0.1:1/", "--webhook-secret-file", pw}, pw},
		{"serve --password-file", []string{"serve", "--smtp", "127.0.0.1:0", "--db", db, "--smtp-url", "smtp://u@127.0.0.1:1", "--password-file", pw}, pw},
		{"serve --dkim-key", []string{"serve", "--smtp", "127.0.0.1:0", "--db", db, "--dkim-key", key, "--dkim-selector", "s", "--dkim-domain", "d.test"}, key},
		{"serve --tls-key", []string{"serve", "--smtp", "127.0.0.1:0", "--db", db, "--tls-cert", cert, "--tls-key", key}, key},
		{"serve --relay --smarthost --password-file", []string{"serve", "--smtp", "127.0.0.1:0", "--db", db, "--relay", "--domain", "a.test", "--smarthost", "smtp://u@127.0.0.1:1", "--password-file", pw}, pw},
		{"poll --imap-password-file", []string{"poll", "--once", "--db", db, "--imap", "imap://u@127.0.0.1:1/INBOX", "--imap-password-file", pw}, pw},
		{"send --password-file", append([]string{"send", "--db", db, "--smtp-url", "smtp://u@127.0.0.1:1", "--password-file", pw}, pay...), pw},
		{"compose --dkim-key", append([]string{"compose", "--dkim-key", key, "--dkim-selector", "s", "--dkim-domain", "alice.test"}, pay...), key},
		{"mailbox add --password-file", []string{"mailbox", "add", "a@a.test", "--db", db, "--password-file", pw}, pw},
		{"dkim sign --key", []string{"dkim", "sign", "--domain", "d", "--selector", "s", "--key", key}, key},
		{"aicp sign --key", []string{"aicp", "sign", "--key", key}, key},
		{"vacant sign --key", []string{"vacant", "sign", "--key", key, "--to", strings.Repeat("ab", 32), "--seq", "1", "--text", "hi"}, key},
	} {
		code, _, stderr := runCmd(t, "", tc.args...)
		want := `permissions 0644 for "` + tc.file + `" are too open`
		if code != 2 || !strings.Contains(stderr, want) || !strings.Contains(stderr, "chmod 600 "+tc.file) {
			t.Errorf("%s: exit %d, stderr %q; want 2 and %q", tc.name, code, stderr, want)
		}
	}
	// The same files at 0600 are read (these commands then fail further on,
	// or succeed, but never for the mode).
	for _, p := range []string{pw, auth, key} {
		if err := os.Chmod(p, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if code, _, stderr := runCmd(t, "", "mailbox", "add", "a@a.test", "--db", db, "--password-file", pw); code != 0 {
		t.Errorf("mailbox add with a 0600 password file: exit %d, %s", code, stderr)
	}
	if code, _, stderr := runCmd(t, "", append([]string{"compose", "--dkim-key", key, "--dkim-selector", "s", "--dkim-domain", "alice.test"}, pay...)...); code != 0 {
		t.Errorf("compose with a 0600 key: exit %d, %s", code, stderr)
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
