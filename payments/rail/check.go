package rail

import (
	"fmt"
	"math/big"
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
	for _, a := range w.To {
		norm, err := NormalizeAddress(chain, a)
		if err != nil {
			*res = mismatch(*res, "receiving wallet: %v", err)
			return p, true
		}
		if !contains(p.to, norm) {
			p.to = append(p.to, norm)
		}
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
