package rail

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

const (
	testTx     = "0xc9673fd4b03c1982bc12607e0a3a49db6072d04974709655299e556f3647b36e"
	testWallet = "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed"
)

func receiptJSON(mut func(m map[string]any)) json.RawMessage {
	m := map[string]any{
		"transactionHash": testTx, "blockNumber": "0x10", "status": "0x1",
		"from": "0xfb6916095ca1df60bb79ce92ce3ea74c37c5d359", "to": "0x833589fcd6edb6e08f4c7c32d4f71b54bda02913",
		"logs": []any{map[string]any{
			"address": "0x833589fcd6edb6e08f4c7c32d4f71b54bda02913",
			"topics":  []any{transferTopic, "0x000000000000000000000000fb6916095ca1df60bb79ce92ce3ea74c37c5d359", "0x000000000000000000000000" + testWallet[2:]},
			"data":    fmt.Sprintf("0x%064x", 30000000),
		}},
	}
	if mut != nil {
		mut(m)
	}
	b, _ := json.Marshal(m)
	return b
}

// TestHostileAnswers: a node's answer is untrusted input. Malformed JSON,
// wrong types, out-of-range numbers, answers for another request or
// transaction, HTTP errors, redirects, oversized and slow answers all end
// in a typed error, never a panic or a wrong verdict.
func TestHostileAnswers(t *testing.T) {
	t.Parallel()
	log0 := func(m map[string]any) map[string]any { return m["logs"].([]any)[0].(map[string]any) }
	for _, tc := range []struct {
		name    string
		receipt answer
		head    answer
		want    error
	}{
		{name: "not JSON", receipt: answer{Body: "<html>502 Bad Gateway</html>"}, want: ErrMalformed},
		{name: "truncated JSON", receipt: answer{Body: `{"jsonrpc":"2.0","id":2,"result":{"status":"0x1"`}, want: ErrMalformed},
		{name: "no result no error", receipt: answer{Body: `{"jsonrpc":"2.0","id":2}`}, want: ErrMalformed},
		{name: "not JSON-RPC 2.0", receipt: answer{Body: `{"id":2,"result":null}`}, want: ErrMalformed},
		{name: "answer to another id", receipt: answer{Body: `{"jsonrpc":"2.0","id":99,"result":null}`}, want: ErrMalformed},
		{name: "HTTP 503", receipt: answer{Status: 503, Body: "overloaded"}, want: ErrHTTPStatus},
		{name: "HTTP 429 with a JSON-RPC error", receipt: answer{Status: 429, Error: &RPCError{Code: -32005, Message: "rate limited"}}, want: &RPCError{}},
		{name: "redirect", receipt: answer{Status: 302, Body: "elsewhere"}, want: ErrHTTPStatus},
		{name: "receipt is a string", receipt: answer{Result: json.RawMessage(`"0x1"`)}, want: ErrMalformed},
		{name: "status a number", receipt: answer{Result: receiptJSON(func(m map[string]any) { m["status"] = 1 })}, want: ErrMalformed},
		{name: "status missing", receipt: answer{Result: receiptJSON(func(m map[string]any) { delete(m, "status") })}, want: ErrMalformed},
		{name: "status 2", receipt: answer{Result: receiptJSON(func(m map[string]any) { m["status"] = "0x2" })}, want: ErrMalformed},
		{name: "block number huge", receipt: answer{Result: receiptJSON(func(m map[string]any) { m["blockNumber"] = "0x" + strings.Repeat("f", 17) })}, want: ErrMalformed},
		{name: "block number not hex", receipt: answer{Result: receiptJSON(func(m map[string]any) { m["blockNumber"] = "16" })}, want: ErrMalformed},
		{name: "block number 1e400", receipt: answer{Body: strings.Replace(`{"jsonrpc":"2.0","id":2,"result":R}`, "R", strings.Replace(string(receiptJSON(nil)), `"0x10"`, "1e400", 1), 1)}, want: ErrMalformed},
		{name: "receipt of another transaction", receipt: answer{Result: receiptJSON(func(m map[string]any) { m["transactionHash"] = "0x" + strings.Repeat("00", 32) })}, want: ErrMalformed},
		{name: "log value of 33 bytes", receipt: answer{Result: receiptJSON(func(m map[string]any) { log0(m)["data"] = "0x" + strings.Repeat("ff", 33) })}, want: ErrMalformed},
		{name: "log topic not an address", receipt: answer{Result: receiptJSON(func(m map[string]any) { log0(m)["topics"].([]any)[2] = "0x" + strings.Repeat("ff", 32) })}, want: ErrMalformed},
		{name: "log address not an address", receipt: answer{Result: receiptJSON(func(m map[string]any) { log0(m)["address"] = "USDC" })}, want: ErrMalformed},
		{name: "logs an object", receipt: answer{Result: receiptJSON(func(m map[string]any) { m["logs"] = map[string]any{} })}, want: ErrMalformed},
		{name: "head is null", receipt: answer{Result: receiptJSON(nil)}, head: answer{Result: json.RawMessage("null")}, want: ErrMalformed},
		{name: "head negative", receipt: answer{Result: receiptJSON(nil)}, head: answer{Result: json.RawMessage(`"-0x1"`)}, want: ErrMalformed},
		{name: "oversized answer", receipt: answer{Body: `{"jsonrpc":"2.0","id":2,"result":"` + strings.Repeat("a", 64<<10) + `"}`}, want: ErrTooLarge},
		{name: "slow answer", receipt: answer{Block: true}, want: ErrUnreachable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			head := tc.head
			if head.Result == nil && head.Body == "" {
				head = answer{Result: json.RawMessage(`"0x20"`)}
			}
			node := newFakeNode(t, map[string]answer{
				"eth_chainId":               {Result: json.RawMessage(`"0x2105"`)},
				"eth_getTransactionReceipt": tc.receipt,
				"eth_blockNumber":           head,
			})
			cfg, _ := ParseConfig([]string{"base=" + node.url()}, nil, nil, nil, []string{"base=1"}, 300*time.Millisecond)
			cfg.MaxResponse = 32 << 10 // a smaller bound, the same code path
			set, err := Open(context.Background(), cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			r, _ := set.Rail("base")
			start := time.Now()
			res, err := r.Check(context.Background(), Want{Chain: "base", Tx: testTx, Token: "USDC", Amount: "30000000", To: []string{testWallet}})
			var re *RPCError
			switch want := tc.want.(type) {
			case *RPCError:
				if !errors.As(err, &re) {
					t.Fatalf("Check = %+v, %v; want an RPCError", res, err)
				}
			default:
				if !errors.Is(err, want) {
					t.Fatalf("Check = %+v, %v; want %v", res, err, want)
				}
			}
			if tc.name == "slow answer" && time.Since(start) > 5*time.Second {
				t.Errorf("a slow node held the check %s", time.Since(start))
			}
			noSecret(t, "error", err.Error())
		})
	}
}

