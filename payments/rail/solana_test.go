package rail

import (
	"context"
	"encoding/json"
	"testing"
)

// TestSolanaScenarios runs testdata/solana: hand-written getTransaction
// (jsonParsed) answers in the shape the Solana JSON-RPC documentation
// gives: a SOL transfer, an SPL transferChecked to an associated token
// account created in the same transaction, a failed transaction, and a
// transfer made by inner instructions.
func TestSolanaScenarios(t *testing.T) { runScenarios(t, "solana") }

// TestSolanaRequest pins the getTransaction request: the signature, then
// encoding jsonParsed, maxSupportedTransactionVersion 0 and the
// configured commitment.
func TestSolanaRequest(t *testing.T) {
	t.Parallel()
	for _, commitment := range []string{"confirmed", "finalized"} {
		node := newFakeNode(t, map[string]answer{"getTransaction": {Result: json.RawMessage("null")}})
		r := openRail(t, "solana", node.url(), nil, []string{"solana=" + commitment}, 0)
		sig := "5VERv8NMvzbJMEkV8xnrLkEaWRtSz9CosKDYjCJjBRnbJLgp8uirBgmQpjKhoR4tjF3ZpRzrFmBV6UjKdiSZkQUW"
		res, err := r.Check(context.Background(), Want{Chain: "solana", Tx: sig, Token: "SOL", Amount: "1", To: []string{"CiQV9cJ3sZdcSWuTYyKXFNVDuyLn821552xJg9DuAw6v"}})
		if err != nil || res.State != Pending {
			t.Fatalf("Check = %+v, %v; want pending", res, err)
		}
		node.mu.Lock()
		calls := node.calls
		node.mu.Unlock()
		if len(calls) != 1 || calls[0].Method != "getTransaction" || len(calls[0].Params) != 2 {
			t.Fatalf("calls = %+v", calls)
		}
		var gotSig string
		var opts map[string]any
		json.Unmarshal(calls[0].Params[0], &gotSig)
		json.Unmarshal(calls[0].Params[1], &opts)
		want := map[string]any{"encoding": "jsonParsed", "maxSupportedTransactionVersion": float64(0), "commitment": commitment}
		if gotSig != sig || len(opts) != len(want) {
			t.Fatalf("params = %s %v", gotSig, opts)
		}
		for k, v := range want {
			if opts[k] != v {
				t.Errorf("%s = %v, want %v", k, opts[k], v)
			}
		}
	}
}
