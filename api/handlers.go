package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// DefaultMaxBody is the default bound on a request body (attachments
// travel base64-encoded in JSON).
const DefaultMaxBody = 32 << 20

// Handler serves the API under /v0.
type Handler struct {
	svc      *Service
	keys     KeyStore
	throttle AuthThrottle
	tenants  *Tenants
	maxBody  int64
	log      *slog.Logger
	mux      *http.ServeMux
	// patterns are the authenticated routes, for the permission table's
	// test (permissions.go).
	patterns []string
}

// HandlerOptions configure NewHandler.
type HandlerOptions struct {
	Keys     KeyStore     // default: the service's store
	Throttle AuthThrottle // default: NoThrottle
	// Tenants is the per-key state (request rate, websockets, the
	// revocation watch), shared with the other front ends that take API
	// keys (MCP); default: NewTenants(Keys, TenantLimits{}).
	Tenants *Tenants
	MaxBody int64 // default: DefaultMaxBody
	Logger  *slog.Logger
}

// authed is a handler given the authenticated principal.
type authed func(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error)

// NewHandler returns the HTTP handler of svc.
func NewHandler(svc *Service, o HandlerOptions) *Handler {
	h := &Handler{svc: svc, keys: o.Keys, throttle: o.Throttle, tenants: o.Tenants, maxBody: o.MaxBody, log: o.Logger, mux: http.NewServeMux()}
	if h.keys == nil {
		h.keys = svc.cfg.Store
	}
	if h.tenants == nil {
		h.tenants = NewTenants(h.keys, TenantLimits{})
	}
	if h.throttle == nil {
		h.throttle = NoThrottle{}
	}
	if h.maxBody <= 0 {
		h.maxBody = DefaultMaxBody
	}
	if h.log == nil {
		h.log = svc.cfg.Logger
	}
	h.routes()
	return h
}

func (h *Handler) routes() {
	m := h.mux
	a := func(pattern string, f authed) { m.Handle(pattern, h.auth(h.permitted(pattern, f))) }
	a("GET /v0/inboxes", h.listInboxes)
	a("POST /v0/inboxes", h.createInbox)
	a("GET /v0/inboxes/{inbox_id}", h.getInbox)
	a("PATCH /v0/inboxes/{inbox_id}", h.updateInbox)
	a("DELETE /v0/inboxes/{inbox_id}", h.deleteInbox)
	a("GET /v0/inboxes/{inbox_id}/messages", h.listMessages)
	a("GET /v0/inboxes/{inbox_id}/messages/{message_id}", h.getMessage)
	a("PATCH /v0/inboxes/{inbox_id}/messages/{message_id}", h.updateMessage)
	a("DELETE /v0/inboxes/{inbox_id}/messages/{message_id}", h.deleteMessage)
	a("GET /v0/inboxes/{inbox_id}/messages/{message_id}/raw", h.getRaw)
	a("GET /v0/inboxes/{inbox_id}/messages/{message_id}/attachments/{attachment_id}", h.getAttachment)
	a("POST /v0/inboxes/{inbox_id}/messages/send", h.idempotent(h.send))
	a("POST /v0/inboxes/{inbox_id}/messages/{message_id}/reply", h.idempotent(h.reply(false)))
	a("POST /v0/inboxes/{inbox_id}/messages/{message_id}/reply-all", h.idempotent(h.reply(true)))
	a("POST /v0/inboxes/{inbox_id}/messages/{message_id}/forward", h.idempotent(h.forward))
	a("GET /v0/inboxes/{inbox_id}/events", h.listInboxEvents)
	a("GET /v0/inboxes/{inbox_id}/threads", h.listThreads)
	a("GET /v0/inboxes/{inbox_id}/threads/{thread_id}", h.getThread)
	a("PATCH /v0/inboxes/{inbox_id}/threads/{thread_id}", h.updateThread)
	a("DELETE /v0/inboxes/{inbox_id}/threads/{thread_id}", h.deleteThread)
	a("GET /v0/inboxes/{inbox_id}/threads/{thread_id}/attachments/{attachment_id}", h.getAttachment)
	a("POST /v0/inboxes/{inbox_id}/threads/{thread_id}/reply", h.idempotent(h.replyThread))
	a("GET /v0/inboxes/{inbox_id}/messages/{message_id}/handoffs", h.handoffs("")) // handoffs.go
	a("POST /v0/inboxes/{inbox_id}/messages/{message_id}/hold", h.handoffs("hold"))
	a("POST /v0/inboxes/{inbox_id}/messages/{message_id}/release", h.handoffs("release"))
	a("GET /v0/tokens", h.tokens) // tokens.go: decimals and explorers for display
	a("GET /v0/threads", h.listThreads)
	a("GET /v0/threads/{thread_id}", h.getThread)
	a("PATCH /v0/threads/{thread_id}", h.updateThread)
	a("DELETE /v0/threads/{thread_id}", h.deleteThread)
	a("GET /v0/threads/{thread_id}/attachments/{attachment_id}", h.getAttachment)
	m.HandleFunc("GET /v0/download/{token}", h.download)
	m.HandleFunc("GET /v0", h.websocket) // websocket.go
	h.webhookRoutes(a)                   // webhooks.go
	h.webhookHeaderRoutes(a)             // webhookheaders.go
	h.domainRoutes(a)                    // domains.go
	h.podRoutes(a)                       // pods.go
	h.draftRoutes(a)                     // drafts.go
	h.listRoutes(a)                      // lists.go
	h.apiKeyRoutes(a)                    // apikeys.go
	h.metricsRoutes(a)                   // metrics.go
	h.usageRoutes(a)                     // usage.go
	h.searchRoutes(a)                    // search.go
	h.batchRoutes(a)                     // batch.go
	a("GET /v0/auth/me", h.authMe)       // permissions.go
	// Everything else the SDK has (agent sign-up, sign-in to providers,
	// …): docs/api.md lists them.
	a("/v0/", func(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
		return nil, 0, notServed(r)
	})
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, notFound("no such endpoint: the API is under /v0"))
	})
}

