package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/envelopd/envelopd/dkim"
)

const dkimTestdata = "../../testdata/dkim/"

// dkimRun runs `envelopd ARGS...` with stdin and returns the exit status,
// stdout and stderr.
func dkimRun(t *testing.T, stdin []byte, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), &env{args: args, stdin: bytes.NewReader(stdin), stdout: &out, stderr: &errb})
	return code, out.String(), errb.String()
}

// TestDKIMVerifyCorpus runs `envelopd dkim verify` over the verify corpus
// of package dkim: same results, exit 0 exactly when all pass.
func TestDKIMVerifyCorpus(t *testing.T) {
	files, _ := filepath.Glob(dkimTestdata + "verify/*.eml")
	if len(files) == 0 {
		t.Fatal("no cases")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			wantJSON, err := os.ReadFile(strings.TrimSuffix(f, ".eml") + ".json")
			if err != nil {
				t.Fatal(err)
			}
			var want []dkim.Result
			if err := json.Unmarshal(wantJSON, &want); err != nil {
				t.Fatal(err)
			}
			code, stdout, stderr := dkimRun(t, nil, "dkim", "verify", "--dkim-txt", dkimTestdata+"keys.txt", f)
			var got struct {
				DKIM []dkim.Result `json:"dkim"`
			}
			if err := json.Unmarshal([]byte(stdout), &got); err != nil {
				t.Fatalf("stdout %q: %v (stderr %q)", stdout, err, stderr)
			}
			if !reflect.DeepEqual(got.DKIM, want) {
				t.Errorf("got %s", stdout)
			}
			wantCode := 1
			if dkim.AllPass(want) {
				wantCode = 0
			}
			if code != wantCode {
				t.Errorf("exit %d, want %d", code, wantCode)
			}
		})
	}
}

func TestDKIMVerifyOutput(t *testing.T) {
	raw, err := os.ReadFile(dkimTestdata + "verify/rfc6376-c.eml")
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, _ := dkimRun(t, raw, "dkim", "verify", "-", "--dkim-txt", dkimTestdata+"keys.txt")
	want := `{"dkim":[{"domain":"example.com","selector":"brisbane","algorithm":"rsa-sha256","result":"pass","error":""}]}` + "\n"
	if code != 0 || stdout != want {
		t.Errorf("exit %d, stdout %q\nwant %q", code, stdout, want)
	}
	code, stdout, _ = dkimRun(t, []byte("From: a@lab.test\r\n\r\nhi\r\n"), "dkim", "verify", "--dkim-txt", dkimTestdata+"keys.txt")
	if code != 0 || stdout != `{"dkim":[]}`+"\n" {
		t.Errorf("unsigned: exit %d, stdout %q", code, stdout)
	}
}

func TestDKIMUsage(t *testing.T) {
	dir := t.TempDir()
	weak := privateCopy(t, dkimTestdata+"keys/rsa512.pem")
	for _, tc := range []struct {
		name string
		args []string
		code int
		err  string
	}{
		{"no verb", []string{"dkim"}, 2, "usage:"},
		{"unknown verb", []string{"dkim", "frobnicate"}, 2, `unknown subcommand "frobnicate"`},
		{"help", []string{"dkim", "help"}, 0, ""},
		{"bad flag", []string{"dkim", "verify", "--nope"}, 2, "flag provided but not defined"},
		{"missing message", []string{"dkim", "verify", "--dkim-txt", dkimTestdata + "keys.txt", dir + "/none.eml"}, 2, "no such file"},
		{"missing key file", []string{"dkim", "verify", "--dkim-txt", dir + "/none.txt"}, 2, "no such file"},
		{"bad key file", []string{"dkim", "verify", "--dkim-txt", dkimTestdata + "static/no-value.txt"}, 2, "line 2"},
		{"two messages", []string{"dkim", "verify", "--dkim-txt", dkimTestdata + "keys.txt", "a", "b"}, 2, "one message at a time"},
		{"keygen no out", []string{"dkim", "keygen", "--domain", "d", "--selector", "s"}, 2, "required"},
		{"keygen bad algo", []string{"dkim", "keygen", "--domain", "d", "--selector", "s", "--algo", "dsa", "--out", dir + "/k"}, 2, "unknown key algorithm"},
		{"sign no key", []string{"dkim", "sign", "--domain", "d", "--selector", "s"}, 2, "one --selector per --key"},
		{"sign selectors mismatch", []string{"dkim", "sign", "--domain", "d", "--selector", "s", "--key", "k1", "--key", "k2"}, 2, "one --selector per --key"},
		{"sign domains mismatch", []string{"dkim", "sign", "--domain", "d", "--domain", "d2", "--domain", "d3", "--selector", "s", "--key", "k1", "--selector", "s2", "--key", "k2"}, 2, "one --domain or one per --key"},
		{"sign bad key", []string{"dkim", "sign", "--domain", "d", "--selector", "s", "--key", weak}, 2, "shorter than 1024 bits"},
		// testdata files are 0644 (git keeps no other mode): refused as ssh does.
		{"sign world-readable key", []string{"dkim", "sign", "--domain", "d", "--selector", "s", "--key", dkimTestdata + "keys/ed25519.pem"}, 2,
			`secret_file_too_open: permissions 0644 for "` + dkimTestdata + `keys/ed25519.pem" are too open`},
	} {
		code, _, stderr := dkimRun(t, nil, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.err) {
			t.Errorf("%s: exit %d, stderr %q; want %d, %q", tc.name, code, stderr, tc.code, tc.err)
		}
	}
}

