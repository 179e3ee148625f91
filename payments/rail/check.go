package rail

import (
	"fmt"
	"math/big"
	"strings"
)

// prepared is a Want checked against the registry before any RPC: the
// resolved token, the wanted amount and our wallets, normalised.
type prepared struct {
	token  Token
	amount *big.Int
	to     []string
}

// prepare resolves w's token, amount and wallets. When one is unusable it
// fills res as a Mismatch saying why and reports done: no node is asked
// about a payment that cannot be right.
func prepare(reg *Registry, chain string, w Want, res *Result) (prepared, bool) {
	var p prepared
	tok, err := reg.Resolve(chain, w.Token)
	if err != nil {
		*res = mismatch(*res, "token: %v", err)
		return p, true
	}
	p.token = tok
	res.Token = tok.ID()
	amt, err := ParseAmount(w.Amount)
	if err != nil {
		*res = mismatch(*res, "amount: %v", err)
		return p, true
	}
	p.amount = amt
	res.Amount = amt.String()
	// A wallet that is not an address of this chain's kind (a thread may
	// publish wallets of several rails) cannot be paid here: it is left
	// out, and named if no wallet is left.
	var bad []string
	for _, a := range w.To {
		norm, err := NormalizeAddress(chain, a)
		if err != nil {
			bad = append(bad, truncate(strings.TrimSpace(a), 60))
			continue
		}
		if !contains(p.to, norm) {
			p.to = append(p.to, norm)
		}
	}
	if len(p.to) == 0 && len(bad) > 0 {
		*res = mismatch(*res, "%s: no receiving wallet of ours is an address on %s (%s)", ErrBadAddress, chain, strings.Join(bad, ", "))
		return p, true
	}
	if len(p.to) == 0 {
		*res = mismatch(*res, "no receiving wallet of ours is known on %s (--wallet %s=ADDRESS, or one published in the thread)", chain, chain)
		return p, true
	}
	return p, false
}

func mismatch(res Result, format string, args ...any) Result {
	res.State = Mismatch
	res.Reason = fmt.Sprintf(format, args...)
	return res
}

// formatOr writes n in whole units of t ("30" for 30000000 with 6
// decimals), or in smallest units when that fails.
func formatOr(n *big.Int, t Token) string {
	if s, err := FormatUnits(n.String(), t.Decimals); err == nil {
		return s
	}
	return n.String()
}
