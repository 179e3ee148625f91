package rail

import (
	"errors"
	"fmt"
	"math/big"
	"sort"
	"strings"
)

// ErrUnknownToken is wrapped by the error for a token a chain's registry
// does not know (neither a symbol nor a contract address / mint it holds).
var ErrUnknownToken = errors.New("unknown_token")

// ErrAmbiguousToken is wrapped by the error for a symbol that names more
// than one token on a chain: the mail must name the contract address.
var ErrAmbiguousToken = errors.New("ambiguous_token")

// ErrBadAmount is wrapped by the error for an amount that is not a
// non-negative integer in smallest units of at most 78 digits (uint256).
var ErrBadAmount = errors.New("bad_amount")

// ErrBadAddress is wrapped by the error for a wallet, contract or mint
// address that is not valid for its chain kind.
var ErrBadAddress = errors.New("bad_address")

// Token is one asset a chain can pay in. A token is identified by its
// contract address (EVM, lower case) or mint (Solana, base58), never by its
// symbol: two contracts may report the same symbol. The native coin (ETH on
// EVM chains, SOL on Solana) has no address and Native set.
type Token struct {
	Chain    string `json:"chain"`
	Symbol   string `json:"symbol"`
	Address  string `json:"address,omitempty"` // EVM contract (lower case) or SPL mint; "" for the native coin
	Decimals int    `json:"decimals"`
	Native   bool   `json:"native,omitempty"`
	BuiltIn  bool   `json:"built_in,omitempty"`
}

// ID is the token's identity on its chain: the contract address or mint,
// or the native symbol ("ETH", "SOL"). Result.Token holds it.
func (t Token) ID() string {
	if t.Native {
		return t.Symbol
	}
	return t.Address
}

// maxDecimals bounds a configured token's decimals: ERC-20 decimals is a
// uint8, SPL mints use at most 9 in practice; 36 leaves room without
// letting a formatting call build a huge string.
const maxDecimals = 36

// usdc lists Circle's native USDC per chain (6 decimals), as published in
// Circle's "USDC Contract Addresses" page
// (developers.circle.com/stablecoins/usdc-contract-addresses). EVM
// addresses are kept in their EIP-55 form here so a test can check the
// checksum; the registry stores them lower case.
var usdc = map[string]string{
	"ethereum":      "0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48",
	"base":          "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
	"polygon":       "0x3c499c542cEF5E3811e1192ce70d8cC03d5c3359",
	"arbitrum":      "0xaf88d065e77c8cC2239327C5EDb3A432268e5831",
	"optimism":      "0x0b2C639c533813f4Aa9D7837CAf62653d097Ff85",
	"sepolia":       "0x1c7D4B196Cb0C7B01d743Fbc6116a902379C7238",
	"base-sepolia":  "0x036CbD53842c5426634e7929541eC2318f3dCF7e",
	"solana":        "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v",
	"solana-devnet": "4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU",
}

// Registry maps (chain, token) to Token: the built-in table plus --token
// additions. It is read-only once built and safe for concurrent use.
type Registry struct {
	byID     map[string]map[string]Token   // chain → identity (lower-case EVM address, mint, or native symbol) → token
	bySymbol map[string]map[string][]Token // chain → upper-case symbol → tokens
	userSym  map[string]map[string]Token   // chain → upper-case symbol → the --token that claims it
}

// NewRegistry returns the built-in registry (USDC on the known chains)
// with the tokens of extra added; a symbol an extra token names resolves
// to it rather than to a built-in token of the same symbol.
func NewRegistry(extra []Token) (*Registry, error) {
	r := &Registry{
		byID:     map[string]map[string]Token{},
		bySymbol: map[string]map[string][]Token{},
		userSym:  map[string]map[string]Token{},
	}
	for chain, addr := range usdc {
		t := Token{Chain: chain, Symbol: "USDC", Address: addr, Decimals: 6, BuiltIn: true}
		if KindOf(chain) == EVM {
			t.Address = strings.ToLower(addr)
		}
		r.add(t)
	}
	for _, t := range extra {
		norm, err := NormalizeAddress(t.Chain, t.Address)
		if err != nil {
			return nil, fmt.Errorf("--token %s:%s: %w", t.Chain, t.Symbol, err)
		}
		t.Address = norm
		t.Symbol = strings.ToUpper(t.Symbol)
		if t.Decimals < 0 || t.Decimals > maxDecimals {
			return nil, fmt.Errorf("--token %s:%s: decimals %d out of range 0..%d", t.Chain, t.Symbol, t.Decimals, maxDecimals)
		}
		if t.Symbol == nativeSymbol(t.Chain) {
			return nil, fmt.Errorf("--token %s:%s: %s is the chain's native coin", t.Chain, t.Symbol, t.Symbol)
		}
		if prev, ok := r.userSym[t.Chain][t.Symbol]; ok && prev.Address != t.Address {
			return nil, fmt.Errorf("--token %s:%s given twice (%s and %s)", t.Chain, t.Symbol, prev.Address, t.Address)
		}
		if r.userSym[t.Chain] == nil {
			r.userSym[t.Chain] = map[string]Token{}
		}
		r.userSym[t.Chain][t.Symbol] = t
		r.add(t)
	}
	return r, nil
}

