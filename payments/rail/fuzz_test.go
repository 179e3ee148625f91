package rail

import (
	"encoding/json"
	"math/big"
	"strings"
	"testing"
)

// seedAnswers adds the results of every testdata answer for method as
// fuzz seeds.
func seedAnswers(f *testing.F, dir, method string) {
	for _, sc := range loadScenarios(f, dir) {
		if a, ok := sc.Answers[method]; ok && a.Result != nil {
			f.Add([]byte(a.Result))
		}
	}
}

// FuzzEVMReceipt: any eth_getTransactionReceipt result decodes to a
// receipt or an error, and judging its logs never panics; a verdict it
// gives is one of the rail's states.
func FuzzEVMReceipt(f *testing.F) {
	seedAnswers(f, "evm", "eth_getTransactionReceipt")
	f.Add([]byte(`null`))
	f.Add([]byte(`{"status":"0x1","logs":[{"address":"0x","topics":[],"data":"0x"}]}`))
	reg, _ := NewRegistry(nil)
	usdcBase, _ := reg.Resolve("base", "USDC")
	p := prepared{token: usdcBase, amount: big.NewInt(30000000), to: []string{testWallet}}
	f.Fuzz(func(t *testing.T, raw []byte) {
		rc, err := decodeReceipt(raw)
		if err != nil || rc == nil {
			return
		}
		res, err := checkTransferLogs(p, rc, Result{})
		if err != nil {
			return
		}
		switch res.State {
		case Verified, Mismatch:
		default:
			t.Fatalf("state %q", res.State)
		}
		if res.State == Verified && !contains(p.to, res.To) {
			t.Fatalf("verified a payment to %q", res.To)
		}
	})
}

// FuzzSolanaTransaction: any getTransaction result decodes to a checked
// shape or an error, and judging it never panics.
func FuzzSolanaTransaction(f *testing.F) {
	seedAnswers(f, "solana", "getTransaction")
	f.Add([]byte(`{"slot":1,"meta":{"err":null,"preBalances":[1],"postBalances":[2]},"transaction":{"signatures":["s"],"message":{"accountKeys":["k"]}}}`))
	reg, _ := NewRegistry(nil)
	ours := "CiQV9cJ3sZdcSWuTYyKXFNVDuyLn821552xJg9DuAw6v"
	f.Fuzz(func(t *testing.T, raw []byte) {
		// The signature check is part of decoding: take the answer's own.
		var probe struct {
			Transaction struct {
				Signatures []string `json:"signatures"`
			} `json:"transaction"`
		}
		json.Unmarshal(raw, &probe)
		sig := ""
		if len(probe.Transaction.Signatures) > 0 {
			sig = probe.Transaction.Signatures[0]
		}
		tx, err := decodeSolanaTx(raw, sig)
		if err != nil {
			return
		}
		for _, token := range []string{"USDC", "SOL"} {
			tok, _ := reg.Resolve("solana", token)
			res := judgeSolana(prepared{token: tok, amount: big.NewInt(1), to: []string{ours}}, tx, Result{})
			switch res.State {
			case Verified, Mismatch, Failed:
			default:
				t.Fatalf("state %q", res.State)
			}
			if res.State == Verified && res.To != ours {
				t.Fatalf("verified a payment to %q", res.To)
			}
		}
	})
}

// FuzzQuantity: a QUANTITY parses to at most 256 bits or fails.
func FuzzQuantity(f *testing.F) {
	for _, s := range []string{`"0x0"`, `"0x1312d00"`, `"0x` + strings.Repeat("f", 64) + `"`, `"0x"`, `1`, `"-0x1"`, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		n, err := quantityBig(raw)
		if err == nil && (n.Sign() < 0 || n.BitLen() > 256) {
			t.Fatalf("quantity %s = %s", raw, n)
		}
	})
}

// FuzzAddressAndAmount: the address and amount parsers either accept
// their input in normal form (normalising twice changes nothing) or
// return their typed error.
func FuzzAddressAndAmount(f *testing.F) {
	for _, s := range []string{"0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed", "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v", "111", "30000000", "0", "1.5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, chain := range []string{"base", "solana"} {
			if a, err := NormalizeAddress(chain, s); err == nil {
				if b, err := NormalizeAddress(chain, a); err != nil || a != b {
					t.Fatalf("%s %q → %q → %q, %v", chain, s, a, b, err)
				}
			}
		}
		if out, err := FormatUnits(s, 6); err == nil && out == "" {
			t.Fatalf("FormatUnits(%q) empty", s)
		}
	})
}

// FuzzConfigLine: a --rail/--wallet/--token/--confirmations value parses
// or fails with ErrConfig; a rail's error never quotes its URL.
func FuzzConfigLine(f *testing.F) {
	for _, s := range []string{"base=https://x.example/KEY", "base:DAI=0x50c5725949A6F0c72E6C4a641F24049A917DB0Cb:18", "solana=finalized", "base=3", "=", ":=:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for i := 0; i < 4; i++ {
			args := make([][]string, 4)
			args[i] = []string{s}
			_, err := ParseConfig(args[0], nil, args[1], args[2], args[3], 0)
			if err != nil && !strings.Contains(err.Error(), "rail_config") {
				t.Fatalf("error without its code: %v", err)
			}
			if i == 0 && err != nil && len(s) > 12 && strings.Contains(err.Error(), s) {
				t.Fatalf("rail error quotes the line: %v", err)
			}
		}
	})
}