// ServeHTTP implements http.Handler; a panic in a handler is a 500, never
// a dropped connection.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			h.log.Error("api: panic", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(v))
			writeError(w, &Error{Status: http.StatusInternalServerError, Name: "InternalServerError", Message: "internal error"})
		}
	}()
	h.mux.ServeHTTP(w, r)
}

func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// auth checks the Bearer key (RFC 6750 §2.1) and runs f.
func (h *Handler) auth(f authed) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok {
			key, ok = strings.CutPrefix(r.Header.Get("Authorization"), "bearer ")
		}
		p := h.authenticate(w, r, strings.TrimSpace(key))
		if p == nil {
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, h.maxBody)
		v, status, err := f(w, r, p)
		if err != nil {
			e := asError(err)
			if e.Status == http.StatusInternalServerError {
				h.log.Error("api: request failed", "method", r.Method, "path", r.URL.Path, "err", err)
			}
			writeError(w, e)
			return
		}
		if v == nil && status == 0 {
			return // the handler wrote the answer
		}
		if status == 0 {
			status = http.StatusOK
		}
		writeJSON(w, status, v)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // Message-IDs keep their <angle brackets>
	if err := enc.Encode(v); err != nil {
		writeError(w, &Error{Status: http.StatusInternalServerError, Name: "InternalServerError", Message: "internal error"})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// authenticate checks key (Authenticate) and takes the request from the
// key's bucket (Tenants.Allow); on failure it answers 401 or 429 and
// returns nil.
func (h *Handler) authenticate(w http.ResponseWriter, r *http.Request, key string) *Principal {
	p, e := Authenticate(r.Context(), h.keys, h.throttle, h.log, clientIP(r), key)
	if e != nil {
		h.tenants.Refused(r.Context(), e)
	}
	if e == nil {
		e = h.tenants.Allow(p.KeyID)
		if e != nil {
			p = nil
		}
	}
	if e != nil {
		if e.Status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="envelopd"`)
		}
		writeError(w, e)
		return nil
	}
	return p
}

func writeError(w http.ResponseWriter, e *Error) {
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	b, _ := json.Marshal(e)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	w.Write(append(b, '\n'))
}

// answer reads what a route needs of the request (read: the body, the
// list parameters), calls the service with it and answers what that
// returns, status 0 (200).
func answer[In any](r *http.Request, read func(*http.Request) (In, error), call func(In) (any, error)) (any, int, error) {
	in, err := read(r)
	if err != nil {
		return nil, 0, err
	}
	v, err := call(in)
	return v, 0, err
}

// decodeSendAs reads a send body (decodeSend).
func decodeSendAs(r *http.Request) (SendRequest, error) {
	var req SendRequest
	err := decodeSend(r, &req)
	return req, err
}

// decodeAs reads the body as a T (decode).
func decodeAs[T any](r *http.Request) (T, error) {
	var v T
	err := decode(r, &v)
	return v, err
}

// decodeSend reads a send/reply/forward body; ?force=true (which the
// SDK can pass as requestOptions.queryParams, while it strips unknown
// body fields) is the body's force.
func decodeSend(r *http.Request, req *SendRequest) error {
	if err := decode(r, req); err != nil {
		return err
	}
	var force bool
	if err := boolParam(r.URL.Query(), "force", &force); err != nil {
		return err
	}
	req.Force = req.Force || force
	return nil
}

// decode reads a JSON request body into v: one object, fields of the
// right types (unknown fields are ignored, as the SDK may send more),
// within the body limit (413).
func decode(r *http.Request, v any) error {
	// The body is JSON whatever the Content-Type says: curl -d and
	// urllib send application/x-www-form-urlencoded by default.
	b, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return &Error{Status: http.StatusRequestEntityTooLarge, Name: "PayloadTooLargeError",
				Message: fmt.Sprintf("request body over %d bytes", mbe.Limit)}
		}
		return validation("cannot read the request body", nil)
	}
	return DecodeJSON(b, v)
}

// DecodeJSON decodes one JSON object from b into v, naming the field of
// a type error.
func DecodeJSON(b []byte, v any) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		b = []byte("{}")
	}
	if b[0] != '{' {
		return validation("the request body must be a JSON object", []Problem{{Code: "invalid_json", Message: "not an object"}})
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return validation(fmt.Sprintf("field %s: want %s", te.Field, te.Type), []Problem{{Code: "invalid_field", Field: te.Field, Message: "wrong type: want " + te.Type.String()}})
		}
		return validation("bad JSON: "+err.Error(), []Problem{{Code: "invalid_json", Message: err.Error()}})
	}
	if dec.More() {
		return validation("bad JSON: data after the object", []Problem{{Code: "invalid_json", Message: "data after the object"}})
	}
	return nil
}

func (h *Handler) listParams(r *http.Request) (ListParams, error) {
	return ParseList(r.URL.Query())
}

func (h *Handler) listInboxes(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
	return answer(r, h.listParams, func(lp ListParams) (any, error) { return h.svc.ListInboxes(r.Context(), p, lp) })
}

func (h *Handler) createInbox(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
	var req CreateInboxRequest
	if err := decode(r, &req); err != nil {
		return nil, 0, err
	}
	v, created, err := h.svc.CreateInbox(r.Context(), p, req)
	if err != nil {
		return nil, 0, err
	}
	_ = created // the SDK reads 200 either way; client_id makes a repeat return the first
	return v, http.StatusOK, nil
}

func (h *Handler) getInbox(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
	return respond(h.svc.GetInbox(r.Context(), p, r.PathValue("inbox_id")))
}

func (h *Handler) updateInbox(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
	var req struct {
		DisplayName *string `json:"display_name"`
	}
	if err := decode(r, &req); err != nil {
		return nil, 0, err
	}
	return respond(h.svc.UpdateInbox(r.Context(), p, r.PathValue("inbox_id"), req.DisplayName))
}

// respond answers v, status 200, or err.
func respond[T any](v T, err error) (any, int, error) {
	return v, 0, err
}

func noContent(w http.ResponseWriter, err error) (any, int, error) {
	if err != nil {
		return nil, 0, err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil, 0, nil
}

func (h *Handler) deleteInbox(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
	return noContent(w, h.svc.DeleteInbox(r.Context(), p, r.PathValue("inbox_id")))
}

func (h *Handler) listMessages(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
	return answer(r, h.listParams, func(lp ListParams) (any, error) {
		return h.svc.ListMessages(r.Context(), p, r.PathValue("inbox_id"), lp)
	})
}

func (h *Handler) getMessage(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
	return respond(h.svc.GetMessage(r.Context(), p, r.PathValue("inbox_id"), r.PathValue("message_id")))
}

func (h *Handler) updateMessage(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
	return answer(r, decodeAs[UpdateLabels], func(req UpdateLabels) (any, error) {
		return h.svc.UpdateMessage(r.Context(), p, r.PathValue("inbox_id"), r.PathValue("message_id"), req)
	})
}

func (h *Handler) deleteMessage(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
	return noContent(w, h.svc.DeleteMessage(r.Context(), p, r.PathValue("inbox_id"), r.PathValue("message_id")))
}

// absURL makes a path absolute on the host the client called.
func absURL(r *http.Request, path string) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + path
}

// getRaw answers the SDK's RawMessageResponse (download_url serving the
// exact stored bytes); with Accept: message/rfc822 (or ?format=raw) it
// answers the bytes themselves.
func (h *Handler) getRaw(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
	m, v, err := h.svc.GetRaw(r.Context(), p, r.PathValue("inbox_id"), r.PathValue("message_id"))
	if err != nil {
		return nil, 0, err
	}
	if r.URL.Query().Get("format") == "raw" || strings.Contains(r.Header.Get("Accept"), "message/rfc822") {
		w.Header().Set("Content-Type", "message/rfc822")
		w.Header().Set("Content-Length", strconv.Itoa(len(m.Raw)))
		w.WriteHeader(http.StatusOK)
		w.Write(m.Raw)
		return nil, 0, nil
	}
	v.DownloadURL = absURL(r, v.DownloadURL)
	return v, 0, nil
}

func (h *Handler) getAttachment(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
	inbox, ref := r.PathValue("inbox_id"), r.PathValue("message_id")
	if inbox == "" {
		// Org-wide thread attachment: the message's inbox is found from
		// the thread.
		b, err := h.svc.threadInbox(r.Context(), p, "", r.PathValue("thread_id"))
		if err != nil {
			return nil, 0, err
		}
		inbox = b
	}
	v, _, err := h.svc.GetAttachment(r.Context(), p, inbox, ref, r.PathValue("attachment_id"))
	if err != nil {
		return nil, 0, err
	}
	v.DownloadURL = absURL(r, v.DownloadURL)
	return v, 0, nil
}

func (h *Handler) download(w http.ResponseWriter, r *http.Request) {
	b, ct, name, err := h.svc.Download(r.Context(), r.PathValue("token"))
	if err != nil {
		writeError(w, asError(err))
		return
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.Header().Set("X-Content-Type-Options", "nosniff")
	disp := "attachment"
	if name != "" {
		disp = mime.FormatMediaType("attachment", map[string]string{"filename": name})
	}
	w.Header().Set("Content-Disposition", disp)
	w.WriteHeader(http.StatusOK)
	w.Write(b)
}

func (h *Handler) send(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
	return answer(r, decodeSendAs, func(req SendRequest) (any, error) { return h.svc.Send(r.Context(), p, r.PathValue("inbox_id"), req) })
}

func (h *Handler) reply(all bool) authed {
	return func(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
		return answer(r, decodeSendAs, func(req SendRequest) (any, error) {
			return h.svc.Reply(r.Context(), p, r.PathValue("inbox_id"), r.PathValue("message_id"), req, all)
		})
	}
}

// replyThread answers the last message of a thread (the Envelopay
// reference's POST /v0/inboxes/{inbox}/threads/{thread_id}/reply).
func (h *Handler) replyThread(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
	return answer(r, decodeSendAs, func(req SendRequest) (any, error) {
		return h.svc.ReplyThread(r.Context(), p, r.PathValue("inbox_id"), r.PathValue("thread_id"), req)
	})
}

func (h *Handler) forward(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
	return answer(r, decodeSendAs, func(req SendRequest) (any, error) {
		return h.svc.Forward(r.Context(), p, r.PathValue("inbox_id"), r.PathValue("message_id"), req)
	})
}

func (h *Handler) listThreads(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
	return answer(r, h.listParams, func(lp ListParams) (any, error) {
		return h.svc.ListThreads(r.Context(), p, r.PathValue("inbox_id"), lp)
	})
}

func (h *Handler) getThread(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
	return answer(r, h.listParams, func(lp ListParams) (any, error) {
		return h.svc.GetThread(r.Context(), p, r.PathValue("inbox_id"), r.PathValue("thread_id"), lp)
	})
}

func (h *Handler) updateThread(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
	return answer(r, decodeAs[UpdateLabels], func(req UpdateLabels) (any, error) {
		return h.svc.UpdateThread(r.Context(), p, r.PathValue("inbox_id"), r.PathValue("thread_id"), req)
	})
}

func (h *Handler) deleteThread(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
	return noContent(w, h.svc.DeleteThread(r.Context(), p, r.PathValue("inbox_id"), r.PathValue("thread_id")))
}
