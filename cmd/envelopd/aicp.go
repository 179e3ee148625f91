package main

import (
	"context"
	"crypto/ed25519"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/envelopd/envelopd/protocols/tunnelsign"
)

// runAICP is "envelopd aicp sign --key FILE [--now RFC3339] [MSG.json|-]".
//
// It signs an AICP v0.1 message (aicp-v0.1.md §3) and prints it. Fields the
// message lacks are filled first: v ("0.1"), id ("msg_" + 32 random hex
// digits), timestamp (now, Unix seconds) and nonce (32 random hex digits).
// The signed message is then validated with the signer's own public key;
// problems are printed to standard error and the exit status is 1 (the
// signed message is still printed).
func runAICP(ctx context.Context, e *env) int {
	if len(e.args) == 0 || e.args[0] != "sign" {
		fmt.Fprintln(e.stderr, "usage: envelopd aicp sign --key FILE [--now RFC3339] [MSG.json|-]")
		return 2
	}
	fs := flag.NewFlagSet("envelopd aicp sign", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	keyFile := fs.String("key", "", "Ed25519 private key: PEM PKCS#8, or base64/hex 32-byte seed")
	nowFlag := fs.String("now", "", "the time to fill in and check against (RFC 3339); default now")
	args, err := parseArgs(fs, e.args[1:])
	if err != nil {
		return 2
	}
	if *keyFile == "" || len(args) > 1 {
		fmt.Fprintln(e.stderr, "usage: envelopd aicp sign --key FILE [--now RFC3339] [MSG.json|-]")
		return 2
	}
	now, err := parseNow(*nowFlag)
	if err != nil {
		return failed(e, "aicp sign", err)
	}
	priv, err := loadEd25519Key(*keyFile)
	if err != nil {
		return failed(e, "aicp sign", err)
	}
	doc, err := readArg(e, args)
	if err != nil {
		return failed(e, "aicp sign", err)
	}
	signed, probs, err := tunnelsign.SignAICP(doc, priv, now)
	if err != nil {
		fmt.Fprintf(e.stderr, "envelopd aicp sign: %v\n", err)
		return 1
	}
	fmt.Fprintf(e.stdout, "%s\n", signed)
	for _, p := range probs {
		fmt.Fprintf(e.stderr, "envelopd aicp sign: warning: %v\n", p)
	}
	if len(probs) > 0 {
		return 1
	}
	return 0
}

// parseNow reads an RFC 3339 --now flag; "" is the current time.
func parseNow(s string) (time.Time, error) {
	if s == "" {
		return time.Now(), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("--now: %w", err)
	}
	return t, nil
}

// readArg reads the one positional file argument, or standard input when
// there is none or it is "-".
func readArg(e *env, args []string) ([]byte, error) {
	if len(args) == 0 || args[0] == "-" {
		return io.ReadAll(io.LimitReader(e.stdin, 16<<20))
	}
	return os.ReadFile(args[0])
}

// loadEd25519Key reads an Ed25519 private key file (tunnelsign.LoadEd25519Key).
func loadEd25519Key(path string) (ed25519.PrivateKey, error) {
	return tunnelsign.LoadEd25519Key(path)
}
