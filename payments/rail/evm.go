package rail

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"sort"
	"strings"
	"sync"
)

// transferTopic is keccak256("Transfer(address,address,uint256)"), the
// first topic of an ERC-20 Transfer event (EIP-20 "Events"); a test
// recomputes it.
const transferTopic = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"

// indexingInProgress is the error text geth (and clients derived from it)
// answer eth_getTransactionReceipt with while its transaction index is
// still being built: "not yet", not a failure.
const indexingInProgress = "transaction indexing is in progress"

// evmRail reads one EVM chain over plain JSON-RPC (Ethereum JSON-RPC API:
// eth_chainId, eth_blockNumber, eth_getTransactionReceipt,
// eth_getTransactionByHash).
type evmRail struct {
	chain  string
	c      *client
	reg    *Registry
	depth  uint64
	log    *slog.Logger
	idMu   sync.Mutex
	idOK   bool   // eth_chainId was checked and accepted
	nodeID uint64 // the id the node answered
}

func (r *evmRail) Chain() string { return r.chain }

// ChainIDError is a node whose eth_chainId is not the chain its rail is
// named for. The rail is refused: every payment it verified would be on
// the wrong chain.
type ChainIDError struct {
	Chain    string
	Want     uint64
	Got      uint64
	Endpoint string // redacted
}

// ErrChainID is wrapped by *ChainIDError.
var ErrChainID = errors.New("rail_wrong_chain")

func (e *ChainIDError) Error() string {
	return fmt.Sprintf("%s: the rail for %s (%s) answers eth_chainId %d, but %s is chain %d: refused",
		ErrChainID, e.Chain, e.Endpoint, e.Got, e.Chain, e.Want)
}

func (e *ChainIDError) Unwrap() error { return ErrChainID }

// checkChainID asks the node its chain id once (until one call succeeds)
// and refuses a known chain name served by a node on another chain.
func (r *evmRail) checkChainID(ctx context.Context) error {
	r.idMu.Lock()
	ok := r.idOK
	r.idMu.Unlock()
	if ok {
		return nil
	}
	// Not under the lock: checks waiting on a node that is down must not
	// queue behind each other's timeouts.
	raw, err := r.c.call(ctx, "eth_chainId")
	if err != nil {
		return err
	}
	id, err := quantityUint64(raw)
	if err != nil {
		return fmt.Errorf("%w: eth_chainId: %v", ErrMalformed, err)
	}
	if want, known := KnownChainIDs[r.chain]; known && want != id {
		return &ChainIDError{Chain: r.chain, Want: want, Got: id, Endpoint: r.c.redacted}
	}
	r.idMu.Lock()
	defer r.idMu.Unlock()
	if _, known := KnownChainIDs[r.chain]; !known && !r.idOK {
		r.log.Info("rail chain id accepted from the node", "chain", r.chain, "chain_id", id, "url", r.c.redacted)
	}
	r.idOK, r.nodeID = true, id
	return nil
}

type evmReceipt struct {
	TransactionHash string   `json:"transactionHash"`
	BlockNumber     string   `json:"blockNumber"`
	Status          *string  `json:"status"`
	From            string   `json:"from"`
	To              *string  `json:"to"`
	Logs            []evmLog `json:"logs"`
}

type evmLog struct {
	Address string   `json:"address"`
	Topics  []string `json:"topics"`
	Data    string   `json:"data"`
}

type evmTx struct {
	Hash        string  `json:"hash"`
	From        string  `json:"from"`
	To          *string `json:"to"`
	Value       string  `json:"value"`
	BlockNumber *string `json:"blockNumber"`
}