func (r *Registry) add(t Token) {
	if r.byID[t.Chain] == nil {
		r.byID[t.Chain] = map[string]Token{}
		r.bySymbol[t.Chain] = map[string][]Token{}
	}
	if _, dup := r.byID[t.Chain][t.Address]; dup && !t.BuiltIn {
		// The same address given again (a built-in re-declared by --token):
		// the user's symbol and decimals win, without a second symbol entry.
		old := r.byID[t.Chain][t.Address]
		syms := r.bySymbol[t.Chain][old.Symbol]
		for i := range syms {
			if syms[i].Address == t.Address {
				syms = append(syms[:i], syms[i+1:]...)
				break
			}
		}
		r.bySymbol[t.Chain][old.Symbol] = syms
	}
	r.byID[t.Chain][t.Address] = t
	r.bySymbol[t.Chain][t.Symbol] = append(r.bySymbol[t.Chain][t.Symbol], t)
}

// nativeSymbol is the native coin of a chain: SOL on Solana, ETH on every
// EVM chain (polygon's gas coin is POL, but Envelopay names the native coin
// of an EVM rail ETH; see docs/rails.md).
func nativeSymbol(chain string) string {
	if KindOf(chain) == Solana {
		return "SOL"
	}
	return "ETH"
}

// Native returns the native coin of chain: ETH with 18 decimals on EVM
// chains, SOL with 9 on Solana.
func Native(chain string) Token {
	if KindOf(chain) == Solana {
		return Token{Chain: chain, Symbol: "SOL", Decimals: 9, Native: true, BuiltIn: true}
	}
	return Token{Chain: chain, Symbol: "ETH", Decimals: 18, Native: true, BuiltIn: true}
}

// Resolve finds the token a mail names on chain: the native symbol, a
// symbol the registry holds for that chain, or a contract address / mint.
// Symbols are matched case-insensitively; EVM addresses too (EIP-55 case
// is a checksum, not identity); Solana mints exactly (base58 is case
// sensitive).
func (r *Registry) Resolve(chain, token string) (Token, error) {
	chain = strings.ToLower(strings.TrimSpace(chain))
	token = strings.TrimSpace(token)
	if token == "" {
		return Token{}, fmt.Errorf("%w: no token named", ErrUnknownToken)
	}
	if strings.EqualFold(token, nativeSymbol(chain)) {
		return Native(chain), nil
	}
	if addr, err := NormalizeAddress(chain, token); err == nil {
		if t, ok := r.byID[chain][addr]; ok {
			return t, nil
		}
		return Token{}, fmt.Errorf("%w: %s is not a token envelopd knows on %s (add it with --token %s:SYMBOL=%s)", ErrUnknownToken, addr, chain, chain, addr)
	}
	sym := strings.ToUpper(token)
	if t, ok := r.userSym[chain][sym]; ok {
		return t, nil
	}
	switch ts := r.bySymbol[chain][sym]; len(ts) {
	case 0:
		return Token{}, fmt.Errorf("%w: %q on %s", ErrUnknownToken, token, chain)
	case 1:
		return ts[0], nil
	default:
		addrs := make([]string, len(ts))
		for i, t := range ts {
			addrs[i] = t.Address
		}
		sort.Strings(addrs)
		return Token{}, fmt.Errorf("%w: %s on %s names %s: name the contract address", ErrAmbiguousToken, sym, chain, strings.Join(addrs, ", "))
	}
}

// Lookup is Resolve for display: the symbol and decimals of a token named
// by symbol or address, and false when the registry does not know it.
func (r *Registry) Lookup(chain, token string) (Token, bool) {
	t, err := r.Resolve(chain, token)
	return t, err == nil
}

// Builtin is the registry of the built-in tokens only, for display where
// no rail is configured.
func Builtin() *Registry {
	r, _ := NewRegistry(nil) // the built-in table alone cannot fail
	return r
}

// Format writes amount (smallest units) of the token a mail names on chain
// for a person: "30 USDC", "0.01 ETH". A token the registry does not know,
// or an amount that is not one, is written as given: "30000000 0xabc…".
func (r *Registry) Format(chain, token, amount string) string {
	if t, ok := r.Lookup(chain, token); ok {
		if s, err := FormatUnits(amount, t.Decimals); err == nil {
			return s + " " + t.Symbol
		}
	}
	return strings.TrimSpace(amount + " " + token)
}

