// Package evmfake is an in-process EVM JSON-RPC node for tests: it
// answers each method from a canned file in payments/rail/testdata/evm
// (the answers of one transaction, written from the Ethereum JSON-RPC
// specification), and can be taken down and brought back. Plain go test
// uses it where the interop suite uses a real geth (internal/gethtest).
package evmfake

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
)

// Node is a running fake node.
type Node struct {
	URL  string
	down atomic.Bool
}

// SetDown makes the node answer every request with 503 (true) or
// answer again (false).
func (n *Node) SetDown(down bool) { n.down.Store(down) }

// Start serves the answers of payments/rail/testdata/evm/file until the
// test ends. A method the file does not answer gets a null result.
func Start(t testing.TB, file string) *Node {
	t.Helper()
	_, self, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(self), "..", "..", "payments", "rail", "testdata", "evm", file))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Answers map[string]struct {
			Result json.RawMessage `json:"result"`
		} `json:"answers"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	n := &Node{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(body, &req) != nil || len(req.ID) == 0 {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		res := json.RawMessage("null")
		if a, ok := f.Answers[req.Method]; ok {
			res = a.Result
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, req.ID, res)
	}))
	t.Cleanup(srv.Close)
	n.URL = srv.URL
	return n
}
