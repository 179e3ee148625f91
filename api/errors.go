package api

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/envelopd/envelopd/mailout"
	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/store"
)

// Error is an API error: the SDK's ErrorResponse / ValidationErrorResponse
// ({name, message, errors}) with its HTTP status.
type Error struct {
	Status  int    `json:"-"`
	Name    string `json:"name"`
	Message string `json:"message"`
	// Errors lists the problems of a 400: {code, field, message} items
	// (Envelopay error codes for an invalid outbound message).
	Errors any `json:"errors,omitempty"`
	// RetryAfter is set on a 429 (seconds).
	RetryAfter int `json:"-"`
}

func (e *Error) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Name, e.Message) }

func notFound(format string, args ...any) *Error {
	return &Error{Status: http.StatusNotFound, Name: "NotFoundError", Message: fmt.Sprintf(format, args...)}
}

func validation(msg string, errs any) *Error {
	return &Error{Status: http.StatusBadRequest, Name: "ValidationError", Message: msg, Errors: errs}
}

// Problem is one item of a ValidationError's errors.
type Problem struct {
	Code    string `json:"code"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

// Problems lists ps as Problem items (never nil).
func Problems(ps protocols.Problems) []Problem { return problems(ps) }

func problems(ps protocols.Problems) []Problem {
	out := []Problem{}
	for _, p := range ps {
		out = append(out, Problem{Code: string(p.Code), Field: p.Field, Message: p.Message})
	}
	return out
}

// AsError maps an error of the service to the API error a client sees
// (other front ends, such as the MCP server, show the same errors).
func AsError(err error) *Error { return asError(err) }

// asError maps an error of the service to an API error; unknown errors
// are 500s whose text is not shown.
func asError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var fe *fieldError
	if errors.As(err, &fe) {
		return validation(fe.Error(), []Problem{{Code: "invalid_field", Field: fe.Field, Message: fe.Message}})
	}
	var ce *mailout.ComposeError
	if errors.As(err, &ce) {
		return validation("the message cannot be composed: "+ce.Error(), problems(ce.Problems))
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
		return notFound("not found")
	case errors.Is(err, store.ErrConflict):
		// The store's text may name rows the caller cannot see.
		return &Error{Status: http.StatusConflict, Name: "AlreadyExistsError", Message: "already exists"}
	case errors.Is(err, store.ErrBadInput):
		return validation(err.Error(), nil)
	case errors.Is(err, ErrBadKey):
		return &Error{Status: http.StatusUnauthorized, Name: "UnauthorizedError", Message: "missing or invalid API key (Authorization: Bearer KEY)"}
	}
	return &Error{Status: http.StatusInternalServerError, Name: "InternalServerError", Message: "internal error"}
}
