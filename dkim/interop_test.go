package dkim

// Interop tests against independent DKIM implementations: dkimpy
// (python3-dkim, python3-nacl) and OpenDKIM 2.11 (opendkim, in its -t test
// mode with TestDNSData). They run only with ENVELOPD_INTEROP=1; then a
// missing program is a failure, not a skip.
//
// Cells not run, as OpenDKIM's own bugs (see the interop notes of the
// project, shared/interop/README.md):
//   - OpenDKIM-signed Ed25519 with simple header canonicalization
//     (simple/simple, simple/relaxed): OpenDKIM 2.11's signatures verify
//     nowhere, dkimpy included. Skipped by name in TestInteropOpenDKIMSigns.
//   - OpenDKIM and simple header canonicalization of oddly spaced header
//     fields ("Subject:  x", "Subject:x"): `opendkim -t` normalises the
//     space after the colon before hashing (test mode only), so its simple
//     header signatures of such messages fail everywhere (dkimpy too) and
//     it would mis-verify them. Skipped by name (opendkimBugs); envelopd
//     only signs relaxed/relaxed, so OpenDKIM never verifies such a cell.
// OpenDKIM reports only the first signature of a message, so envelopd's
// two-signature messages are checked with dkimpy only; OpenDKIM gets one
// message per algorithm.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// peer holds what the interop tests share: fresh keys published in a
// static key file, and the paths of the peer programs.
type peer struct {
	dir     string
	keys    string // static key file
	signers map[string]Signer
	pems    map[string]string // algo → PKCS#8 PEM file
	python  string
	script  string // testdata/dkim/dkimpy.py
}

var interopAlgos = []string{"rsa", "ed25519"}

var sigAlgo = map[string]string{"rsa": "rsa-sha256", "ed25519": "ed25519-sha256"}

var canons = []string{"relaxed/relaxed", "simple/simple", "relaxed/simple", "simple/relaxed"}

func newPeer(t *testing.T) *peer {
	t.Helper()
	if os.Getenv("ENVELOPD_INTEROP") != "1" {
		t.Skip("interop test: set ENVELOPD_INTEROP=1 (needs opendkim, python3-dkim, python3-nacl)")
	}
	p := &peer{dir: t.TempDir(), signers: map[string]Signer{}, pems: map[string]string{}}
	var txt strings.Builder
	txt.WriteString("# keys for the interop tests\n")
	for _, algo := range interopAlgos {
		k, err := GenerateKey(algo)
		if err != nil {
			t.Fatal(err)
		}
		s := Signer{Domain: "lab.test", Selector: algo + "1", Key: k}
		line, err := TXTRecord(s.Domain, s.Selector, k.Public())
		if err != nil {
			t.Fatal(err)
		}
		txt.WriteString(line + "\n")
		pemBytes, err := MarshalKeyPEM(k)
		if err != nil {
			t.Fatal(err)
		}
		p.pems[algo] = p.write(t, algo+".pem", pemBytes)
		p.signers[algo] = s
	}
	p.keys = p.write(t, "keys.txt", []byte(txt.String()))
	p.python = findPython(t)
	p.script, _ = filepath.Abs(testdata + "dkimpy.py")
	return p
}

