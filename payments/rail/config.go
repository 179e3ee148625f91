package rail

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/envelopd/envelopd/internal/secretfile"
)

// ErrConfig is wrapped by every error about the rail flags.
var ErrConfig = errors.New("rail_config")

// KindOf tells a chain's family from its Envelopay chain name: "solana",
// "solana-devnet" and "solana-testnet" are Solana, every other name is EVM.
func KindOf(chain string) Kind {
	switch strings.ToLower(strings.TrimSpace(chain)) {
	case "solana", "solana-devnet", "solana-testnet":
		return Solana
	}
	return EVM
}

// KnownChainIDs are the EIP-155 chain ids of the EVM chain names envelopd
// knows; a node answering eth_chainId with another id is refused.
var KnownChainIDs = map[string]uint64{
	"ethereum":     1,
	"optimism":     10,
	"polygon":      137,
	"base":         8453,
	"arbitrum":     42161,
	"base-sepolia": 84532,
	"sepolia":      11155111,
}

// Commitment is a Solana commitment level (Solana JSON-RPC "Configuring
// State Commitment"): confirmed (a supermajority voted on the block) or
// finalized (rooted).
type Commitment string

const (
	Confirmed Commitment = "confirmed"
	Finalized Commitment = "finalized"
)

// Confirmations is how deep a transaction must be before a check states
// anything but pending: Blocks for an EVM chain (the receipt's block counts
// as 1), Commitment for Solana.
type Confirmations struct {
	Blocks     uint64     `json:"blocks,omitempty"`
	Commitment Commitment `json:"commitment,omitempty"`
}

func (c Confirmations) String() string {
	if c.Commitment != "" {
		return string(c.Commitment)
	}
	return strconv.FormatUint(c.Blocks, 10)
}

// DefaultConfirmations is the depth used when --confirmations does not name
// the chain: 12 blocks on Ethereum and Sepolia (about 2.5 minutes, well
// past the reorgs seen since the merge), 64 on Polygon PoS (whose reorgs
// have been deeper), 10 on the OP-stack rollups and 20 on Arbitrum (fast
// blocks ordered by a sequencer), 12 on any other EVM name, finalized on
// Solana. docs/rails.md lists them.
func DefaultConfirmations(chain string) Confirmations {
	if KindOf(chain) == Solana {
		return Confirmations{Commitment: Finalized}
	}
	switch chain {
	case "polygon":
		return Confirmations{Blocks: 64}
	case "base", "base-sepolia", "optimism":
		return Confirmations{Blocks: 10}
	case "arbitrum":
		return Confirmations{Blocks: 20}
	}
	return Confirmations{Blocks: 12}
}

// maxConfirmations bounds --confirmations for EVM: a day of Ethereum blocks.
const maxConfirmations = 7200

// DefaultTimeout bounds one JSON-RPC call (connect, send, read the answer).
const DefaultTimeout = 10 * time.Second

// DefaultMaxResponse bounds one JSON-RPC answer. A payment's receipt with
// a few logs is a few KiB and a getTransaction a few tens of KiB; 4 MiB
// leaves room for busy transactions (thousands of logs) while a hostile or
// broken node cannot make a check hold more than that in memory.
const DefaultMaxResponse = 4 << 20

// Config is the rail configuration, parsed and checked. Endpoint URLs may
// hold secrets (API keys in the path or query): they are kept here and
// used to dial, never logged or printed (Redact gives the loggable form).
type Config struct {
	// Endpoints maps a chain name to its JSON-RPC URL.
	Endpoints Endpoints
	// Wallets maps a chain name to our receiving addresses (normalised).
	Wallets map[string][]string
	// Tokens are the --token additions (the registry adds the built-ins).
	Tokens []Token
	// Confirmations holds the --confirmations values; DepthFor applies
	// the defaults for chains it does not name.
	Confirmations map[string]Confirmations
	// Timeout bounds one JSON-RPC call; 0 means DefaultTimeout.
	Timeout time.Duration
	// MaxResponse bounds one JSON-RPC answer in bytes; 0 means DefaultMaxResponse.
	MaxResponse int64
}

// DepthFor is the confirmations a chain's checks require.
func (c *Config) DepthFor(chain string) Confirmations {
	if d, ok := c.Confirmations[chain]; ok {
		return d
	}
	return DefaultConfirmations(chain)
}

// WalletsFor is our configured receiving addresses on chain (--wallet).
func (c *Config) WalletsFor(chain string) []string { return c.Wallets[chain] }