// Tokens lists every token the registry holds, natives excluded, sorted by
// chain then symbol then address.
func (r *Registry) Tokens() []Token {
	var out []Token
	for _, m := range r.byID {
		for _, t := range m {
			out = append(out, t)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Chain != b.Chain {
			return a.Chain < b.Chain
		}
		if a.Symbol != b.Symbol {
			return a.Symbol < b.Symbol
		}
		return a.Address < b.Address
	})
	return out
}

// maxAmountDigits bounds an amount: a uint256 has at most 78 decimal digits.
const maxAmountDigits = 78

// ParseAmount parses a smallest-unit amount: decimal digits only, no sign,
// no point, at most 78 digits (a uint256), leading zeros allowed.
func ParseAmount(s string) (*big.Int, error) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > maxAmountDigits {
		return nil, fmt.Errorf("%w: %q is not an amount in smallest units (1 to %d digits)", ErrBadAmount, truncate(s, 90), maxAmountDigits)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return nil, fmt.Errorf("%w: %q is not an amount in smallest units (digits only)", ErrBadAmount, truncate(s, 90))
		}
	}
	n, _ := new(big.Int).SetString(s, 10)
	return n, nil
}

// FormatUnits writes a smallest-unit amount as a decimal number of whole
// units: FormatUnits("30000000", 6) is "30", ("1500000", 6) "1.5",
// ("1", 18) "0.000000000000000001". Trailing zeros of the fraction are
// dropped.
func FormatUnits(amount string, decimals int) (string, error) {
	n, err := ParseAmount(amount)
	if err != nil {
		return "", err
	}
	if decimals < 0 || decimals > maxDecimals {
		return "", fmt.Errorf("%w: decimals %d out of range 0..%d", ErrBadAmount, decimals, maxDecimals)
	}
	digits := n.String()
	if decimals == 0 {
		return digits, nil
	}
	if len(digits) <= decimals {
		digits = strings.Repeat("0", decimals-len(digits)+1) + digits
	}
	whole, frac := digits[:len(digits)-decimals], strings.TrimRight(digits[len(digits)-decimals:], "0")
	if frac == "" {
		return whole, nil
	}
	return whole + "." + frac, nil
}

// NormalizeAddress checks a wallet, contract or mint address for chain's
// kind and returns its identity form: EVM "0x" + 40 hex digits in lower
// case (EIP-55 mixed case is accepted but not required: case is a
// checksum, not identity); Solana base58 of a 32-byte public key, as given.
func NormalizeAddress(chain, addr string) (string, error) {
	addr = strings.TrimSpace(addr)
	if KindOf(chain) == Solana {
		b, err := DecodeBase58(addr, 32)
		if err != nil || len(b) != 32 {
			return "", fmt.Errorf("%w: %q is not a Solana address (base58 of 32 bytes)", ErrBadAddress, truncate(addr, 60))
		}
		return addr, nil
	}
	if len(addr) != 42 || (addr[:2] != "0x" && addr[:2] != "0X") || !isHex(addr[2:]) {
		return "", fmt.Errorf("%w: %q is not an EVM address (0x and 40 hex digits)", ErrBadAddress, truncate(addr, 60))
	}
	return "0x" + strings.ToLower(addr[2:]), nil
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

const base58Alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"

var base58Index = func() (t [256]int8) {
	for i := range t {
		t[i] = -1
	}
	for i := 0; i < len(base58Alphabet); i++ {
		t[base58Alphabet[i]] = int8(i)
	}
	return t
}()

// DecodeBase58 decodes Bitcoin-alphabet base58 (as Solana uses for keys
// and signatures), refusing input longer than a value of max bytes can be
// (base58 needs at most ceil(max*8/log2(58)) < 1.37*max+1 characters), so
// the quadratic decoder stays bounded.
func DecodeBase58(s string, max int) ([]byte, error) {
	if s == "" || len(s) > max*137/100+2 {
		return nil, errors.New("bad base58 length")
	}
	zeros := 0
	for zeros < len(s) && s[zeros] == '1' {
		zeros++
	}
	out := make([]byte, 0, max)
	for i := 0; i < len(s); i++ {
		d := base58Index[s[i]]
		if d < 0 {
			return nil, errors.New("bad base58 character")
		}
		carry := int(d)
		for j := len(out) - 1; j >= 0; j-- {
			carry += int(out[j]) * 58
			out[j] = byte(carry)
			carry >>= 8
		}
		for carry > 0 {
			out = append([]byte{byte(carry)}, out...)
			carry >>= 8
		}
	}
	// out holds the big-endian value with its own leading zero bytes
	// stripped; each leading '1' is one zero byte.
	i := 0
	for i < len(out) && out[i] == 0 {
		i++
	}
	res := append(make([]byte, zeros), out[i:]...)
	if len(res) > max {
		return nil, errors.New("base58 value too long")
	}
	return res, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
