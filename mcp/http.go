package mcp

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"strings"
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
	// Tenants is the per-key state shared with the API (request rate,
	// the revocation watch); default: api.NewTenants(Keys, {}).
	Tenants *api.Tenants
	MaxBody int64 // largest request body (default api.DefaultMaxBody)
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
	if o.Tenants == nil {
		o.Tenants = api.NewTenants(o.Keys, api.TenantLimits{})
	}
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv },
		&sdk.StreamableHTTPOptions{Logger: cfg.Logger, MaxRequestBodyBytes: o.MaxBody, SessionTimeout: SessionTimeout})
	// The key was checked by the wrapper below (as the API checks it,
	// every failure counted); the SDK's middleware only carries the
	// principal into the session (TokenInfo, whose UserID binds the
	// session to the key).
	verify := func(ctx context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		p, ok := r.Context().Value(principalCtx{}).(*api.Principal)
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: p.KeyID, Extra: map[string]any{principalKey: p}}, nil
	}
	authed := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f := strings.Fields(r.Header.Get("Authorization"))
		key := ""
		if len(f) == 2 && strings.EqualFold(f[0], "bearer") {
			key = f[1]
		}
		p, e := api.Authenticate(r.Context(), o.Keys, o.Throttle, cfg.Logger, clientIP(r), key)
		if e != nil {
			o.Tenants.Refused(r.Context(), e)
		}
		if e == nil {
			if e = o.Tenants.Allow(p.KeyID); e != nil {
				p = nil
			}
		}
		if e != nil {
			if e.RetryAfter > 0 {
				w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
			}
			if e.Status == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="envelopd"`)
			}
			writeError(w, e)
			return
		}
		// wait_for_message may hold a response for MaxWait: the server's
		// write deadline is extended for this request only.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(MaxWait + time.Minute))
		// A request that outlives its key (a wait, the event stream) is
		// ended within a second of the key's revocation; the session's
		// next request is refused (401).
		ctx, stop := o.Tenants.Watch(r.Context(), p.KeyID)
		defer stop()
		authed.ServeHTTP(w, r.WithContext(context.WithValue(ctx, principalCtx{}, p)))
	})
}

// principalCtx is the request context key of the checked principal.
type principalCtx struct{}

func writeError(w http.ResponseWriter, e *api.Error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(e)
}

func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
