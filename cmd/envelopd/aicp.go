package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/envelopd/envelopd/internal/secretfile"
	"github.com/envelopd/envelopd/protocols/aicp"
	"github.com/envelopd/envelopd/protocols/canonjson"
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
		fmt.Fprintf(e.stderr, "envelopd aicp sign: %v\n", err)
		return 2
	}
	priv, err := loadEd25519Key(*keyFile)
	if err != nil {
		fmt.Fprintf(e.stderr, "envelopd aicp sign: %v\n", err)
		return 2
	}
	doc, err := readArg(e, args)
	if err != nil {
		fmt.Fprintf(e.stderr, "envelopd aicp sign: %v\n", err)
		return 2
	}
	m, err := canonjson.ParseObject(doc)
	if err != nil {
		fmt.Fprintf(e.stderr, "envelopd aicp sign: %v\n", err)
		return 1
	}
	fillAICP(m, now)
	filled, err := canonjson.JS(m)
	if err != nil {
		fmt.Fprintf(e.stderr, "envelopd aicp sign: %v\n", err)
		return 1
	}
	signed, err := aicp.Sign(filled, priv)
	if err != nil {
		fmt.Fprintf(e.stderr, "envelopd aicp sign: %v\n", err)
		return 1
	}
	fmt.Fprintf(e.stdout, "%s\n", signed)
	from, _ := m["from"].(string)
	r := aicp.Validate(signed, aicp.Options{Keys: map[string][]byte{from: priv.Public().(ed25519.PublicKey)}, Now: now})
	for _, p := range r.Errors {
		fmt.Fprintf(e.stderr, "envelopd aicp sign: warning: %v\n", p)
	}
	if !r.Valid {
		return 1
	}
	return 0
}

// fillAICP sets the fields a sender generates, when absent.
func fillAICP(m map[string]any, now time.Time) {
	if _, ok := m["v"]; !ok {
		m["v"] = "0.1"
	}
	if _, ok := m["id"]; !ok {
		m["id"] = "msg_" + randomHex(16)
	}
	if _, ok := m["timestamp"]; !ok {
		m["timestamp"] = now.Unix()
	}
	if _, ok := m["nonce"]; !ok {
		m["nonce"] = randomHex(16)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go ≥ 1.24)
	return hex.EncodeToString(b)
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

// errKeyFile is wrapped by loadEd25519Key errors.
var errKeyFile = errors.New("not an Ed25519 private key file")

// loadEd25519Key reads an Ed25519 private key file: PEM PKCS#8 ("PRIVATE
// KEY", as openssl genpkey -algorithm ed25519 writes it), or one line of
// base64 (std or url, padded or not) or hex holding the 32-byte seed or the
// 64-byte seed+public key.
//
// A file the group or others can read is refused (secretfile).
func loadEd25519Key(path string) (ed25519.PrivateKey, error) {
	b, err := secretfile.Read(path)
	if err != nil {
		return nil, err
	}
	if blk, _ := pem.Decode(b); blk != nil {
		k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w: %v", path, errKeyFile, err)
		}
		priv, ok := k.(ed25519.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("%s: %w: PKCS#8 key is %T", path, errKeyFile, k)
		}
		return priv, nil
	}
	s := strings.TrimSpace(string(b))
	raw, err := hex.DecodeString(s)
	if err != nil {
		enc := base64.RawStdEncoding
		if strings.ContainsAny(s, "-_") {
			enc = base64.RawURLEncoding
		}
		raw, err = enc.DecodeString(strings.TrimRight(s, "="))
	}
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s: %w: neither PEM, hex nor base64", path, errKeyFile)
	case len(raw) == ed25519.SeedSize:
		return ed25519.NewKeyFromSeed(raw), nil
	case len(raw) == ed25519.PrivateKeySize:
		priv := ed25519.NewKeyFromSeed(raw[:32])
		if !priv.Public().(ed25519.PublicKey).Equal(ed25519.PublicKey(raw[32:])) {
			return nil, fmt.Errorf("%s: %w: public half does not match the seed", path, errKeyFile)
		}
		return priv, nil
	default:
		return nil, fmt.Errorf("%s: %w: %d bytes, want a 32-byte seed", path, errKeyFile, len(raw))
	}
}