// Flags holds the raw rail flags of one command. RegisterFlags makes it;
// Config parses it after the FlagSet has been parsed.
type Flags struct {
	rails, railFiles, wallets, tokens, confs listFlag
	timeout                                  time.Duration
}

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// RegisterFlags defines the rail flags on fs (one definition for serve and
// poll): --rail, --rail-file, --wallet, --token, --confirmations,
// --rail-timeout.
func RegisterFlags(fs *flag.FlagSet) *Flags {
	f := &Flags{}
	fs.Var(&f.rails, "rail", "`CHAIN=URL`: a JSON-RPC endpoint verifying payments on an Envelopay chain (repeatable; solana, solana-devnet, solana-testnet are Solana, other names EVM). A URL holding an API key belongs in --rail-file")
	fs.Var(&f.railFiles, "rail-file", "`FILE` of CHAIN=URL lines (# comments), like --rail, for URLs holding secrets; refused if the group or others may read it (chmod 600)")
	fs.Var(&f.wallets, "wallet", "`CHAIN=ADDRESS`: one of our receiving wallets on CHAIN (repeatable)")
	fs.Var(&f.tokens, "token", "`CHAIN:SYMBOL=ADDRESS[:DECIMALS]`: a token besides the built-in USDC (contract address or SPL mint; decimals default 6; repeatable)")
	fs.Var(&f.confs, "confirmations", "`CHAIN=N`: blocks an EVM payment must be deep (its own block counts as 1), or confirmed|finalized on Solana (defaults: ethereum, sepolia 12; base, base-sepolia, optimism 10; arbitrum 20; polygon 64; other EVM 12; Solana finalized)")
	fs.DurationVar(&f.timeout, "rail-timeout", DefaultTimeout, "bound on one JSON-RPC call to a rail")
	return f
}

// Config parses the flags (and reads the rail files) into a Config. An
// empty Config (no rails) is valid: payments then stay unverified.
func (f *Flags) Config() (*Config, error) {
	return ParseConfig(f.rails, f.railFiles, f.wallets, f.tokens, f.confs, f.timeout)
}

// ParseConfig builds a Config from flag values as given on the command
// line: rails and wallets "CHAIN=VALUE", railFiles paths, tokens
// "CHAIN:SYMBOL=ADDRESS[:DECIMALS]", confs "CHAIN=N|confirmed|finalized".
func ParseConfig(rails, railFiles, wallets, tokens, confs []string, timeout time.Duration) (*Config, error) {
	c := &Config{
		Endpoints:     Endpoints{},
		Wallets:       map[string][]string{},
		Confirmations: map[string]Confirmations{},
		Timeout:       timeout,
	}
	if timeout < 0 {
		return nil, fmt.Errorf("%w: --rail-timeout %s is negative", ErrConfig, timeout)
	}
	addRail := func(origin, line string) error {
		chain, u, err := splitChain(line)
		if err != nil {
			// Never quote the line: it may hold an API key.
			return fmt.Errorf("%w: %s: want CHAIN=URL, CHAIN of a-z, 0-9 and - only", ErrConfig, origin)
		}
		if err := checkURL(u); err != nil {
			return fmt.Errorf("%w: %s for %s: %v", ErrConfig, origin, chain, err)
		}
		if _, dup := c.Endpoints[chain]; dup {
			return fmt.Errorf("%w: %s: a rail for %s is already configured", ErrConfig, origin, chain)
		}
		c.Endpoints[chain] = u
		return nil
	}
	for _, r := range rails {
		// The line may hold a secret: errors quote the chain only.
		if err := addRail("--rail", r); err != nil {
			return nil, err
		}
	}
	for _, path := range railFiles {
		b, err := secretfile.Read(path)
		if err != nil {
			return nil, fmt.Errorf("%w: --rail-file: %w", ErrConfig, err)
		}
		for n, line := range strings.Split(string(b), "\n") {
			line = strings.TrimSpace(strings.TrimSuffix(line, "\r"))
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			if err := addRail(fmt.Sprintf("--rail-file %s line %d", path, n+1), line); err != nil {
				return nil, err
			}
		}
	}
	err := perChain("wallet", wallets, NormalizeAddress, func(chain, addr string) {
		if !contains(c.Wallets[chain], addr) {
			c.Wallets[chain] = append(c.Wallets[chain], addr)
		}
	})
	if err != nil {
		return nil, err
	}
	for _, s := range tokens {
		t, err := parseToken(s)
		if err != nil {
			return nil, fmt.Errorf("%w: --token %q: %v", ErrConfig, truncate(s, 160), err)
		}
		c.Tokens = append(c.Tokens, t)
	}
	if err := perChain("confirmations", confs, parseDepth, func(chain string, d Confirmations) { c.Confirmations[chain] = d }); err != nil {
		return nil, err
	}
	// The token table must build (symbols unique per chain, addresses valid).
	if _, err := NewRegistry(c.Tokens); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return c, nil
}

// perChain reads the CHAIN=VALUE values of the flag --name: parse checks
// each VALUE for its chain, keep takes what it returned. The first value
// that does not parse is the error (ErrConfig, quoting the chain only
// once the value is split: the value may be long).
func perChain[T any](name string, values []string, parse func(chain, v string) (T, error), keep func(chain string, t T)) error {
	for _, s := range values {
		chain, v, err := splitChain(s)
		if err != nil {
			return fmt.Errorf("%w: --%s %q: %v", ErrConfig, name, truncate(s, 120), err)
		}
		t, err := parse(chain, v)
		if err != nil {
			return fmt.Errorf("%w: --%s %s: %w", ErrConfig, name, chain, err)
		}
		keep(chain, t)
	}
	return nil
}

