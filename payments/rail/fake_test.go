package rail

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// answer is what the fake node answers one method with: a result, a
// JSON-RPC error, a raw body, an HTTP status, or (block) nothing until
// the test ends.
type answer struct {
	Result json.RawMessage `json:"result"`
	Error  *RPCError       `json:"error"`
	Body   string          `json:"body"`   // raw body instead of a JSON-RPC response
	Status int             `json:"status"` // HTTP status; 200 when 0
	Block  bool            `json:"block"`  // never answer (a slow node)
}

// fakeNode is an in-process JSON-RPC node on loopback serving canned
// answers by method, recording the calls it got.
type fakeNode struct {
	t   *testing.T
	srv *httptest.Server

	mu      sync.Mutex
	answers map[string]answer
	calls   []fakeCall
	stop    chan struct{}
}

type fakeCall struct {
	Method string
	Params []json.RawMessage
}

func newFakeNode(t *testing.T, answers map[string]answer) *fakeNode {
	return newFakeNodeAt(t, "", answers)
}

// newFakeNodeAt starts the fake on addr ("" for any free loopback port).
func newFakeNodeAt(t *testing.T, addr string, answers map[string]answer) *fakeNode {
	t.Helper()
	f := &fakeNode{t: t, answers: map[string]answer{}, stop: make(chan struct{})}
	for k, v := range answers {
		f.answers[k] = v
	}
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	if addr != "" {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("listening on %s again: %v", addr, err)
		}
		f.srv.Listener.Close()
		f.srv.Listener = l
	}
	f.srv.Start()
	t.Cleanup(func() {
		close(f.stop)
		f.srv.Close()
	})
	return f
}

func (f *fakeNode) set(method string, a answer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answers[method] = a
}

func (f *fakeNode) methods() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.calls {
		out = append(out, c.Method)
	}
	return out
}

func (f *fakeNode) serve(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ID     json.RawMessage   `json:"id"`
		Method string            `json:"method"`
		Params []json.RawMessage `json:"params"`
	}
	b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" || json.Unmarshal(b, &req) != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.calls = append(f.calls, fakeCall{Method: req.Method, Params: req.Params})
	a, ok := f.answers[req.Method]
	f.mu.Unlock()
	if !ok {
		a = answer{Error: &RPCError{Code: -32601, Message: "the method " + req.Method + " does not exist/is not available"}}
	}
	if a.Block {
		select {
		case <-f.stop:
		case <-r.Context().Done():
		}
		return
	}
	if a.Status != 0 {
		w.WriteHeader(a.Status)
	}
	if a.Body != "" {
		io.WriteString(w, a.Body)
		return
	}
	resp := map[string]any{"jsonrpc": "2.0", "id": req.ID}
	if a.Error != nil {
		resp["error"] = a.Error
	} else if a.Result == nil {
		resp["result"] = nil
	} else {
		resp["result"] = a.Result
	}
	json.NewEncoder(w).Encode(resp)
}

// url is the fake's endpoint with a secret in its path and query, so any
// test can check the secret never leaks.
func (f *fakeNode) url() string { return f.srv.URL + "/v2/" + fakeSecret + "?apikey=" + fakeSecret }

const fakeSecret = "sEcReT-KeY-0123456789"

func noSecret(t *testing.T, where, s string) {
	t.Helper()
	if strings.Contains(s, fakeSecret) {
		t.Errorf("%s holds the endpoint's secret: %s", where, s)
	}
}

// openRail opens the one rail chain=url with the given --token and
// --confirmations values, failing the test on error.
func openRail(t *testing.T, chain, url string, tokens, confs []string, timeout time.Duration) Rail {
	t.Helper()
	cfg, err := ParseConfig([]string{chain + "=" + url}, nil, nil, tokens, confs, timeout)
	if err != nil {
		t.Fatal(err)
	}
	set, err := Open(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, ok := set.Rail(chain)
	if !ok {
		t.Fatalf("no rail for %s", chain)
	}
	return r
}

// loadScenarios reads every scenario file of testdata/dir.
func loadScenarios(t testing.TB, dir string) map[string]scenario {
	files, err := filepath.Glob(filepath.Join("testdata", dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios in testdata/%s: %v", dir, err)
	}
	out := map[string]scenario{}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var sc scenario
		if err := json.Unmarshal(b, &sc); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		out[filepath.Base(file)] = sc
	}
	return out
}
