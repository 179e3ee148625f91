package rail

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"sort"
	"strings"
)

// solanaRail reads a Solana cluster with getTransaction (Solana JSON-RPC
// "getTransaction": encoding jsonParsed, maxSupportedTransactionVersion 0,
// the configured commitment). Payments are judged by balance changes, not
// by instructions: SPL tokens by postTokenBalances − preTokenBalances for
// owner = our wallet and the token's mint (which covers transfers made
// by inner instructions and to associated token accounts), SOL by the
// change of our account's lamports (postBalances − preBalances at its
// index in accountKeys).
type solanaRail struct {
	chain      string
	c          *client
	reg        *Registry
	commitment Commitment
}

func (r *solanaRail) Chain() string { return r.chain }

type solTx struct {
	Slot        *uint64  `json:"slot"`
	Meta        *solMeta `json:"meta"`
	Transaction *struct {
		Signatures []string `json:"signatures"`
		Message    struct {
			AccountKeys []json.RawMessage `json:"accountKeys"`
		} `json:"message"`
	} `json:"transaction"`
}

type solMeta struct {
	Err               json.RawMessage   `json:"err"`
	PreBalances       []json.Number     `json:"preBalances"`
	PostBalances      []json.Number     `json:"postBalances"`
	PreTokenBalances  []solTokenBalance `json:"preTokenBalances"`
	PostTokenBalances []solTokenBalance `json:"postTokenBalances"`
	LoadedAddresses   *struct {
		Writable []string `json:"writable"`
		Readonly []string `json:"readonly"`
	} `json:"loadedAddresses"`
}

type solTokenBalance struct {
	AccountIndex  int    `json:"accountIndex"`
	Mint          string `json:"mint"`
	Owner         string `json:"owner"`
	UITokenAmount struct {
		Amount string `json:"amount"`
	} `json:"uiTokenAmount"`
}

// solParsed is a getTransaction answer checked for shape: account keys in
// order with their lamport changes, token balances as amounts.
type solParsed struct {
	slot   uint64
	failed string // meta.err as JSON, "" when the transaction succeeded
	keys   []string
	delta  []*big.Int       // lamports, per account key
	tokens []solTokenChange // per (owner, mint)
}

type solTokenChange struct {
	owner, mint string
	delta       *big.Int
}

// decodeSolanaTx checks a getTransaction result (not "null") for the shape
// the Solana documentation gives it.
func decodeSolanaTx(raw json.RawMessage, sig string) (*solParsed, error) {
	var tx solTx
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	if err := dec.Decode(&tx); err != nil {
		return nil, fmt.Errorf("%w: getTransaction: %v", ErrMalformed, err)
	}
	if tx.Slot == nil || tx.Meta == nil || tx.Transaction == nil {
		return nil, fmt.Errorf("%w: getTransaction: slot, meta or transaction missing", ErrMalformed)
	}
	if len(tx.Transaction.Signatures) == 0 || tx.Transaction.Signatures[0] != sig {
		return nil, fmt.Errorf("%w: getTransaction answered for another transaction", ErrMalformed)
	}
	p := &solParsed{slot: *tx.Slot}
	if e := strings.TrimSpace(string(tx.Meta.Err)); e != "" && e != "null" {
		p.failed = truncate(e, 200)
	}
	for i, k := range tx.Transaction.Message.AccountKeys {
		// jsonParsed gives {"pubkey", "signer", "writable", "source"};
		// plain json gives the key as a string.
		var s string
		if json.Unmarshal(k, &s) != nil {
			var o struct {
				Pubkey string `json:"pubkey"`
			}
			if err := json.Unmarshal(k, &o); err != nil || o.Pubkey == "" {
				return nil, fmt.Errorf("%w: getTransaction: account key %d", ErrMalformed, i)
			}
			s = o.Pubkey
		}
		p.keys = append(p.keys, s)
	}
	if la := tx.Meta.LoadedAddresses; la != nil && len(tx.Transaction.Message.AccountKeys) > 0 &&
		len(p.keys) < len(tx.Meta.PreBalances) {
		// Plain json lists lookup-table addresses after the static keys.
		p.keys = append(append(p.keys, la.Writable...), la.Readonly...)
	}
	if len(tx.Meta.PreBalances) != len(p.keys) || len(tx.Meta.PostBalances) != len(p.keys) {
		return nil, fmt.Errorf("%w: getTransaction: %d account keys, %d pre and %d post balances",
			ErrMalformed, len(p.keys), len(tx.Meta.PreBalances), len(tx.Meta.PostBalances))
	}
	for i := range p.keys {
		pre, err1 := ParseAmount(tx.Meta.PreBalances[i].String())
		post, err2 := ParseAmount(tx.Meta.PostBalances[i].String())
		if err1 != nil || err2 != nil || pre.BitLen() > 64 || post.BitLen() > 64 {
			return nil, fmt.Errorf("%w: getTransaction: balance of account %d is not a u64", ErrMalformed, i)
		}
		p.delta = append(p.delta, post.Sub(post, pre))
	}
	changes := map[[2]string]*big.Int{}
	add := func(list []solTokenBalance, sign int) error {
		for _, b := range list {
			if b.AccountIndex < 0 || b.AccountIndex >= len(p.keys) {
				return fmt.Errorf("token balance account index %d out of range", b.AccountIndex)
			}
			if b.Owner == "" || b.Mint == "" {
				continue // no owner recorded (old ledger entries): not attributable
			}
			n, err := ParseAmount(b.UITokenAmount.Amount)
			if err != nil || n.BitLen() > 64 {
				return fmt.Errorf("token amount %q is not a u64", truncate(b.UITokenAmount.Amount, 30))
			}
			k := [2]string{b.Owner, b.Mint}
			if changes[k] == nil {
				changes[k] = new(big.Int)
			}
			if sign < 0 {
				n.Neg(n)
			}
			changes[k].Add(changes[k], n)
		}
		return nil
	}
	if err := add(tx.Meta.PreTokenBalances, -1); err != nil {
		return nil, fmt.Errorf("%w: getTransaction: %v", ErrMalformed, err)
	}
	if err := add(tx.Meta.PostTokenBalances, +1); err != nil {
		return nil, fmt.Errorf("%w: getTransaction: %v", ErrMalformed, err)
	}
	for k, d := range changes {
		p.tokens = append(p.tokens, solTokenChange{owner: k[0], mint: k[1], delta: d})
	}
	sort.Slice(p.tokens, func(i, j int) bool {
		if p.tokens[i].owner != p.tokens[j].owner {
			return p.tokens[i].owner < p.tokens[j].owner
		}
		return p.tokens[i].mint < p.tokens[j].mint
	})
	return p, nil
}

