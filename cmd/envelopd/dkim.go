package main

import (
	"context"
	"crypto"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/envelopd/envelopd/dkim"
	"github.com/envelopd/envelopd/internal/secretfile"
)

const dkimUsage = `usage:
  envelopd dkim keygen --domain D --selector S --algo rsa|ed25519 --out KEY.pem
  envelopd dkim sign --domain D --selector S --key KEY.pem [--selector S2 --key KEY2.pem] [MSG|-]
  envelopd dkim verify [--dkim-txt FILE] [MSG|-]
`

// runDKIM dispatches the dkim subcommands. Exit status: 0 success (verify:
// every signature passes, or there is none), 1 the message was processed
// but failed (verify: a signature did not pass; sign: the message cannot be
// signed), 2 usage or I/O error.
func runDKIM(ctx context.Context, e *env) int {
	if len(e.args) == 0 {
		fmt.Fprint(e.stderr, dkimUsage)
		return 2
	}
	switch e.args[0] {
	case "keygen":
		return dkimKeygen(e)
	case "sign":
		return dkimSign(e)
	case "verify":
		return dkimVerify(ctx, e)
	case "help", "-h", "--help":
		fmt.Fprint(e.stdout, dkimUsage)
		return 0
	default:
		fmt.Fprintf(e.stderr, "envelopd dkim: unknown subcommand %q\n%s", e.args[0], dkimUsage)
		return 2
	}
}

// dkimList is a repeatable string flag.
type dkimList []string

func (l *dkimList) String() string     { return strings.Join(*l, ",") }
func (l *dkimList) Set(v string) error { *l = append(*l, v); return nil }

// dkimParse parses flags that may come before or after the positional
// arguments, which it returns.
func dkimParse(e *env, name string, define func(fs *flag.FlagSet)) ([]string, bool) {
	fs := flag.NewFlagSet("envelopd dkim "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), dkimUsage+"\nflags of dkim "+name+":\n")
		fs.PrintDefaults()
	}
	define(fs)
	args := e.args[1:]
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, false
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, true
		}
		pos, args = append(pos, args[0]), args[1:]
	}
}

// dkimInput reads the message: the file named by the only positional
// argument, or standard input for none or "-".
func dkimInput(e *env, name string, pos []string) ([]byte, bool) {
	var b []byte
	var err error
	switch {
	case len(pos) > 1:
		fmt.Fprintf(e.stderr, "envelopd dkim %s: one message at a time\n%s", name, dkimUsage)
		return nil, false
	case len(pos) == 0 || pos[0] == "-":
		b, err = io.ReadAll(e.stdin)
	default:
		b, err = os.ReadFile(pos[0])
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "envelopd dkim %s: %v\n", name, err)
		return nil, false
	}
	return b, true
}

func dkimKeygen(e *env) int {
	var domain, selector, algo, out string
	pos, ok := dkimParse(e, "keygen", func(fs *flag.FlagSet) {
		fs.StringVar(&domain, "domain", "", "signing domain (d=)")
		fs.StringVar(&selector, "selector", "", "selector (s=)")
		fs.StringVar(&algo, "algo", "ed25519", "key algorithm: rsa (2048-bit) or ed25519")
		fs.StringVar(&out, "out", "", "private key file to create (PKCS#8 PEM, mode 0600)")
	})
	if !ok {
		return 2
	}
	if len(pos) > 0 || domain == "" || selector == "" || out == "" {
		fmt.Fprintf(e.stderr, "envelopd dkim keygen: --domain, --selector and --out are required\n%s", dkimUsage)
		return 2
	}
	key, err := dkim.GenerateKey(algo)
	if err != nil {
		return failed(e, "dkim keygen", err)
	}
	txt, err := dkim.TXTRecord(domain, selector, key.Public())
	if err != nil {
		return failed(e, "dkim keygen", err)
	}
	pemBytes, err := dkim.MarshalKeyPEM(key)
	if err != nil {
		return failed(e, "dkim keygen", err)
	}
	// O_EXCL: never overwrite a key that may already be published.
	f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return failed(e, "dkim keygen", err)
	}
	if _, err := f.Write(pemBytes); err != nil {
		f.Close()
		return failed(e, "dkim keygen", err)
	}
	if err := f.Close(); err != nil {
		return failed(e, "dkim keygen", err)
	}
	fmt.Fprintln(e.stdout, txt)
	return 0
}

func dkimSign(e *env) int {
	var domains, selectors, keys dkimList
	pos, ok := dkimParse(e, "sign", func(fs *flag.FlagSet) {
		fs.Var(&domains, "domain", "signing domain (d=); once for all keys, or once per key")
		fs.Var(&selectors, "selector", "selector (s=), one per --key, in the same order")
		fs.Var(&keys, "key", "private key PEM file (RSA or Ed25519); repeat for several signatures")
	})
	if !ok {
		return 2
	}
	if len(keys) == 0 || len(selectors) != len(keys) || !(len(domains) == 1 || len(domains) == len(keys)) {
		fmt.Fprintf(e.stderr, "envelopd dkim sign: give one --selector per --key, and one --domain or one per --key\n%s", dkimUsage)
		return 2
	}
	signers := make([]dkim.Signer, len(keys))
	for i, path := range keys {
		k, err := loadSecretKey(path)
		if err != nil {
			return failed(e, "dkim sign", err)
		}
		d := domains[0]
		if len(domains) > 1 {
			d = domains[i]
		}
		signers[i] = dkim.Signer{Domain: d, Selector: selectors[i], Key: k}
	}
	raw, ok := dkimInput(e, "sign", pos)
	if !ok {
		return 2
	}
	out, err := dkim.Sign(raw, signers...)
	if err != nil {
		fmt.Fprintf(e.stderr, "envelopd dkim sign: %v\n", err)
		return 1
	}
	if _, err := e.stdout.Write(out); err != nil {
		return 2
	}
	return 0
}

// dkimOutput is what `envelopd dkim verify` prints.
type dkimOutput struct {
	DKIM []dkim.Result `json:"dkim"`
}

func dkimVerify(ctx context.Context, e *env) int {
	var keyFile string
	pos, ok := dkimParse(e, "verify", func(fs *flag.FlagSet) {
		fs.StringVar(&keyFile, "dkim-txt", "", "static key file (name TXT-value per line) instead of DNS")
	})
	if !ok {
		return 2
	}
	var resolver dkim.Resolver = dkim.NewDNSResolver(5*time.Second, 5*time.Minute)
	if keyFile != "" {
		r, err := dkim.LoadStaticResolver(keyFile)
		if err != nil {
			return failed(e, "dkim verify", err)
		}
		resolver = r
	}
	raw, ok := dkimInput(e, "verify", pos)
	if !ok {
		return 2
	}
	results, err := (&dkim.Verifier{Resolver: resolver}).Verify(ctx, raw)
	if err != nil {
		return failed(e, "dkim verify", err)
	}
	enc := json.NewEncoder(e.stdout)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(dkimOutput{DKIM: results}); err != nil {
		return 2
	}
	if !dkim.AllPass(results) {
		return 1
	}
	return 0
}

// loadSecretKey is dkim.LoadKey for a key file the group or others may not
// read (secretfile).
func loadSecretKey(path string) (crypto.Signer, error) {
	b, err := secretfile.Read(path)
	if err != nil {
		return nil, &dkim.KeyError{Path: path, Err: err}
	}
	k, err := dkim.ParseKey(b)
	if err != nil {
		return nil, &dkim.KeyError{Path: path, Err: err}
	}
	return k, nil
}
