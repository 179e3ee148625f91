package rail

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"golang.org/x/crypto/sha3"
)

func keccak(s string) []byte {
	h := sha3.NewLegacyKeccak256()
	h.Write([]byte(s))
	return h.Sum(nil)
}

// eip55 writes an address in its EIP-55 mixed-case checksum form.
func eip55(addr string) string {
	lower := strings.ToLower(strings.TrimPrefix(addr, "0x"))
	sum := hex.EncodeToString(keccak(lower))
	out := []byte(lower)
	for i, c := range out {
		if c >= 'a' && c <= 'f' && sum[i] >= '8' {
			out[i] = c - 32
		}
	}
	return "0x" + string(out)
}

// TestBuiltinTokens checks the built-in table against itself: every EVM
// USDC address carries a valid EIP-55 checksum (a mistyped character
// would break it), every Solana mint is base58 of 32 bytes, and the
// known chains all have USDC.
func TestBuiltinTokens(t *testing.T) {
	t.Parallel()
	reg, err := NewRegistry(nil)
	if err != nil {
		t.Fatal(err)
	}
	for chain, addr := range usdc {
		if KindOf(chain) == EVM {
			if eip55(addr) != addr {
				t.Errorf("%s USDC %s: EIP-55 checksum wrong (want %s)", chain, addr, eip55(addr))
			}
		} else if b, err := DecodeBase58(addr, 32); err != nil || len(b) != 32 {
			t.Errorf("%s USDC %s: not base58 of 32 bytes", chain, addr)
		}
		tok, ok := reg.Lookup(chain, "usdc")
		if !ok || tok.Decimals != 6 || !tok.BuiltIn || !strings.EqualFold(tok.Address, addr) {
			t.Errorf("%s USDC = %+v", chain, tok)
		}
	}
	for chain := range KnownChainIDs {
		if _, ok := usdc[chain]; !ok {
			t.Errorf("known chain %s has no built-in USDC", chain)
		}
	}
	if got := "0x" + hex.EncodeToString(keccak("Transfer(address,address,uint256)")); got != transferTopic {
		t.Errorf("Transfer topic = %s, want %s", got, transferTopic)
	}
}

func TestResolve(t *testing.T) {
	t.Parallel()
	reg, err := NewRegistry([]Token{
		{Chain: "base", Symbol: "usdbc", Address: "0xd9aAEc86B65D86f6A7B5B1b0c42FFA531710b6CA", Decimals: 6},
		{Chain: "dev", Symbol: "TUSD", Address: "0x1111111111111111111111111111111111111111", Decimals: 6},
		{Chain: "dev", Symbol: "TUSD2", Address: "0x2222222222222222222222222222222222222222", Decimals: 6},
		// A user token that claims the USDC symbol on sepolia: the
		// symbol resolves to it, the built-in stays known by address.
		{Chain: "sepolia", Symbol: "USDC", Address: "0x3333333333333333333333333333333333333333", Decimals: 6},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		chain, token string
		id           string
		decimals     int
		err          error
	}{
		{"base", "USDC", "0x833589fcd6edb6e08f4c7c32d4f71b54bda02913", 6, nil},
		{"base", " usdc ", "0x833589fcd6edb6e08f4c7c32d4f71b54bda02913", 6, nil},
		{"base", "0x833589FCD6EDB6E08F4C7C32D4F71B54BDA02913", "0x833589fcd6edb6e08f4c7c32d4f71b54bda02913", 6, nil},
		{"base", "ETH", "ETH", 18, nil},
		{"polygon", "eth", "ETH", 18, nil},
		{"base", "SOL", "", 0, ErrUnknownToken},
		{"solana", "SOL", "SOL", 9, nil},
		{"solana", "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v", "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v", 6, nil},
		// base58 is case-sensitive: another case is another mint.
		{"solana", "EPJFWDD5AUFQSSQEM2QN1XZYBAPC8G4WEGGKZWYTDT1V", "", 0, ErrUnknownToken},
		{"base", "USDbC", "0xd9aaec86b65d86f6a7b5b1b0c42ffa531710b6ca", 6, nil},
		{"ethereum", "USDbC", "", 0, ErrUnknownToken},
		{"dev", "TUSD", "0x1111111111111111111111111111111111111111", 6, nil},
		{"dev", "USDC", "", 0, ErrUnknownToken},
		{"sepolia", "USDC", "0x3333333333333333333333333333333333333333", 6, nil},
		{"sepolia", "0x1c7D4B196Cb0C7B01d743Fbc6116a902379C7238", "0x1c7d4b196cb0c7b01d743fbc6116a902379c7238", 6, nil},
		{"base", "", "", 0, ErrUnknownToken},
		{"base", "0xdeadbeef", "", 0, ErrUnknownToken},
	} {
		tok, err := reg.Resolve(tc.chain, tc.token)
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("Resolve(%s, %q) = %+v, %v; want %v", tc.chain, tc.token, tok, err, tc.err)
			}
			continue
		}
		if err != nil || tok.ID() != tc.id || tok.Decimals != tc.decimals {
			t.Errorf("Resolve(%s, %q) = %+v (%s), %v; want %s/%d", tc.chain, tc.token, tok, tok.ID(), err, tc.id, tc.decimals)
		}
	}
}