// Check reads the transaction at the configured commitment and judges it
// by our wallets' balance changes.
func (r *solanaRail) Check(ctx context.Context, w Want) (Result, error) {
	sig := strings.TrimSpace(w.Tx)
	res := Result{Chain: r.chain, Tx: sig, Amount: strings.TrimSpace(w.Amount)}
	p, done := prepare(r.reg, r.chain, w, &res)
	if done {
		return res, nil
	}
	if b, err := DecodeBase58(sig, 64); err != nil || len(b) != 64 {
		return mismatch(res, "%q is not a Solana transaction signature (base58 of 64 bytes)", truncate(w.Tx, 100)), nil
	}
	raw, err := r.c.call(ctx, "getTransaction", sig, map[string]any{
		"encoding":                       "jsonParsed",
		"maxSupportedTransactionVersion": 0,
		"commitment":                     string(r.commitment),
	})
	if err != nil {
		return Result{}, err
	}
	if string(raw) == "null" {
		res.State, res.Reason = Pending, fmt.Sprintf("transaction not found at commitment %s (yet)", r.commitment)
		return res, nil
	}
	tx, err := decodeSolanaTx(raw, sig)
	if err != nil {
		return Result{}, err
	}
	return judgeSolana(p, tx, res), nil
}

// judgeSolana applies the balance-change rules to a decoded transaction.
func judgeSolana(p prepared, tx *solParsed, res Result) Result {
	res.Block = tx.slot
	if tx.failed != "" {
		res.State, res.Reason = Failed, "the transaction failed: meta.err "+tx.failed
		return res
	}
	if p.token.Native {
		return judgeLamports(p, tx, res)
	}
	var best string
	var bestDelta *big.Int
	var strangers, otherMints []string
	var payer string
	var payerDelta *big.Int
	for _, c := range tx.tokens {
		ours := contains(p.to, c.owner)
		switch {
		case c.mint == p.token.Address && ours && c.delta.Sign() > 0:
			if bestDelta == nil || c.delta.Cmp(bestDelta) > 0 {
				best, bestDelta = c.owner, c.delta
			}
		case c.mint == p.token.Address && c.delta.Sign() < 0:
			if payerDelta == nil || c.delta.Cmp(payerDelta) < 0 {
				payer, payerDelta = c.owner, c.delta
			}
		case c.mint == p.token.Address && c.delta.Sign() > 0:
			strangers = append(strangers, c.owner)
		case ours && c.delta.Sign() > 0:
			otherMints = append(otherMints, c.mint)
		}
	}
	res.From = payer
	if bestDelta == nil {
		switch {
		case len(otherMints) > 0:
			return mismatch(res, "the transaction credits our wallet with mint %s, not %s (%s)", strings.Join(otherMints, ", "), p.token.Symbol, p.token.Address)
		case len(strangers) > 0:
			return mismatch(res, "the transaction credits %s to %s, not to %s", p.token.Symbol, strings.Join(strangers, ", "), strings.Join(p.to, " or "))
		}
		return mismatch(res, "the transaction credits no %s (%s) to %s", p.token.Symbol, p.token.Address, strings.Join(p.to, " or "))
	}
	return settle(p, res, best, bestDelta)
}

// judgeLamports checks the SOL change of our accounts. The payer shown is
// the account whose lamports fell most (the sender, or the fee payer).
func judgeLamports(p prepared, tx *solParsed, res Result) Result {
	var best string
	var bestDelta, payerDelta *big.Int
	touched := false
	for i, k := range tx.keys {
		d := tx.delta[i]
		if contains(p.to, k) {
			touched = true
			if d.Sign() > 0 && (bestDelta == nil || d.Cmp(bestDelta) > 0) {
				best, bestDelta = k, d
			}
			continue
		}
		if d.Sign() < 0 && (payerDelta == nil || d.Cmp(payerDelta) < 0) {
			res.From, payerDelta = k, d
		}
	}
	if !touched {
		return mismatch(res, "the transaction does not involve %s", strings.Join(p.to, " or "))
	}
	if bestDelta == nil {
		return mismatch(res, "the transaction credits no SOL to %s", strings.Join(p.to, " or "))
	}
	return settle(p, res, best, bestDelta)
}
