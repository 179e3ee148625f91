package main

import (
	"flag"
	"io"
	"testing"

	"github.com/envelopd/envelopd/api"
	"github.com/envelopd/envelopd/payments/rail"
)

// TestServeTokens: what GET /v0/tokens serves — the built-in USDC (6
// decimals), the native coins (ETH 18, SOL 9), a --token addition and the
// explorers, a --explorer replacing a built-in one; a bad --explorer is
// refused.
func TestServeTokens(t *testing.T) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var f ingestFlags
	f.rails = rail.RegisterFlags(fs)
	var h httpFlags
	h.register(fs)
	if err := fs.Parse([]string{"--token", "base:WETH=0x4200000000000000000000000000000000000006:18",
		"--explorer", "base=https://base.blockscout.com/tx/{tx}", "--explorer", "devchain=http://127.0.0.1:4000/tx/"}); err != nil {
		t.Fatal(err)
	}
	c, err := h.chains(&f)
	if err != nil {
		t.Fatal(err)
	}
	find := func(chain, sym string) (api.TokenInfo, bool) {
		for _, tk := range c.Tokens {
			if tk.Chain == chain && tk.Symbol == sym {
				return tk, true
			}
		}
		return api.TokenInfo{}, false
	}
	for _, w := range []api.TokenInfo{
		{Chain: "base", Symbol: "USDC", Address: "0x833589fcd6edb6e08f4c7c32d4f71b54bda02913", Decimals: 6},
		{Chain: "base", Symbol: "WETH", Address: "0x4200000000000000000000000000000000000006", Decimals: 18},
		{Chain: "base", Symbol: "ETH", Decimals: 18, Native: true},
		{Chain: "solana", Symbol: "SOL", Decimals: 9, Native: true},
		{Chain: "devchain", Symbol: "ETH", Decimals: 18, Native: true},
	} {
		if got, ok := find(w.Chain, w.Symbol); !ok || got != w {
			t.Errorf("%s %s: %+v, want %+v", w.Chain, w.Symbol, got, w)
		}
	}
	for chain, want := range map[string]string{
		"base":     "https://base.blockscout.com/tx/{tx}",
		"ethereum": "https://etherscan.io/tx/{tx}",
		"devchain": "http://127.0.0.1:4000/tx/{tx}",
	} {
		if got := c.Explorers[chain]; got != want {
			t.Errorf("explorer of %s: %q, want %q", chain, got, want)
		}
	}
	for _, bad := range []string{"base", "base=", "=https://x.test/", "base=ftp://x.test/{tx}", "base=javascript:alert(1)"} {
		if err := h.explorers.Set(bad); err == nil {
			t.Errorf("--explorer %q accepted", bad)
		}
	}
}
