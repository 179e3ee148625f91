package mcp

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/envelopd/envelopd/api"
)

// SessionTimeout closes an HTTP session idle this long (a client that
// never ends its session holds no memory for ever).
const SessionTimeout = 30 * time.Minute

// HTTPOptions configure NewHTTPHandler.
type HTTPOptions struct {
	Keys     api.KeyStore     // the API's keys (required)
	Throttle api.AuthThrottle // failed keys count here, as for the API (default: none)
	MaxBody  int64            // largest request body (default api.DefaultMaxBody)
}

// NewHTTPHandler serves cfg's MCP server over streamable HTTP (MCP
// 2025-06-18 "Transports") at whatever path it is mounted on (/mcp).
// Every request carries `Authorization: Bearer KEY`, an API key (RFC 6750
// §2.1) checked as the API checks it (api.CheckKey: constant time, the
// failures counted by Throttle, a refused IP answered 429 with
// Retry-After); the key's inbox scope is the session's principal, and a
// session is bound to its key (the SDK refuses a session id presented
// with another key). cfg.Principal is ignored.
func NewHTTPHandler(cfg Config, o HTTPOptions) http.Handler {
	cfg.Principal = nil
	srv := NewServer(cfg)
	if o.Throttle == nil {
		o.Throttle = api.NoThrottle{}
	}
	if o.MaxBody <= 0 {
		o.MaxBody = api.DefaultMaxBody
	}
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv },
		&sdk.StreamableHTTPOptions{Logger: cfg.Logger, MaxRequestBodyBytes: o.MaxBody, SessionTimeout: SessionTimeout})
	verify := func(ctx context.Context, key string, r *http.Request) (*auth.TokenInfo, error) {
		id, _, _ := api.ParseKey(key)
		p, err := api.CheckKey(ctx, o.Keys, key)
		if errors.Is(err, api.ErrBadKey) {
			o.Throttle.Fail(clientIP(r), id)
			return nil, auth.ErrInvalidToken
		}
		if err != nil {
			return nil, err
		}
		o.Throttle.Succeed(clientIP(r), id)
		return &auth.TokenInfo{UserID: p.KeyID, Extra: map[string]any{principalKey: p}}, nil
	}
	authed := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d, ok := o.Throttle.Allow(clientIP(r)); !ok {
			w.Header().Set("Retry-After", strconv.Itoa(max(1, int((d+time.Second-1)/time.Second))))
			http.Error(w, "too many failed API keys from this address", http.StatusTooManyRequests)
			return
		}
		// wait_for_message may hold a response for MaxWait: the server's
		// write deadline is extended for this request only.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(MaxWait + time.Minute))
		authed.ServeHTTP(w, r)
	})
}

func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
