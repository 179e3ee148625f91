// Package rail verifies Envelopay payment proofs on the chain they name
// (Envelopay v0.2.0, "Verification": "Payment proof per the rail's
// verification method (tx exists, amount matches, recipient matches)").
//
// A Rail answers one question about one transaction: did it pay Want.To
// Want.Amount of Want.Token, and how deep is it? EVM chains are read with
// plain JSON-RPC (eth_getTransactionReceipt, eth_getTransactionByHash,
// eth_blockNumber; ERC-20 Transfer logs), Solana with getTransaction
// (jsonParsed). Answers from the node are untrusted input: bounded in size
// and time, and a malformed answer is an error, never a panic.
//
// The package holds no state of its own beyond its configuration; the
// durable queue of checks, their leases and retries live in the store and
// the payments runner.
package rail

import "context"

// State is the outcome of one check, as stored and shown (docs/payments.md).
type State string

const (
	// Pending: the transaction is not (yet) visible, or has fewer
	// confirmations than required. The caller checks again later and
	// turns a long-pending check into NotFound after its deadline.
	Pending State = "pending"
	// Verified: succeeded, paid at least Want.Amount of Want.Token to one
	// of Want.To, with the required confirmations.
	Verified State = "verified"
	// Mismatch: the transaction exists and succeeded but does not pay
	// what was wanted (recipient, token, or amount); Result.Reason says
	// which in words a person can read.
	Mismatch State = "mismatch"
	// Failed: the transaction was included but reverted (EVM receipt
	// status 0, Solana meta.err not null).
	Failed State = "failed"
	// NotFound is never returned by a Rail: the caller decides it when a
	// Pending check passes its deadline.
	NotFound State = "not_found"
)

// Kind is the family of a chain: how its transactions are named and read.
type Kind string

const (
	EVM    Kind = "evm"
	Solana Kind = "solana"
)

// Want is what a proof must show. Tx is already normalised (proof
// identity: EVM lower-case 0x-hex of 32 bytes, Solana base58 of 64 bytes).
type Want struct {
	Chain  string   // the Envelopay chain name, lower case ("base", "solana")
	Tx     string   // the transaction hash / signature
	Token  string   // symbol ("USDC", "ETH", "SOL") or contract address / mint
	Amount string   // smallest-unit decimal string, as in the Envelopay message
	To     []string // acceptable receiving wallets (ours); one must be paid
}

// Result is what the chain showed about a Want.
type Result struct {
	State         State    `json:"state"`
	Chain         string   `json:"chain"`
	Tx            string   `json:"tx"`
	Token         string   `json:"token,omitempty"`  // the token as resolved: contract address / mint, or the native symbol
	Amount        string   `json:"amount,omitempty"` // wanted, smallest units
	Paid          string   `json:"paid,omitempty"`   // paid to To, smallest units
	To            string   `json:"to,omitempty"`     // the wallet that was paid
	From          string   `json:"from,omitempty"`   // the payer address
	Block         uint64   `json:"block,omitempty"`  // EVM block number / Solana slot
	Confirmations uint64   `json:"confirmations,omitempty"`
	Reason        string   `json:"reason,omitempty"`   // why not verified, for a person
	Warnings      []string `json:"warnings,omitempty"` // e.g. "overpaid"
}

// Rail checks transactions on one chain.
type Rail interface {
	// Chain is the Envelopay chain name this rail serves.
	Chain() string
	// Check reads the chain once. A returned error is transient (node
	// unreachable, malformed or oversized answer, timeout): the caller
	// retries with backoff. A definite outcome, including Pending, is a
	// Result with a nil error.
	Check(ctx context.Context, w Want) (Result, error)
}
