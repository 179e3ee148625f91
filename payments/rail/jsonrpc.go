package rail

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"
)

// Errors of a JSON-RPC call. All are transient for the caller (Rail.Check
// returns them; the runner retries with backoff). Their texts never hold
// the endpoint URL, which may carry an API key.
var (
	// ErrUnreachable: the endpoint could not be reached, or the call ran
	// out of time.
	ErrUnreachable = errors.New("rail_unreachable")
	// ErrTooLarge: the answer exceeded the response bound.
	ErrTooLarge = errors.New("rail_response_too_large")
	// ErrMalformed: the answer is not the JSON-RPC 2.0 response the method
	// documents (bad JSON, wrong types, out-of-range numbers).
	ErrMalformed = errors.New("rail_malformed_response")
	// ErrHTTPStatus: the endpoint answered with an HTTP status other than 200.
	ErrHTTPStatus = errors.New("rail_http_status")
)

// RPCError is a JSON-RPC 2.0 error object returned by the node.
type RPCError struct {
	Code    int64  `json:"code"`
	Message string `json:"message"`
}

func (e *RPCError) Error() string {
	return fmt.Sprintf("rail_rpc_error: %d %s", e.Code, truncate(e.Message, 200))
}

// client speaks JSON-RPC 2.0 over HTTP POST (one request per call, no
// batches) to one endpoint, bounding each answer in size and time.
type client struct {
	endpoint string // secret: never in an error or a log line
	redacted string
	hc       *http.Client
	timeout  time.Duration
	max      int64
	id       atomic.Uint64
}

func newClient(endpoint string, timeout time.Duration, max int64) *client {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if max <= 0 {
		max = DefaultMaxResponse
	}
	return &client{
		endpoint: endpoint,
		redacted: Redact(endpoint),
		timeout:  timeout,
		max:      max,
		hc: &http.Client{
			// The context deadline bounds the call; the client timeout
			// is the backstop should a caller pass a context without one.
			Timeout: timeout,
			// A redirect could lead the POST (and the key in its URL)
			// elsewhere: JSON-RPC endpoints do not redirect.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
}

type rpcRequest struct {
	JSONRPC string `json:"jsonrpc"`
	ID      uint64 `json:"id"`
	Method  string `json:"method"`
	Params  []any  `json:"params"`
}

type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *RPCError       `json:"error"`
}

// call runs method with params and returns the raw result ("null" for a
// null result). A JSON-RPC error object is returned as *RPCError.
func (c *client) call(ctx context.Context, method string, params ...any) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if params == nil {
		params = []any{}
	}
	id := c.id.Add(1)
	body, err := json.Marshal(rpcRequest{JSONRPC: "2.0", ID: id, Method: method, Params: params})
	if err != nil {
		return nil, fmt.Errorf("%s: encoding the request: %w", method, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%w: %s at %s: bad endpoint", ErrUnreachable, method, c.redacted)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %s at %s: %s", ErrUnreachable, method, c.redacted, scrub(err, c.endpoint))
	}
	defer resp.Body.Close()
	// Read one byte past the bound to tell "exactly max" from "more".
	raw, err := io.ReadAll(io.LimitReader(resp.Body, c.max+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %s at %s: reading the answer: %s", ErrUnreachable, method, c.redacted, scrub(err, c.endpoint))
	}
	if int64(len(raw)) > c.max {
		return nil, fmt.Errorf("%w: %s at %s: more than %d bytes", ErrTooLarge, method, c.redacted, c.max)
	}
	if resp.StatusCode != http.StatusOK {
		// Some nodes answer a JSON-RPC error with a non-200 status: keep it.
		var r rpcResponse
		if json.Unmarshal(raw, &r) == nil && r.Error != nil {
			return nil, r.Error
		}
		return nil, fmt.Errorf("%w: %s at %s: HTTP %d", ErrHTTPStatus, method, c.redacted, resp.StatusCode)
	}
	var r rpcResponse
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("%w: %s at %s: %v", ErrMalformed, method, c.redacted, err)
	}
	if r.Error != nil {
		return nil, r.Error
	}
	if r.JSONRPC != "2.0" {
		return nil, fmt.Errorf("%w: %s at %s: not a JSON-RPC 2.0 response", ErrMalformed, method, c.redacted)
	}
	if string(r.ID) != fmt.Sprint(id) {
		return nil, fmt.Errorf("%w: %s at %s: answer to another request (id %s, want %d)", ErrMalformed, method, c.redacted, truncate(string(r.ID), 40), id)
	}
	if len(r.Result) == 0 {
		return nil, fmt.Errorf("%w: %s at %s: no result and no error", ErrMalformed, method, c.redacted)
	}
	return r.Result, nil
}

// scrub gives an error's text without the endpoint URL: net/http's
// *url.Error quotes the URL it tried, API key included.
func scrub(err error, endpoint string) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "timed out"
	}
	s := err.Error()
	if endpoint != "" {
		s = strings.ReplaceAll(s, endpoint, "(endpoint)")
	}
	if u, perr := url.Parse(endpoint); perr == nil {
		for _, secret := range []string{u.RawQuery, u.Path, u.User.String()} {
			if len(secret) > 1 {
				s = strings.ReplaceAll(s, secret, "…")
			}
		}
	}
	return s
}
