package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/envelopd/envelopd/store"
)

// Idempotency-Key on send, reply, reply-all and forward (AgentMail's
// "preventing duplicate sends"; the same rules as Stripe's and Resend's):
//
//   - the first request with a key runs, and its answer is stored durably
//     (api_idempotency, primary key (API key id, Idempotency-Key));
//   - the same key with the same request (method, path, query and body)
//     answers the stored answer again, with Idempotent-Replayed: true, and
//     sends nothing;
//   - the same key with another request → 409 IdempotencyError;
//   - while the first is still running → 409 with Retry-After: 1 (the
//     claim is a row insert: of two concurrent requests, one wins);
//   - a request that fails (4xx/5xx) releases the key, so that a fixed
//     retry may use it.
//
// The message's Message-ID is derived from the key, and the queue is
// unique per Message-ID: even when a process dies between queueing and
// storing the answer (the claim is taken over after idemStale), the
// retry queues nothing new.

// IdempotencyStore is what Idempotency-Key needs of the store: its
// idempotency room.
type IdempotencyStore = store.IdempotencyStore

// idemStale is how long a claim whose request never finished blocks the key.
const idemStale = 2 * time.Minute

// maxIdemKey bounds the header (Stripe's and Resend's limit).
const maxIdemKey = 256

// idemMessageID is the Message-ID local part of a send under key.
func idemMessageID(keyID, key string) string {
	h := sha256.Sum256([]byte("envelopd idempotency\x00" + keyID + "\x00" + key))
	return "idem." + hex.EncodeToString(h[:16])
}

// idempotent wraps a send handler with Idempotency-Key handling.
func (h *Handler) idempotent(f authed) authed {
	return func(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
		key := r.Header.Get("Idempotency-Key")
		if key == "" {
			return f(w, r, p)
		}
		if len(key) > maxIdemKey || strings.ContainsFunc(key, func(c rune) bool { return c < 0x20 || c == 0x7f }) {
			return nil, 0, badField("Idempotency-Key", "at most %d printable characters", maxIdemKey)
		}
		st, ok := h.svc.cfg.Store.(IdempotencyStore)
		if !ok {
			return nil, 0, &Error{Status: http.StatusNotImplemented, Name: "NotImplementedError", Message: "this store keeps no idempotency keys"}
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return nil, 0, &Error{Status: http.StatusRequestEntityTooLarge, Name: "PayloadTooLargeError", Message: "request body too large"}
			}
			return nil, 0, validation("cannot read the request body", nil)
		}
		sum := sha256.New()
		sum.Write([]byte(r.Method + " " + r.URL.Path + "?" + r.URL.RawQuery + "\n"))
		sum.Write(body)
		claimed, status, resp, err := st.ClaimIdempotency(r.Context(), p.KeyID, key, sum.Sum(nil), time.Now(), idemStale)
		switch {
		case errors.Is(err, store.ErrIdempotencyMismatch):
			return nil, 0, &Error{Status: http.StatusConflict, Name: "IdempotencyError",
				Message: "Idempotency-Key already used with another request"}
		case errors.Is(err, store.ErrIdempotencyInFlight):
			return nil, 0, &Error{Status: http.StatusConflict, Name: "IdempotencyError",
				Message: "a request with this Idempotency-Key is still running", RetryAfter: 1}
		case err != nil:
			return nil, 0, err
		}
		if !claimed {
			w.Header().Set("Idempotent-Replayed", "true")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			w.Write(resp)
			return nil, 0, nil
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r = r.WithContext(withIdemMessageID(r.Context(), idemMessageID(p.KeyID, key)))
		v, status, err := f(w, r, p)
		// Record with a context of its own: the client going away must not
		// leave the claim hanging.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 10*time.Second)
		defer cancel()
		if err != nil || v == nil {
			if ferr := st.FinishIdempotency(fctx, p.KeyID, key, 0, nil); ferr != nil {
				h.log.Warn("api: idempotency release", "err", ferr)
			}
			return v, status, err
		}
		if status == 0 {
			status = http.StatusOK
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false) // as writeJSON
		if err := enc.Encode(v); err != nil {
			return nil, 0, err
		}
		b := buf.Bytes()
		if ferr := st.FinishIdempotency(fctx, p.KeyID, key, status, b); ferr != nil {
			h.log.Warn("api: idempotency record", "err", ferr)
		}
		return v, status, nil
	}
}

type idemCtxKey struct{}

func withIdemMessageID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, idemCtxKey{}, id)
}

// idemMessageIDFrom is the Message-ID local part an Idempotency-Key
// fixes for the request ("" without one).
func idemMessageIDFrom(ctx context.Context) string {
	s, _ := ctx.Value(idemCtxKey{}).(string)
	return s
}