// Check reads the receipt, the head and, for the native coin, the
// transaction; see the package doc and docs/rails.md for the rules.
func (r *evmRail) Check(ctx context.Context, w Want) (Result, error) {
	res := Result{Chain: r.chain, Tx: strings.ToLower(strings.TrimSpace(w.Tx)), Amount: strings.TrimSpace(w.Amount)}
	p, done := prepare(r.reg, r.chain, w, &res)
	if done {
		return res, nil
	}
	if !isTxHash(res.Tx) {
		return mismatch(res, "%q is not an EVM transaction hash (0x and 64 hex digits)", truncate(w.Tx, 80)), nil
	}
	if err := r.checkChainID(ctx); err != nil {
		return Result{}, err
	}

	raw, err := r.c.call(ctx, "eth_getTransactionReceipt", res.Tx)
	if err != nil {
		var re *RPCError
		if errors.As(err, &re) && strings.Contains(strings.ToLower(re.Message), indexingInProgress) {
			res.State, res.Reason = Pending, "the node is still indexing transactions"
			return res, nil
		}
		return Result{}, err
	}
	rcpt, err := decodeReceipt(raw)
	if err != nil {
		return Result{}, err
	}
	if rcpt == nil {
		res.State, res.Reason = Pending, "transaction not found (yet)"
		return res, nil
	}
	if !strings.EqualFold(rcpt.TransactionHash, res.Tx) {
		return Result{}, fmt.Errorf("%w: eth_getTransactionReceipt answered for another transaction", ErrMalformed)
	}
	block, err := parseQuantity(rcpt.BlockNumber)
	if err == nil {
		res.Block, err = fitUint64(block)
	}
	if err != nil {
		return Result{}, fmt.Errorf("%w: receipt blockNumber: %v", ErrMalformed, err)
	}
	status, err := parseQuantity(*rcpt.Status)
	if err != nil || status.Cmp(big.NewInt(1)) > 0 {
		return Result{}, fmt.Errorf("%w: receipt status %q", ErrMalformed, truncate(*rcpt.Status, 20))
	}

	raw, err = r.c.call(ctx, "eth_blockNumber")
	if err != nil {
		return Result{}, err
	}
	head, err := quantityUint64(raw)
	if err != nil {
		return Result{}, fmt.Errorf("%w: eth_blockNumber: %v", ErrMalformed, err)
	}
	if head >= res.Block {
		res.Confirmations = head - res.Block + 1
	}
	if res.Confirmations < r.depth {
		res.State = Pending
		res.Reason = fmt.Sprintf("%d of %d confirmations", res.Confirmations, r.depth)
		return res, nil
	}
	if status.Sign() == 0 {
		res.State, res.Reason = Failed, "the transaction reverted (receipt status 0)"
		res.From = lowerAddr(rcpt.From)
		return res, nil
	}
	if p.token.Native {
		return r.checkNative(ctx, p, res)
	}
	return checkTransferLogs(p, rcpt, res)
}

// checkNative compares the transaction's to and value (a plain transfer;
// native coin moved by a contract's internal call is not seen).
func (r *evmRail) checkNative(ctx context.Context, p prepared, res Result) (Result, error) {
	raw, err := r.c.call(ctx, "eth_getTransactionByHash", res.Tx)
	if err != nil {
		return Result{}, err
	}
	if string(raw) == "null" {
		// The receipt was there a moment ago: a node behind a load
		// balancer, or a reorg. Not yet.
		res.State, res.Reason = Pending, "transaction not found (yet)"
		return res, nil
	}
	var tx evmTx
	if err := json.Unmarshal(raw, &tx); err != nil {
		return Result{}, fmt.Errorf("%w: eth_getTransactionByHash: %v", ErrMalformed, err)
	}
	if !strings.EqualFold(tx.Hash, res.Tx) {
		return Result{}, fmt.Errorf("%w: eth_getTransactionByHash answered for another transaction", ErrMalformed)
	}
	from, err := NormalizeAddress(r.chain, tx.From)
	if err != nil {
		return Result{}, fmt.Errorf("%w: transaction from: %v", ErrMalformed, err)
	}
	res.From = from
	value, err := parseQuantity(tx.Value)
	if err != nil {
		return Result{}, fmt.Errorf("%w: transaction value: %v", ErrMalformed, err)
	}
	if tx.To == nil {
		return mismatch(res, "the transaction creates a contract; it pays no one"), nil
	}
	to, err := NormalizeAddress(r.chain, *tx.To)
	if err != nil {
		return Result{}, fmt.Errorf("%w: transaction to: %v", ErrMalformed, err)
	}
	if !contains(p.to, to) {
		res.To = to
		res.Paid = value.String()
		return mismatch(res, "the transaction pays %s %s to %s, not to %s", formatOr(value, p.token), p.token.Symbol, to, strings.Join(p.to, " or ")), nil
	}
	return settle(p, res, to, value), nil
}

// checkTransferLogs finds the Transfer events of the wanted token's
// contract to our wallets and sums them per wallet.
func checkTransferLogs(p prepared, rcpt *evmReceipt, res Result) (Result, error) {
	type credit struct {
		sum  *big.Int
		from string
	}
	ours := map[string]*credit{}    // our wallet → paid by the wanted contract
	others := map[string]*big.Int{} // contract → paid to our wallets by another contract
	var strangers []string          // recipients of the wanted contract that are not ours
	for i, lg := range rcpt.Logs {
		if len(lg.Topics) != 3 || !strings.EqualFold(lg.Topics[0], transferTopic) {
			// ERC-721 Transfer has the same signature with the token id
			// indexed (4 topics): not a fungible payment.
			continue
		}
		contract, err := NormalizeAddress("", lg.Address)
		if err != nil {
			return Result{}, fmt.Errorf("%w: log %d address: %v", ErrMalformed, i, err)
		}
		from, err1 := topicAddress(lg.Topics[1])
		to, err2 := topicAddress(lg.Topics[2])
		value, err3 := word(lg.Data)
		if err := errors.Join(err1, err2, err3); err != nil {
			return Result{}, fmt.Errorf("%w: log %d: %v", ErrMalformed, i, err)
		}
		switch {
		case contract == p.token.Address && contains(p.to, to):
			c := ours[to]
			if c == nil {
				c = &credit{sum: new(big.Int), from: from}
				ours[to] = c
			}
			c.sum.Add(c.sum, value)
		case contract == p.token.Address:
			if !contains(strangers, to) {
				strangers = append(strangers, to)
			}
		case contains(p.to, to):
			if others[contract] == nil {
				others[contract] = new(big.Int)
			}
			others[contract].Add(others[contract], value)
		}
	}
	if len(ours) == 0 {
		switch {
		case len(others) > 0:
			contracts := make([]string, 0, len(others))
			for c := range others {
				contracts = append(contracts, c)
			}
			sort.Strings(contracts)
			return mismatch(res, "the transaction pays our wallet in token contract %s, not %s (%s)", strings.Join(contracts, ", "), p.token.Symbol, p.token.Address), nil
		case len(strangers) > 0:
			sort.Strings(strangers)
			return mismatch(res, "the transaction pays %s to %s, not to %s", p.token.Symbol, strings.Join(strangers, ", "), strings.Join(p.to, " or ")), nil
		}
		return mismatch(res, "the transaction holds no %s (%s) Transfer", p.token.Symbol, p.token.Address), nil
	}
	// Several of our wallets paid in one transaction: judge the best paid.
	var best string
	for w, c := range ours {
		if best == "" || c.sum.Cmp(ours[best].sum) > 0 || (c.sum.Cmp(ours[best].sum) == 0 && w < best) {
			best = w
		}
	}
	res.From = ours[best].from
	return settle(p, res, best, ours[best].sum), nil
}

