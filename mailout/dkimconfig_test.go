package mailout

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/envelopd/envelopd/internal/testcorpus"
)

const dkimConfigData = "../testdata/dkimconfig/"

// TestParseDKIMConfig: each testdata/dkimconfig/NAME.conf has NAME.want:
// one line per signer ("LINE DOMAIN SELECTOR KEY"), or "error TEXT" where
// TEXT must appear in the error.
func TestParseDKIMConfig(t *testing.T) {
	testcorpus.Run(t, dkimConfigData+"*.conf", ErrDKIMConfig, func(in []byte) (string, error) {
		got, err := ParseDKIMConfig("", bytes.NewReader(in))
		var b strings.Builder
		for _, c := range got {
			fmt.Fprintf(&b, "%d %s %s %s\n", c.Line, c.Domain, c.Selector, c.Key)
		}
		return b.String(), err
	})
}

// TestLoadDKIMConfig: relative key paths are resolved against the config
// file's directory; errors name the file and line.
func TestLoadDKIMConfig(t *testing.T) {
	keys, err := filepath.Abs("../testdata/dkim/keys")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "k"), 0o700); err != nil {
		t.Fatal(err)
	}
	ed, _ := os.ReadFile(filepath.Join(keys, "ed25519.pem"))
	if err := os.WriteFile(filepath.Join(dir, "k", "ed.pem"), ed, 0o600); err != nil {
		t.Fatal(err)
	}
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	rsa, _ := os.ReadFile(filepath.Join(keys, "rsa2048-pkcs8.pem"))
	if err := os.WriteFile(filepath.Join(dir, "k", "rsa.pem"), rsa, 0o600); err != nil {
		t.Fatal(err)
	}
	weak, _ := os.ReadFile(filepath.Join(keys, "rsa512.pem"))
	if err := os.WriteFile(filepath.Join(dir, "k", "weak.pem"), weak, 0o600); err != nil {
		t.Fatal(err)
	}
	good := write("good.conf", "domain=Agents.Test selector=ed1 key=k/ed.pem\ndomain=agents.test selector=rsa1 key="+filepath.Join(dir, "k", "rsa.pem")+"\n")
	ss, err := LoadDKIMConfig(good)
	if err != nil {
		t.Fatal(err)
	}
	if len(ss) != 2 || ss[0].Domain != "agents.test" || ss[0].Selector != "ed1" || ss[1].Selector != "rsa1" || ss[0].Key == nil || ss[1].Key == nil {
		t.Fatalf("signers %+v", ss)
	}
	for _, tc := range []struct{ name, text, want string }{
		{"missing-key-file", "# c\ndomain=a.test selector=s key=nope.pem\n", ":2: bad DKIM config: "},
		{"bad-key", "domain=a.test selector=s key=k/weak.pem\n", ":1: bad DKIM config: dkim: key " + filepath.Join(dir, "k", "weak.pem") + ": RSA key shorter than 1024 bits"},
		{"world-readable-key", "domain=a.test selector=s key=" + filepath.Join(keys, "rsa512.pem") + "\n", ":1: bad DKIM config: dkim: key " + filepath.Join(keys, "rsa512.pem") + ": secret_file_too_open: permissions 0644"},
		{"syntax", "\n\ndomain=a.test\n", ":3: bad DKIM config: missing selector=, key="},
		{"no-signer", "# only a comment\n", "no signer"},
	} {
		p := write(tc.name+".conf", tc.text)
		_, err := LoadDKIMConfig(p)
		if !errors.Is(err, ErrDKIMConfig) || !strings.HasPrefix(err.Error(), p) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want ErrDKIMConfig starting with %s, containing %q", tc.name, err, p, tc.want)
		}
	}
	if _, err := LoadDKIMConfig(filepath.Join(dir, "absent.conf")); !errors.Is(err, ErrDKIMConfig) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("absent file: %v", err)
	}
}

func FuzzParseDKIMConfig(f *testing.F) {
	files, _ := filepath.Glob(dkimConfigData + "*.conf")
	for _, file := range files {
		b, _ := os.ReadFile(file)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := ParseDKIMConfig("fuzz.conf", bytes.NewReader(b))
		if err != nil {
			if !errors.Is(err, ErrDKIMConfig) || !strings.HasPrefix(err.Error(), "fuzz.conf:") {
				t.Fatalf("error %v is not ErrDKIMConfig naming the file", err)
			}
			return
		}
		seen := map[string]bool{}
		for _, c := range got {
			if c.Line < 1 || c.Key == "" || !dnsName(c.Domain) || !dnsName(c.Selector) || c.Domain != strings.ToLower(c.Domain) ||
				strings.ContainsAny(c.Key, " \t\r\n") || seen[c.Domain+" "+c.Selector] {
				t.Fatalf("accepted %+v", c)
			}
			seen[c.Domain+" "+c.Selector] = true
		}
	})
}
