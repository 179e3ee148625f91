package rail

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/envelopd/envelopd/internal/secretfile"
)

func TestRegisterFlags(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "rails")
	os.WriteFile(file, []byte("# providers\n\nethereum = https://eth.example/v2/KEY\r\nsolana=https://sol.example/?api-key=KEY\n"), 0o600)
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	f := RegisterFlags(fs)
	err := fs.Parse([]string{
		"--rail", "Base=https://base.example",
		"--rail-file", file,
		"--wallet", "base=0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
		"--wallet", "BASE=0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed", // the same wallet
		"--wallet", "solana=CiQV9cJ3sZdcSWuTYyKXFNVDuyLn821552xJg9DuAw6v",
		"--token", "base:dai=0x50c5725949A6F0c72E6C4a641F24049A917DB0Cb:18",
		"--token", "solana:BONK=DezXAZ8z7PnrnRJjz3wXBoRgixCa6xjnB7YaB1pPB263:5",
		"--confirmations", "base=3",
		"--confirmations", "solana=confirmed",
		"--rail-timeout", "3s",
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := f.Config()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.Chains(), ","); got != "base,ethereum,solana" {
		t.Errorf("chains = %s", got)
	}
	if cfg.Endpoints["ethereum"] != "https://eth.example/v2/KEY" {
		t.Errorf("ethereum endpoint = %q", cfg.Endpoints["ethereum"])
	}
	if w := cfg.WalletsFor("base"); len(w) != 1 || w[0] != "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed" {
		t.Errorf("base wallets = %v", w)
	}
	if w := cfg.WalletsFor("solana"); len(w) != 1 || w[0] != "CiQV9cJ3sZdcSWuTYyKXFNVDuyLn821552xJg9DuAw6v" {
		t.Errorf("solana wallets = %v", w)
	}
	for chain, want := range map[string]string{"base": "3", "solana": "confirmed", "ethereum": "12", "polygon": "64", "arbitrum": "20", "optimism": "10", "solana-devnet": "finalized", "dev": "12"} {
		if got := cfg.DepthFor(chain).String(); got != want {
			t.Errorf("depth %s = %s, want %s", chain, got, want)
		}
	}
	if cfg.Timeout != 3*time.Second {
		t.Errorf("timeout = %s", cfg.Timeout)
	}
	reg, err := NewRegistry(cfg.Tokens)
	if err != nil {
		t.Fatal(err)
	}
	if tok, ok := reg.Lookup("base", "DAI"); !ok || tok.Decimals != 18 || tok.Address != "0x50c5725949a6f0c72e6c4a641f24049a917db0cb" {
		t.Errorf("DAI = %+v %v", tok, ok)
	}
	if tok, ok := reg.Lookup("solana", "bonk"); !ok || tok.Decimals != 5 || tok.Address != "DezXAZ8z7PnrnRJjz3wXBoRgixCa6xjnB7YaB1pPB263" {
		t.Errorf("BONK = %+v %v", tok, ok)
	}
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	open := filepath.Join(dir, "open")
	os.WriteFile(open, []byte("base=https://base.example/"+fakeSecret+"\n"), 0o644)
	badLine := filepath.Join(dir, "bad")
	os.WriteFile(badLine, []byte("https://base.example/"+fakeSecret+"?k=v\n"), 0o600)
	for _, tc := range []struct {
		name                                 string
		rails, files, wallets, tokens, confs []string
		want                                 string
	}{
		{name: "rail without chain", rails: []string{"https://x.example/" + fakeSecret}, want: "--rail: want CHAIN=URL"},
		{name: "rail with = in query but no chain", rails: []string{"https://x.example/" + fakeSecret + "?k=v"}, want: "--rail: want CHAIN=URL"},
		{name: "rail not http", rails: []string{"base=ftp://x.example/" + fakeSecret}, want: "want an http:// or https:// URL"},
		{name: "rail twice", rails: []string{"base=https://a.example", "base=https://b.example"}, want: "a rail for base is already configured"},
		{name: "rail file too open", files: []string{open}, want: secretfile.ErrTooOpen.Error()},
		{name: "rail file bad line", files: []string{badLine}, want: "line 1: want CHAIN=URL"},
		{name: "rail file missing", files: []string{filepath.Join(dir, "nope")}, want: "no such file"},
		{name: "wallet EVM bad", wallets: []string{"base=0x1234"}, want: "bad_address"},
		{name: "wallet Solana bad", wallets: []string{"solana=0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"}, want: "not a Solana address"},
		{name: "wallet chain name", wallets: []string{"Base Mainnet=0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"}, want: "chain name"},
		{name: "token without symbol", tokens: []string{"base=0x50c5725949A6F0c72E6C4a641F24049A917DB0Cb"}, want: "want CHAIN:SYMBOL=ADDRESS"},
		{name: "token decimals", tokens: []string{"base:DAI=0x50c5725949A6F0c72E6C4a641F24049A917DB0Cb:99"}, want: "want 0 to 36"},
		{name: "token native symbol", tokens: []string{"base:ETH=0x50c5725949A6F0c72E6C4a641F24049A917DB0Cb"}, want: "native coin"},
		{name: "token symbol twice", tokens: []string{"base:DAI=0x50c5725949A6F0c72E6C4a641F24049A917DB0Cb", "base:dai=0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"}, want: "given twice"},
		{name: "confirmations zero", confs: []string{"base=0"}, want: "want a block count from 1 to 7200"},
		{name: "confirmations word on EVM", confs: []string{"base=finalized"}, want: "want a block count"},
		{name: "confirmations number on Solana", confs: []string{"solana=32"}, want: "want confirmed or finalized"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig(tc.rails, tc.files, tc.wallets, tc.tokens, tc.confs, 0)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
			if !errors.Is(err, ErrConfig) {
				t.Errorf("err %v does not wrap ErrConfig", err)
			}
			noSecret(t, "config error", err.Error())
		})
	}
}