// TestAmbiguousSymbol: two built-in-free tokens with one symbol are not
// resolved by symbol; each still is by address.
func TestAmbiguousSymbol(t *testing.T) {
	t.Parallel()
	reg := &Registry{byID: map[string]map[string]Token{}, bySymbol: map[string]map[string][]Token{}, userSym: map[string]map[string]Token{}}
	reg.add(Token{Chain: "dev", Symbol: "TUSD", Address: "0x1111111111111111111111111111111111111111", Decimals: 6, BuiltIn: true})
	reg.add(Token{Chain: "dev", Symbol: "TUSD", Address: "0x2222222222222222222222222222222222222222", Decimals: 6, BuiltIn: true})
	if _, err := reg.Resolve("dev", "TUSD"); !errors.Is(err, ErrAmbiguousToken) || !strings.Contains(err.Error(), "0x1111111111111111111111111111111111111111, 0x2222222222222222222222222222222222222222") {
		t.Errorf("Resolve = %v", err)
	}
	if tok, err := reg.Resolve("dev", "0x2222222222222222222222222222222222222222"); err != nil || tok.Symbol != "TUSD" {
		t.Errorf("by address = %+v, %v", tok, err)
	}
	if n := len(reg.Tokens()); n != 2 {
		t.Errorf("Tokens = %d", n)
	}
}

func TestFormatUnits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		amount   string
		decimals int
		want     string
	}{
		{"30000000", 6, "30"},
		{"1500000", 6, "1.5"},
		{"30000001", 6, "30.000001"},
		{"1", 6, "0.000001"},
		{"0", 6, "0"},
		{"000120", 2, "1.2"},
		{"1", 18, "0.000000000000000001"},
		{"10000000000000000", 18, "0.01"},
		{"500000000", 9, "0.5"},
		{"42", 0, "42"},
		{strings.Repeat("9", 78), 6, strings.Repeat("9", 72) + "." + strings.Repeat("9", 6)},
	} {
		got, err := FormatUnits(tc.amount, tc.decimals)
		if err != nil || got != tc.want {
			t.Errorf("FormatUnits(%s, %d) = %q, %v; want %q", tc.amount, tc.decimals, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "-1", "1.5", "0x10", "1e6", " ", "+1", strings.Repeat("9", 79), "１"} {
		if _, err := FormatUnits(bad, 6); !errors.Is(err, ErrBadAmount) {
			t.Errorf("FormatUnits(%q) = %v, want ErrBadAmount", bad, err)
		}
	}
	if _, err := FormatUnits("1", 37); !errors.Is(err, ErrBadAmount) {
		t.Errorf("37 decimals: %v", err)
	}
}

func TestNormalizeAddress(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ chain, in, want string }{
		{"base", "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed", "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed"},
		{"base", " 0X5AAEB6053F3E94C9B9A09F33669435E7EF1BEAED ", "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed"},
		{"dev", "0x0000000000000000000000000000000000000000", "0x0000000000000000000000000000000000000000"},
		{"solana", "11111111111111111111111111111111", "11111111111111111111111111111111"},
		{"solana-devnet", "4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU", "4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU"},
	} {
		got, err := NormalizeAddress(tc.chain, tc.in)
		if err != nil || got != tc.want {
			t.Errorf("NormalizeAddress(%s, %q) = %q, %v", tc.chain, tc.in, got, err)
		}
	}
	for _, tc := range []struct{ chain, in string }{
		{"base", "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAe"},
		{"base", "5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed00"},
		{"base", "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAeg"},
		{"solana", "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"},
		{"solana", "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTD"},     // 30 bytes
		{"solana", "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v1"}, // 33 bytes
		{"solana", "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1O"},  // O is not base58
		{"solana", strings.Repeat("z", 1000)},
	} {
		if got, err := NormalizeAddress(tc.chain, tc.in); !errors.Is(err, ErrBadAddress) {
			t.Errorf("NormalizeAddress(%s, %q) = %q, %v; want ErrBadAddress", tc.chain, tc.in, got, err)
		}
	}
}

// TestBase58 checks the decoder on known values: leading '1's are zero
// bytes, the system program id is 32 zero bytes.
func TestBase58(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"11111111111111111111111111111111": strings.Repeat("00", 32),
		"1":                                "00",
		"2":                                "01",
		"z":                                "39",
		"5R":                               "0100",
		"StV1DL6CwTryKyV":                  hex.EncodeToString([]byte("hello world")),
		"11":                               "0000",
		"21":                               "3a",
		"5Q":                               "ff",
		"LUv":                              "ffff",
		"1LUv":                             "00ffff",
	} {
		got, err := DecodeBase58(in, 64)
		if err != nil || hex.EncodeToString(got) != want {
			t.Errorf("DecodeBase58(%q) = %x, %v; want %s", in, got, err, want)
		}
	}
	// Not base58: empty, the excluded characters 0 O I l, too long for max.
	for _, in := range []string{"", "0", "O", "I", "l", strings.Repeat("z", 90)} {
		if got, err := DecodeBase58(in, 64); err == nil {
			t.Errorf("DecodeBase58(%q) = %x, want an error", in, got)
		}
	}
}

func TestFormat(t *testing.T) {
	t.Parallel()
	reg := Builtin()
	for _, tc := range []struct{ chain, token, amount, want string }{
		{"base", "USDC", "30000000", "30 USDC"},
		{"base", "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913", "1500000", "1.5 USDC"},
		{"ethereum", "eth", "10000000000000000", "0.01 ETH"},
		{"solana", "SOL", "500000000", "0.5 SOL"},
		{"base", "0xd1220a0cf47c7b9be7a2e6ba89f429762e7b9adb", "30000000", "30000000 0xd1220a0cf47c7b9be7a2e6ba89f429762e7b9adb"},
		{"base", "USDC", "30.5", "30.5 USDC"},
	} {
		if got := reg.Format(tc.chain, tc.token, tc.amount); got != tc.want {
			t.Errorf("Format(%s, %s, %s) = %q, want %q", tc.chain, tc.token, tc.amount, got, tc.want)
		}
	}
}
