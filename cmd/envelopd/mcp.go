package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/envelopd/envelopd/api"
	"github.com/envelopd/envelopd/dkim"
	"github.com/envelopd/envelopd/internal/secretfile"
	"github.com/envelopd/envelopd/mailin"
	"github.com/envelopd/envelopd/mailout"
	"github.com/envelopd/envelopd/mcp"
	"github.com/envelopd/envelopd/protocols/tunnelsign"
)

// mcpKeyEnv is the environment variable `envelopd mcp` reads an API key
// from (MCP client configs pass secrets as env).
const mcpKeyEnv = "ENVELOPD_API_KEY"

// mcpSignFlags are the tunnelled-protocol signing keys of the MCP sign
// tools (envelopd mcp, and serve's /mcp with the --mcp- prefix).
type mcpSignFlags struct {
	aicpKey, vacantKey string
}

func (m *mcpSignFlags) register(fs *flag.FlagSet, prefix string) {
	fs.StringVar(&m.aicpKey, prefix+"aicp-key", "", "Ed25519 key FILE the aicp_sign MCP tool signs with (as aicp sign --key)")
	fs.StringVar(&m.vacantKey, prefix+"vacant-key", "", "Ed25519 key FILE the vacant_sign MCP tool signs with (as vacant sign --key)")
}

func (m *mcpSignFlags) load(cfg *mcp.Config) error {
	for _, k := range []struct {
		path string
		dst  *ed25519.PrivateKey
	}{{m.aicpKey, &cfg.AICPKey}, {m.vacantKey, &cfg.VacantKey}} {
		if k.path == "" {
			continue
		}
		priv, err := tunnelsign.LoadEd25519Key(k.path)
		if err != nil {
			return err
		}
		*k.dst = priv
	}
	return nil
}

// runMCP is `envelopd mcp`: the MCP server over stdio. The
// client launches it and speaks JSON-RPC on its standard input and
// output; logs go to standard error.
//
// Authorisation: whoever can launch envelopd mcp on the database can read
// the database file itself, so the process needs no secret to act on the
// whole store — without a key it sees every inbox, like the CLI. An API
// key (--key-file, or $ENVELOPD_API_KEY) narrows it to the key's --inbox
// scope, exactly as over HTTP; a wrong or revoked key refuses to start.
//
// Mail is queued in the store; `envelopd serve` on the same database
// delivers it (its queue worker picks up entries of other processes
// within a second).
func runMCP(ctx context.Context, e *env) int {
	fs := newFlags(e, "mcp")
	db := fs.String("db", defaultDB, "SQLite database file or postgres:// URL (the one serve writes)")
	keyFile := fs.String("key-file", "", "API key FILE (envelopd apikey create): scope the session to its inboxes (or $"+mcpKeyEnv+")")
	relay := fs.Bool("relay", false, "relay mode, as serve --relay: inboxes are relay mailboxes at --domain")
	var domains multiFlag
	fs.Var(&domains, "domain", "inbox domain (repeatable; the first is create_inbox's default): serve's --domain in relay mode, its accepted domains otherwise")
	signLocal := fs.Bool("sign-local", false, "relay mode: DKIM-sign with the local domains' stored keys (as serve --sign-local)")
	var out outboundFlags
	fs.Var(&out.dkimKeys, "dkim-key", "DKIM private key PEM for outgoing mail (repeatable, paired with --dkim-selector)")
	fs.Var(&out.dkimSels, "dkim-selector", "DKIM selector for the --dkim-key at the same position")
	fs.StringVar(&out.dkimDomain, "dkim-domain", "", "DKIM signing domain (d=)")
	fs.StringVar(&out.dkimConfig, "dkim-config", "", dkimConfigUsage)
	var sign mcpSignFlags
	sign.register(fs, "")
	pos, err := parseArgs(fs, e.args)
	if err != nil || !noArgs(e, "mcp", pos) {
		return 2
	}
	fail := func(err error) int {
		return failed(e, "mcp", err)
	}
	if *relay && len(domains) == 0 {
		return fail(errors.New("--relay needs at least one --domain"))
	}
	if *signLocal && !*relay {
		return fail(errors.New("--sign-local needs --relay"))
	}
	st, ok := openExistingStore(ctx, e, "mcp", *db)
	if !ok {
		return 2
	}
	defer st.Close()
	key := os.Getenv(mcpKeyEnv)
	if *keyFile != "" {
		b, err := secretfile.Read(*keyFile)
		if err != nil {
			return fail(err)
		}
		key = strings.TrimSpace(string(b))
	}
	principal := &api.Principal{KeyID: "stdio"}
	if key != "" {
		if principal, err = api.CheckKey(ctx, st, key); err != nil {
			return fail(fmt.Errorf("API key: %w", err))
		}
	}
	base, err := out.signers()
	if err != nil {
		return fail(err)
	}
	for i, d := range domains {
		domains[i] = strings.ToLower(strings.TrimSuffix(d, "."))
	}
	local := map[string][]dkim.Signer{}
	if *signLocal {
		if local, err = mailin.LocalSigners(ctx, st, domains, dkim.NewStaticResolver()); err != nil {
			return fail(fmt.Errorf("local DKIM keys: %w", err))
		}
	}
	log := slog.New(slog.NewJSONHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	mailer := func(domain string) *mailout.Mailer {
		return &mailout.Mailer{Signers: append(slices.Clone(local[domain]), base...)}
	}
	svc, err := api.NewService(api.Config{Store: st, Relay: *relay, Domains: domains, Mailer: mailer, Logger: log})
	if err != nil {
		return fail(err)
	}
	cfg := mcp.Config{Service: svc, Principal: principal, ChainTip: st.ChainTip, Version: mcpVersion(), Logger: log}
	if err := sign.load(&cfg); err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	indexed := make(chan struct{})
	go func() { svc.Run(ctx, time.Second); close(indexed) }()
	defer func() { cancel(); <-indexed }() // before the store closes
	t := &sdk.IOTransport{Reader: readCloser{e.stdin}, Writer: writeCloser{e.stdout}}
	if err := mcp.NewServer(cfg).Run(ctx, t); err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) {
		return fail(err)
	}
	return 0
}

func mcpVersion() string {
	bi, _ := debug.ReadBuildInfo()
	return versionOf(bi).Version
}

// readCloser and writeCloser give the standard streams the Close the
// transport wants; the process closes the real ones.
type readCloser struct{ io.Reader }

func (readCloser) Close() error { return nil }

type writeCloser struct{ io.Writer }

func (writeCloser) Close() error { return nil }