// Endpoints maps chain names to JSON-RPC URLs, which may hold API keys.
// Printed (fmt's %v, %s), logged (slog) or marshalled to JSON, it shows
// each URL in its Redact form only.
type Endpoints map[string]string

func (e Endpoints) redacted() map[string]string {
	out := make(map[string]string, len(e))
	for chain, u := range e {
		out[chain] = Redact(u)
	}
	return out
}

func (e Endpoints) String() string { return fmt.Sprint(e.redacted()) }

// GoString keeps %#v from printing the URLs too.
func (e Endpoints) GoString() string { return "rail.Endpoints" + e.String() }

// LogValue is the redacted form for log/slog.
func (e Endpoints) LogValue() slog.Value { return slog.AnyValue(e.redacted()) }

// MarshalJSON writes the redacted form.
func (e Endpoints) MarshalJSON() ([]byte, error) { return json.Marshal(e.redacted()) }

// Chains lists the chains with a rail, sorted.
func (c *Config) Chains() []string {
	out := make([]string, 0, len(c.Endpoints))
	for ch := range c.Endpoints {
		out = append(out, ch)
	}
	sort.Strings(out)
	return out
}

// splitChain splits "chain=value", lower-casing and checking the chain.
func splitChain(s string) (chain, value string, err error) {
	chain, value, ok := strings.Cut(s, "=")
	chain = strings.ToLower(strings.TrimSpace(chain))
	value = strings.TrimSpace(value)
	if !ok || value == "" {
		return "", "", errors.New("want CHAIN=VALUE")
	}
	if err := checkChainName(chain); err != nil {
		return "", "", err
	}
	return chain, value, nil
}

// checkChainName accepts an Envelopay chain name: 1 to 64 of [a-z0-9-].
func checkChainName(chain string) error {
	if chain == "" || len(chain) > 64 {
		return fmt.Errorf("chain name %q: want 1 to 64 characters of a-z, 0-9 and -", truncate(chain, 70))
	}
	for i := 0; i < len(chain); i++ {
		c := chain[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return fmt.Errorf("chain name %q: want a-z, 0-9 and - only", truncate(chain, 70))
		}
	}
	return nil
}

// checkURL accepts an absolute http or https URL with a host. Its error
// never quotes the URL.
func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return errors.New("not a URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return errors.New("want an http:// or https:// URL")
	}
	if u.Host == "" {
		return errors.New("URL has no host")
	}
	return nil
}

// Redact gives the form of an endpoint URL that may be logged: scheme and
// host only, "/…" standing for any path and query (where providers put
// API keys), user information dropped.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(unparsable URL)"
	}
	s := u.Scheme + "://" + u.Host
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		s += "/…"
	}
	return s
}

// parseToken parses CHAIN:SYMBOL=ADDRESS[:DECIMALS].
func parseToken(s string) (Token, error) {
	left, right, ok := strings.Cut(s, "=")
	if !ok {
		return Token{}, errors.New("want CHAIN:SYMBOL=ADDRESS[:DECIMALS]")
	}
	chain, sym, ok := strings.Cut(left, ":")
	chain = strings.ToLower(strings.TrimSpace(chain))
	sym = strings.TrimSpace(sym)
	if !ok || sym == "" {
		return Token{}, errors.New("want CHAIN:SYMBOL=ADDRESS[:DECIMALS]")
	}
	if err := checkChainName(chain); err != nil {
		return Token{}, err
	}
	if len(sym) > 32 || strings.ContainsAny(sym, " \t:=") {
		return Token{}, fmt.Errorf("symbol %q: want up to 32 characters without spaces, : or =", truncate(sym, 40))
	}
	addr, dec, hasDec := strings.Cut(strings.TrimSpace(right), ":")
	t := Token{Chain: chain, Symbol: strings.ToUpper(sym), Address: strings.TrimSpace(addr), Decimals: 6}
	if hasDec {
		n, err := strconv.Atoi(strings.TrimSpace(dec))
		if err != nil || n < 0 || n > maxDecimals {
			return Token{}, fmt.Errorf("decimals %q: want 0 to %d", truncate(dec, 20), maxDecimals)
		}
		t.Decimals = n
	}
	norm, err := NormalizeAddress(chain, t.Address)
	if err != nil {
		return Token{}, err
	}
	t.Address = norm
	return t, nil
}

func parseDepth(chain, v string) (Confirmations, error) {
	if KindOf(chain) == Solana {
		switch Commitment(strings.ToLower(v)) {
		case Confirmed:
			return Confirmations{Commitment: Confirmed}, nil
		case Finalized:
			return Confirmations{Commitment: Finalized}, nil
		}
		return Confirmations{}, fmt.Errorf("%q: want confirmed or finalized on Solana", truncate(v, 20))
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n < 1 || n > maxConfirmations {
		return Confirmations{}, fmt.Errorf("%q: want a block count from 1 to %d", truncate(v, 20), maxConfirmations)
	}
	return Confirmations{Blocks: n}, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