func TestRedact(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"https://base-mainnet.g.alchemy.com/v2/KEY":   "https://base-mainnet.g.alchemy.com/…",
		"https://mainnet.helius-rpc.com/?api-key=KEY": "https://mainnet.helius-rpc.com/…",
		"https://user:KEY@rpc.example:8443":           "https://rpc.example:8443",
		"https://mainnet.base.org":                    "https://mainnet.base.org",
		"https://mainnet.base.org/":                   "https://mainnet.base.org",
		"http://127.0.0.1:8545/#KEY":                  "http://127.0.0.1:8545/…",
		"::not a url":                                 "(unparsable URL)",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestOpenChainID: a known chain name on a node of another chain is
// refused at start with a typed error; an unknown name takes the node's id
// and logs it; nothing logged holds the endpoint's secret.
func TestOpenChainID(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		chain, id string
		refused   bool
		logs      string
	}{
		{chain: "base", id: "0x2105"},
		{chain: "base", id: "0x1", refused: true},
		{chain: "ethereum", id: "0x2105", refused: true},
		{chain: "sepolia", id: "0xaa36a7"},
		{chain: "polygon", id: "0x89"},
		{chain: "arbitrum", id: "0xa4b1"},
		{chain: "optimism", id: "0xa"},
		{chain: "base-sepolia", id: "0x14a34"},
		{chain: "dev", id: "0x539", logs: "chain_id=1337"},
	} {
		node := newFakeNode(t, map[string]answer{"eth_chainId": {Result: json.RawMessage(`"` + tc.id + `"`)}})
		var logs bytes.Buffer
		logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		cfg, err := ParseConfig([]string{tc.chain + "=" + node.url()}, nil, nil, nil, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		set, err := Open(context.Background(), cfg, logger)
		var cid *ChainIDError
		switch {
		case tc.refused && (!errors.As(err, &cid) || !errors.Is(err, ErrChainID) || cid.Want != KnownChainIDs[tc.chain]):
			t.Errorf("%s on %s: Open = %v, want a ChainIDError", tc.chain, tc.id, err)
		case !tc.refused && (err != nil || len(set.Chains()) != 1):
			t.Errorf("%s on %s: Open = %v", tc.chain, tc.id, err)
		}
		if err != nil {
			noSecret(t, "Open error", err.Error())
		}
		if tc.logs != "" && !strings.Contains(logs.String(), tc.logs) {
			t.Errorf("%s: logs %q lack %q", tc.chain, logs.String(), tc.logs)
		}
		if !tc.refused && !strings.Contains(logs.String(), "url="+strings.TrimPrefix(node.srv.URL, "")+"/…") {
			t.Errorf("%s: logs lack the redacted URL: %s", tc.chain, logs.String())
		}
		noSecret(t, "logs", logs.String())
	}
}

// TestOpenUnreachableThenWrongChain: a node down at start does not stop
// Open; the chain id is checked before the rail's first answer, and a
// wrong one refuses every check with the typed error.
func TestOpenUnreachableThenWrongChain(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	endpoint := "http://" + addr + "/" + fakeSecret
	cfg, _ := ParseConfig([]string{"base=" + endpoint}, nil, nil, nil, nil, time.Second)
	set, err := Open(context.Background(), cfg, logger)
	if err != nil {
		t.Fatalf("Open with the node down: %v", err)
	}
	if !strings.Contains(logs.String(), "rail not reachable at start") {
		t.Errorf("logs = %s", logs.String())
	}
	noSecret(t, "logs", logs.String())
	r, _ := set.Rail("base")
	w := Want{Chain: "base", Tx: "0x" + strings.Repeat("ab", 32), Token: "USDC", Amount: "1", To: []string{"0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"}}
	_, err = r.Check(context.Background(), w)
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("Check with the node down = %v, want ErrUnreachable", err)
	}
	noSecret(t, "Check error", err.Error())

	// The node comes up at the same address, on the wrong chain.
	node := newFakeNodeAt(t, addr, map[string]answer{"eth_chainId": {Result: json.RawMessage(`"0x1"`)}, "eth_getTransactionReceipt": {Result: json.RawMessage("null")}})
	for i := 0; i < 2; i++ {
		_, err = r.Check(context.Background(), w)
		var cid *ChainIDError
		if !errors.As(err, &cid) || cid.Got != 1 || cid.Want != 8453 {
			t.Fatalf("Check on the wrong chain = %v", err)
		}
		noSecret(t, "Check error", err.Error())
	}
	if m := node.methods(); len(m) != 2 || m[0] != "eth_chainId" || m[1] != "eth_chainId" {
		t.Errorf("calls = %v: nothing but eth_chainId may be asked of a refused node", m)
	}
}