func (p *peer) write(t *testing.T, name string, b []byte) string {
	t.Helper()
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// findPython returns a python3 that can import dkim and nacl: the Debian
// packages live in /usr/bin/python3's path, which a pyenv or venv python3
// first on PATH does not see. ENVELOPD_PYTHON overrides.
func findPython(t *testing.T) string {
	t.Helper()
	cands := []string{os.Getenv("ENVELOPD_PYTHON"), "/usr/bin/python3", "python3"}
	for _, c := range cands {
		if c == "" {
			continue
		}
		if err := exec.Command(c, "-c", "import dkim, nacl").Run(); err == nil {
			return c
		}
	}
	t.Fatal("no python3 with dkimpy and nacl (apt-get install python3-dkim python3-nacl, or set ENVELOPD_PYTHON)")
	return ""
}

func findOpenDKIM(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("opendkim"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/opendkim"); err == nil {
		return "/usr/sbin/opendkim"
	}
	t.Fatal("opendkim not found (apt-get install opendkim opendkim-tools)")
	return ""
}

// messages returns the sign corpus: the unsigned messages.
func messages(t *testing.T) map[string][]byte {
	t.Helper()
	files, _ := filepath.Glob(testdata + "sign/*.eml")
	if len(files) == 0 {
		t.Fatal("no messages")
	}
	m := map[string][]byte{}
	for _, f := range files {
		m[strings.TrimSuffix(filepath.Base(f), ".eml")] = readFile(t, f)
	}
	return m
}

func run(t *testing.T, name string, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// dkimpy runs dkimpy.py batch over cmds (argument lists) and returns one
// result line per command.
func (p *peer) dkimpy(t *testing.T, cmds [][]string) []string {
	t.Helper()
	var in strings.Builder
	for _, c := range cmds {
		in.WriteString(strings.Join(c, "\t") + "\n")
	}
	cmd := exec.Command(p.python, p.script, "batch")
	cmd.Stdin = strings.NewReader(in.String())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if err != nil || len(lines) != len(cmds) {
		t.Fatalf("dkimpy.py batch: %v, %d results for %d commands\n%s\n%s", err, len(lines), len(cmds), out, stderr.String())
	}
	return lines
}

// opendkimVerify reports whether OpenDKIM verifies the first signature.
func (p *peer) opendkimVerify(t *testing.T, msg []byte) (bool, string) {
	t.Helper()
	conf := p.write(t, "v.conf", []byte("Mode v\nTestDNSData file:"+p.keys+"\nSyslog no\nMinimumKeyBits 1024\n"))
	out, err := run(t, findOpenDKIM(t), "-x", conf, "-t", p.write(t, "verify.eml", msg))
	if err != nil {
		t.Fatalf("opendkim: %v: %s", err, out)
	}
	return strings.Contains(out, "succeeded"), out
}

func (p *peer) verifyEnvelopd(t *testing.T, msg []byte) []Result {
	t.Helper()
	r, err := LoadStaticResolver(p.keys)
	if err != nil {
		t.Fatal(err)
	}
	res, err := (&Verifier{Resolver: r}).Verify(context.Background(), msg)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestInteropEnvelopdSigns: envelopd-signed mail verifies with dkimpy
// (rsa, ed25519, both) and OpenDKIM (rsa, ed25519); a changed body line
// fails with both, so the checks are not vacuous.
func TestInteropEnvelopdSigns(t *testing.T) {
	p := newPeer(t)
	combos := []struct {
		name    string
		signers []Signer
	}{
		{"rsa", []Signer{p.signers["rsa"]}},
		{"ed25519", []Signer{p.signers["ed25519"]}},
		{"ed25519+rsa", []Signer{p.signers["ed25519"], p.signers["rsa"]}},
	}
	type cell struct {
		name     string
		signers  int
		msg, bad []byte
	}
	var cells []cell
	var cmds [][]string
	for name, raw := range messages(t) {
		for _, c := range combos {
			msg, err := Sign(raw, c.signers...)
			if err != nil {
				t.Fatal(err)
			}
			cl := cell{name: name + "/" + c.name, signers: len(c.signers), msg: msg, bad: tamper(msg)}
			file := strings.ReplaceAll(cl.name, "/", "_")
			cmds = append(cmds,
				[]string{"verify", p.keys, p.write(t, file+".eml", cl.msg)},
				[]string{"verify", p.keys, p.write(t, file+"-bad.eml", cl.bad)})
			cells = append(cells, cl)
		}
	}
	verdicts := p.dkimpy(t, cmds)
	for i, c := range cells {
		t.Run(c.name, func(t *testing.T) {
			want := strings.TrimSpace(strings.Repeat("pass ", c.signers))
			if got := verdicts[2*i]; got != want {
				t.Errorf("dkimpy: %q, want %q", got, want)
			}
			if got := verdicts[2*i+1]; strings.Contains(got, "pass") {
				t.Errorf("dkimpy passes a changed body: %q", got)
			}
			if c.signers == 1 {
				if ok, out := p.opendkimVerify(t, c.msg); !ok {
					t.Errorf("opendkim: %s", out)
				}
				if ok, out := p.opendkimVerify(t, c.bad); ok {
					t.Errorf("opendkim passes a changed body: %s", out)
				}
			}
		})
	}
}

// tamper adds a line at the start of the body (making one when there is
// none).
func tamper(msg []byte) []byte {
	if i := bytes.Index(msg, []byte("\r\n\r\n")); i >= 0 {
		return append(append(bytes.Clone(msg[:i+4]), "Inserted line.\r\n"...), msg[i+4:]...)
	}
	return append(bytes.Clone(msg), "\r\nInserted line.\r\n"...)
}

// TestInteropDkimpySigns: dkimpy-signed mail, rsa and ed25519, every
// canonicalization pair, verifies with envelopd.
func TestInteropDkimpySigns(t *testing.T) {
	p := newPeer(t)
	type cell struct{ name, algo, canon, out string }
	var cells []cell
	var cmds [][]string
	for name, raw := range messages(t) {
		in := p.write(t, name+".eml", raw)
		for _, algo := range interopAlgos {
			for _, canon := range canons {
				c := cell{name: fmt.Sprintf("%s/%s/%s", name, algo, canon), algo: algo, canon: canon}
				c.out = filepath.Join(p.dir, strings.ReplaceAll(c.name, "/", "_")+".signed")
				s := p.signers[algo]
				cmds = append(cmds, []string{"sign", p.pems[algo], s.Domain, s.Selector, sigAlgo[algo], canon, in, c.out})
				cells = append(cells, c)
			}
		}
	}
	results := p.dkimpy(t, cmds)
	for i, c := range cells {
		t.Run(c.name, func(t *testing.T) {
			if results[i] != "ok" {
				t.Fatalf("dkimpy sign: %s", results[i])
			}
			p.expectPass(t, readFile(t, c.out), c.algo, c.canon)
		})
	}
}

// TestInteropOpenDKIMSigns: OpenDKIM-signed mail, rsa and ed25519, every
// canonicalization pair, verifies with envelopd, except OpenDKIM's known bad
// cells (see the file comment).
func TestInteropOpenDKIMSigns(t *testing.T) {
	p := newPeer(t)
	opendkim := findOpenDKIM(t)
	for name, raw := range messages(t) {
		// OpenDKIM refuses a message whose body does not end in CRLF ("CRLF
		// at end of body missing"); on the wire every message does.
		raw = toCRLF(raw)
		in := p.write(t, name+".eml", raw)
		for _, algo := range interopAlgos {
			for _, canon := range canons {
				cellName := fmt.Sprintf("%s/%s/%s", name, algo, canon)
				t.Run(cellName, func(t *testing.T) {
					if why, ok := opendkimBugs[cellName]; ok {
						t.Skip(why)
					}
					if algo == "ed25519" && strings.HasPrefix(canon, "simple/") {
						t.Skip("OpenDKIM 2.11 bug: its Ed25519 signatures with simple header canonicalization verify nowhere")
					}
					s := p.signers[algo]
					conf := p.write(t, "s.conf", []byte(fmt.Sprintf(
						"Mode s\nDomain %s\nSelector %s\nKeyFile %s\nCanonicalization %s\nSignatureAlgorithm %s\nRequireSafeKeys no\nSyslog no\n",
						s.Domain, s.Selector, p.pems[algo], canon, sigAlgo[algo])))
					out, err := run(t, opendkim, "-x", conf, "-b", "s", "-t", in)
					i := strings.Index(out, "DKIM-Signature:")
					if err != nil || i < 0 {
						t.Fatalf("opendkim sign: %v: %s", err, out)
					}
					// The signature field, its line ends made CRLF exactly once.
					sig := strings.ReplaceAll(strings.TrimRight(out[i:], "\r\n"), "\r\n", "\n")
					sig = strings.ReplaceAll(sig, "\n", "\r\n") + "\r\n"
					p.expectPass(t, append([]byte(sig), raw...), algo, canon)
				})
			}
		}
	}
}

// opendkimBugs names the OpenDKIM signing cells not run (see the file
// comment): sign/case-and-repeats.eml has "subject:  folded", which
// `opendkim -t` mangles under simple header canonicalization (checked by
// hand: dkimpy rejects those signatures as well). The Ed25519 simple-header
// cells are skipped for every message, by rule, in the test.
var opendkimBugs = map[string]string{
	"case-and-repeats/rsa/simple/simple":  "opendkim -t bug: simple header canonicalization of an oddly spaced header field (test mode only)",
	"case-and-repeats/rsa/simple/relaxed": "opendkim -t bug: simple header canonicalization of an oddly spaced header field (test mode only)",
}

// expectPass checks that envelopd passes the one signature of msg, made with
// the right c=, and fails it once the body changes.
func (p *peer) expectPass(t *testing.T, msg []byte, algo, canon string) {
	t.Helper()
	fields, _ := headerFields(msg)
	if len(fields) == 0 || !strings.EqualFold(fields[0].name, "DKIM-Signature") {
		t.Fatalf("not signed: %.200q", msg)
	}
	if c := tags(fields[0].value)["c"]; c != canon && !(canon == "simple/simple" && c == "simple") {
		t.Errorf("peer signed with c=%s, want %s", c, canon)
	}
	res := p.verifyEnvelopd(t, msg)
	want := []Result{{Domain: "lab.test", Selector: algo + "1", Algorithm: sigAlgo[algo], Result: Pass}}
	if len(res) != 1 || res[0] != want[0] {
		t.Errorf("envelopd: %+v, want %+v", res, want)
	}
	if res := p.verifyEnvelopd(t, tamper(msg)); len(res) != 1 || res[0].Result != Fail {
		t.Errorf("envelopd on a changed body: %+v, want fail", res)
	}
}