// TestDKIMKeygenSignVerify: keygen rsa and ed25519, sign with both, verify
// with the printed TXT lines as the key file.
func TestDKIMKeygenSignVerify(t *testing.T) {
	dir := t.TempDir()
	var txt strings.Builder
	for _, algo := range []string{"rsa", "ed25519"} {
		out := filepath.Join(dir, algo+".pem")
		code, stdout, stderr := dkimRun(t, nil, "dkim", "keygen", "--domain", "lab.test", "--selector", algo+"1", "--algo", algo, "--out", out)
		if code != 0 {
			t.Fatalf("keygen %s: exit %d: %s", algo, code, stderr)
		}
		if want := algo + "1._domainkey.lab.test v=DKIM1; k=" + algo + "; p="; !strings.HasPrefix(stdout, want) || !strings.HasSuffix(stdout, "\n") {
			t.Errorf("keygen %s printed %q, want %q...", algo, stdout, want)
		}
		txt.WriteString(stdout)
		st, err := os.Stat(out)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("key file mode %v, %v; want 0600", st.Mode().Perm(), err)
		}
		if code, _, stderr := dkimRun(t, nil, "dkim", "keygen", "--domain", "lab.test", "--selector", "x", "--algo", algo, "--out", out); code != 2 || !strings.Contains(stderr, "exists") {
			t.Errorf("keygen over an existing key: exit %d, %q", code, stderr)
		}
	}
	keys := filepath.Join(dir, "keys.txt")
	if err := os.WriteFile(keys, []byte(txt.String()), 0o644); err != nil {
		t.Fatal(err)
	}

	msg, err := os.ReadFile(dkimTestdata + "sign/envelopay-lf.eml")
	if err != nil {
		t.Fatal(err)
	}
	code, signed, stderr := dkimRun(t, msg, "dkim", "sign", "--domain", "lab.test",
		"--selector", "rsa1", "--key", filepath.Join(dir, "rsa.pem"),
		"--key", filepath.Join(dir, "ed25519.pem"), "--selector", "ed25519"+"1", "-")
	if code != 0 {
		t.Fatalf("sign: exit %d: %s", code, stderr)
	}
	if !strings.HasPrefix(signed, "DKIM-Signature:") || strings.Count(signed, "DKIM-Signature:") != 2 {
		t.Fatalf("signed message starts %.80q", signed)
	}
	code, stdout, stderr := dkimRun(t, []byte(signed), "dkim", "verify", "--dkim-txt", keys)
	var got struct{ DKIM []dkim.Result }
	json.Unmarshal([]byte(stdout), &got)
	want := []dkim.Result{
		{Domain: "lab.test", Selector: "rsa1", Algorithm: "rsa-sha256", Result: "pass"},
		{Domain: "lab.test", Selector: "ed255191", Algorithm: "ed25519-sha256", Result: "pass"},
	}
	if code != 0 || !reflect.DeepEqual(got.DKIM, want) {
		t.Errorf("verify: exit %d, %s %s", code, stdout, stderr)
	}

	// A message that cannot be signed (no From) is exit 1.
	code, _, stderr = dkimRun(t, []byte("To: b@lab.test\n\nhi\n"), "dkim", "sign", "--domain", "lab.test", "--selector", "rsa1", "--key", filepath.Join(dir, "rsa.pem"))
	if code != 1 || !strings.Contains(stderr, "no From") {
		t.Errorf("sign without From: exit %d, %q", code, stderr)
	}
}

// privateCopy copies a testdata key (0644: git keeps no other mode) to a
// 0600 file, the mode envelopd requires of a key file.
func privateCopy(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), filepath.Base(path))
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