type stubRail struct{ chain string }

func (s stubRail) Chain() string { return s.chain }
func (s stubRail) Check(context.Context, Want) (Result, error) {
	return Result{State: Verified, Chain: s.chain}, nil
}

func TestNewSet(t *testing.T) {
	t.Parallel()
	cfg, err := ParseConfig(nil, nil, []string{"base=0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"}, nil, []string{"base=2"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	set, err := NewSet(cfg, stubRail{"base"}, stubRail{"solana"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(set.Chains(), ","); got != "base,solana" {
		t.Errorf("chains = %s", got)
	}
	if r, ok := set.Rail("base"); !ok || r.Chain() != "base" {
		t.Errorf("Rail(base) = %v, %v", r, ok)
	}
	if _, ok := set.Rail("ethereum"); ok {
		t.Error("a rail for ethereum")
	}
	if w := set.Wallets("base"); len(w) != 1 || set.Depth("base").Blocks != 2 || set.Depth("solana").Commitment != Finalized {
		t.Errorf("wallets %v, depths %v %v", w, set.Depth("base"), set.Depth("solana"))
	}
	if _, err := NewSet(nil, stubRail{"base"}, stubRail{"base"}); !errors.Is(err, ErrConfig) {
		t.Errorf("two rails for base: %v", err)
	}
	var none *Set
	if _, ok := none.Rail("base"); ok || none.Chains() != nil || none.Wallets("base") != nil {
		t.Error("a nil Set has rails")
	}
}

// TestConfigPrintsNoSecret: a Config printed, logged or marshalled by
// mistake shows the endpoints redacted.
func TestConfigPrintsNoSecret(t *testing.T) {
	t.Parallel()
	cfg, err := ParseConfig([]string{"base=https://base.example/v2/" + fakeSecret, "solana=https://sol.example/?api-key=" + fakeSecret}, nil, nil, nil, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("config", "endpoints", cfg.Endpoints, "cfg", cfg)
	slog.New(slog.NewTextHandler(&logs, nil)).Info("config", "endpoints", cfg.Endpoints)
	j, _ := json.Marshal(cfg)
	for _, s := range []string{fmt.Sprint(cfg), fmt.Sprintf("%v %+v %#v %s", cfg, cfg, cfg, cfg.Endpoints), fmt.Sprintf("%#v", cfg.Endpoints), logs.String(), string(j)} {
		noSecret(t, "printed config", s)
	}
	if !strings.Contains(string(j), "https://base.example/…") {
		t.Errorf("JSON = %s", j)
	}
	if cfg.Endpoints["base"] != "https://base.example/v2/"+fakeSecret {
		t.Error("the endpoint itself was changed")
	}
}