// TestCallerDeadline: the caller's context bounds the call too.
func TestCallerDeadline(t *testing.T) {
	t.Parallel()
	node := newFakeNode(t, map[string]answer{"eth_chainId": {Block: true}})
	c := newClient(node.url(), time.Hour, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := c.call(ctx, "eth_chainId")
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("call = %v", err)
	}
	noSecret(t, "error", err.Error())
}

// TestNoSecretInTransportErrors: net/http's errors quote the URL they
// tried; the rail's errors must not.
func TestNoSecretInTransportErrors(t *testing.T) {
	t.Parallel()
	// A server that closes every connection without answering.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hj, ok := w.(http.Hijacker)
		if !ok {
			return
		}
		conn, _, _ := hj.Hijack()
		conn.Close()
	}))
	defer srv.Close()
	for _, endpoint := range []string{
		srv.URL + "/v2/" + fakeSecret,
		srv.URL + "/?apikey=" + fakeSecret,
		strings.Replace(srv.URL, "http://", "http://user:"+fakeSecret+"@", 1),
	} {
		c := newClient(endpoint, time.Second, 0)
		_, err := c.call(context.Background(), "eth_chainId")
		if !errors.Is(err, ErrUnreachable) {
			t.Fatalf("call = %v", err)
		}
		noSecret(t, "error", err.Error())
	}
}