// settle compares what wallet to was paid with the wanted amount.
func settle(p prepared, res Result, to string, paid *big.Int) Result {
	res.To, res.Paid = to, paid.String()
	switch paid.Cmp(p.amount) {
	case 0:
		res.State = Verified
	case 1:
		res.State = Verified
		res.Warnings = append(res.Warnings, "overpaid")
	default:
		return mismatch(res, "underpaid: %s %s paid, %s wanted", formatOr(paid, p.token), p.token.Symbol, formatOr(p.amount, p.token))
	}
	return res
}

func decodeReceipt(raw json.RawMessage) (*evmReceipt, error) {
	if string(raw) == "null" {
		return nil, nil
	}
	var rc evmReceipt
	if err := json.Unmarshal(raw, &rc); err != nil {
		return nil, fmt.Errorf("%w: eth_getTransactionReceipt: %v", ErrMalformed, err)
	}
	if rc.Status == nil {
		// Pre-Byzantium receipts carry a state root instead: no chain
		// envelopd knows produces them any more.
		return nil, fmt.Errorf("%w: eth_getTransactionReceipt: receipt without status", ErrMalformed)
	}
	return &rc, nil
}

// quantityBig parses an Ethereum JSON-RPC QUANTITY (a JSON string "0x"
// and 1 to 64 hex digits: at most a uint256).
func quantityBig(raw json.RawMessage) (*big.Int, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("quantity %s: not a string", truncate(string(raw), 40))
	}
	return parseQuantity(s)
}

// parseQuantity parses the text of a QUANTITY.
func parseQuantity(s string) (*big.Int, error) {
	if len(s) < 3 || len(s) > 66 || (s[:2] != "0x" && s[:2] != "0X") || !isHex(s[2:]) {
		return nil, fmt.Errorf("quantity %q: want 0x and 1 to 64 hex digits", truncate(s, 80))
	}
	n, _ := new(big.Int).SetString(s[2:], 16)
	return n, nil
}

// quantityUint64 parses a QUANTITY that must fit 64 bits (block numbers,
// chain ids, status).
func quantityUint64(raw json.RawMessage) (uint64, error) {
	n, err := quantityBig(raw)
	if err != nil {
		return 0, err
	}
	return fitUint64(n)
}

func fitUint64(n *big.Int) (uint64, error) {
	if !n.IsUint64() {
		return 0, fmt.Errorf("quantity 0x%x: larger than 64 bits", n)
	}
	return n.Uint64(), nil
}

// word parses a 32-byte DATA value ("0x" and 64 hex digits) as a uint256.
func word(s string) (*big.Int, error) {
	if len(s) != 66 || s[:2] != "0x" || !isHex(s[2:]) {
		return nil, fmt.Errorf("data %q: want one 32-byte word", truncate(s, 80))
	}
	n, _ := new(big.Int).SetString(s[2:], 16)
	return n, nil
}

// topicAddress takes the address out of an indexed address topic: 12 zero
// bytes, then 20 address bytes.
func topicAddress(s string) (string, error) {
	if len(s) != 66 || s[:2] != "0x" || !isHex(s[2:]) {
		return "", fmt.Errorf("topic %q: want 32 bytes", truncate(s, 80))
	}
	if strings.Trim(s[2:26], "0") != "" {
		return "", fmt.Errorf("topic %q: not an address", truncate(s, 80))
	}
	return "0x" + strings.ToLower(s[26:]), nil
}

func isTxHash(s string) bool { return len(s) == 66 && s[:2] == "0x" && isHex(s[2:]) }

func lowerAddr(s string) string {
	if a, err := NormalizeAddress("", s); err == nil {
		return a
	}
	return ""
}
