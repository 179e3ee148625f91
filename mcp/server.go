// Package mcp serves envelopd to model-driven agents as a Model Context
// Protocol server (MCP specification 2025-06-18, "Tools"), built
// on the official github.com/modelcontextprotocol/go-sdk: over stdio
// (`envelopd mcp`) and over streamable HTTP at /mcp (`envelopd serve
// --http`, the API's bearer keys).
//
// It is a thin layer over api.Service, the query/command service of the
// HTTP API: every tool decodes its JSON-schema'd arguments, calls one
// service method with the session's principal (its API key's inbox scope)
// and returns the service's answer as structured content. No query and no
// rule lives here; an error is the service's, shown to the model as a tool
// error whose text is the API's error object ({name, message, errors}
// naming the Envelopay codes). docs/mcp.md is the tool reference.
package mcp

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"log/slog"
	"reflect"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/envelopd/envelopd/api"
)

// Config configures a server.
type Config struct {
	Service *api.Service
	// Principal is the caller of a session without a bearer token (stdio:
	// the key given to `envelopd mcp`, or every inbox). Nil: such a
	// session is refused (the HTTP transport sets one per request).
	Principal *api.Principal
	// AICPKey and VacantKey sign the tunnelled-protocol messages of the
	// sign tools (nil: the tool answers that no key is configured).
	AICPKey, VacantKey ed25519.PrivateKey
	// ChainTip reads the tip (seq, hash) of a Vacant chain (store.ChainTip).
	ChainTip func(ctx context.Context, chain string) (int64, string, error)
	Version  string
	Logger   *slog.Logger
}

// server holds the tools' state.
type server struct {
	cfg Config
}

// principalKey is the TokenInfo.Extra key of the HTTP transport's principal.
const principalKey = "envelopd_principal"

// errNoPrincipal is what a session without a caller gets.
var errNoPrincipal = &api.Error{Status: 401, Name: "UnauthorizedError", Message: "no API key for this session"}

// principal is the caller of req: the HTTP request's key, else the
// configured one.
func (s *server) principal(req *sdk.CallToolRequest) (*api.Principal, error) {
	if req != nil && req.Extra != nil && req.Extra.TokenInfo != nil {
		if p, ok := req.Extra.TokenInfo.Extra[principalKey].(*api.Principal); ok {
			return p, nil
		}
		return nil, errNoPrincipal
	}
	if s.cfg.Principal == nil {
		return nil, errNoPrincipal
	}
	return s.cfg.Principal, nil
}

// ToolError is the error a tool returns: the API's error object, whose
// JSON is the tool result's text (a model reads name, message and the
// errors' codes; a program parses it).
type ToolError struct{ API *api.Error }

func (e *ToolError) Error() string {
	b, _ := json.Marshal(e.API)
	return string(b)
}

// toolErr maps an error of the service to a ToolError.
func toolErr(err error) error {
	if err == nil {
		return nil
	}
	var te *ToolError
	if errors.As(err, &te) {
		return te
	}
	if errors.Is(err, context.Canceled) {
		return err
	}
	return &ToolError{API: api.AsError(err)}
}

// invalid is a ValidationError of one field.
func invalid(field, msg string) error {
	return &ToolError{API: &api.Error{Status: 400, Name: "ValidationError", Message: field + ": " + msg,
		Errors: []api.Problem{{Code: "invalid_field", Field: field, Message: msg}}}}
}

// schemaOpts infer the tools' schemas: every json.RawMessage of the tools
// (the envelopay extension object, Envelopay bodies, signed AICP and
// Vacant messages) is a JSON object.
var schemaOpts = &jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
	reflect.TypeFor[json.RawMessage](): {Type: "object"},
}}

// tool is add with the session's principal looked up first: every tool
// but the health check acts for an authenticated caller.
func tool[In, Out any](s *server, srv *sdk.Server, name, desc string, h func(ctx context.Context, p *api.Principal, in In) (Out, error)) {
	add(srv, name, desc, func(ctx context.Context, req *sdk.CallToolRequest, in In) (Out, error) {
		p, err := s.principal(req)
		if err == nil {
			err = p.Need(toolPermission(name))
		}
		if err != nil {
			var zero Out
			return zero, err
		}
		return h(ctx, p, in)
	})
}

// add registers a typed tool with schemas inferred by schemaOpts; h's
// error becomes a tool error (ToolError).
func add[In, Out any](srv *sdk.Server, name, desc string, h func(ctx context.Context, req *sdk.CallToolRequest, in In) (Out, error)) {
	in, err := jsonschema.For[In](schemaOpts)
	if err != nil {
		panic("mcp: input schema of " + name + ": " + err.Error()) // a programming error, caught by every test
	}
	out, err := jsonschema.For[Out](schemaOpts)
	if err != nil {
		panic("mcp: output schema of " + name + ": " + err.Error())
	}
	sdk.AddTool(srv, &sdk.Tool{Name: name, Description: desc, InputSchema: in, OutputSchema: out},
		func(ctx context.Context, req *sdk.CallToolRequest, args In) (*sdk.CallToolResult, Out, error) {
			o, err := h(ctx, req, args)
			return nil, o, toolErr(err)
		})
}

// NewServer returns the MCP server of cfg with every tool registered.
func NewServer(cfg Config) *sdk.Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	srv := sdk.NewServer(&sdk.Implementation{Name: "envelopd", Title: "envelopd mail for agents", Version: cfg.Version},
		&sdk.ServerOptions{Logger: cfg.Logger, Instructions: instructions})
	s := &server{cfg: cfg}
	s.register(srv)
	return srv
}

const instructions = `envelopd is a mail processor for agents speaking Envelopay (payments by email: WHICH, METHODS, ORDER, FULFILL, PAY, INVOICE, OFFER, ACCEPT, OOPS). An inbox is an email address. Send typed messages with send_envelopay, answer with reply, and wait for the counterpart's answer with wait_for_message (pass the message_id you sent as after_message_id). Every message carries envelopd's verdicts in "envelopay" (status accepted/quarantined/duplicate, errors with codes, DKIM results, and authenticated_as: the From domain when SPF/DKIM/DMARC or a trusted ARC sealer prove it, else null — act on value only from an authenticated sender) and, when it carries a payment proof, "payment" (state unverified/pending/verified/mismatch/failed/not_found/duplicate, chain, tx, paid, to, from, authenticated, reason): accepted means the proof is new, not that money moved; ship work for value only when payment.state is verified. A tool error's text is JSON {name, message, errors:[{code, field, message}]}: fix the fields the codes name and try again.`
