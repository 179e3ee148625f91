package api

import (
	"net/http"
	"sort"
)

// TokenInfo is one token a person's amounts are written in: Envelopay
// amounts are strings of smallest units (docs/envelopay.md); a client
// writes amount / 10^decimals and the symbol. Address is the contract or
// mint ("" for the chain's native coin).
type TokenInfo struct {
	Chain    string `json:"chain"`
	Symbol   string `json:"symbol"`
	Address  string `json:"address,omitempty"`
	Decimals int    `json:"decimals"`
	Native   bool   `json:"native,omitempty"`
}

// Chains is what a client needs to show amounts and transactions to a
// person: the token registry (built-ins and --token additions) and, per
// chain, the URL of a transaction on a block explorer ({tx} replaced by
// the transaction hash).
type Chains struct {
	Tokens    []TokenInfo
	Explorers map[string]string
}

// TokensList is GET /v0/tokens.
type TokensList struct {
	Tokens    []TokenInfo       `json:"tokens"`
	Explorers map[string]string `json:"explorers"`
}

// tokens answers GET /v0/tokens: the same for every key (no inbox data).
func (h *Handler) tokens(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
	c := h.svc.cfg.Chains
	out := TokensList{Tokens: []TokenInfo{}, Explorers: map[string]string{}}
	if c != nil {
		out.Tokens = append(out.Tokens, c.Tokens...)
		for k, v := range c.Explorers {
			out.Explorers[k] = v
		}
	}
	sort.SliceStable(out.Tokens, func(i, j int) bool { return out.Tokens[i].Chain < out.Tokens[j].Chain })
	return out, 0, nil
}
