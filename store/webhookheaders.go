package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// A webhook's custom delivery headers (the SDK's WebhookHeaders): name
// and value pairs sent with every delivery, kept with the webhook. The
// rule, written once here: a name is an RFC 9110 §5.6.2 token, a value
// visible ASCII with inner spaces or tabs (§5.5 field-value without
// obs-text; no CR, LF or NUL, no leading or trailing whitespace, not
// empty); no name the delivery itself sets or that frames the request
// (reservedHeader); names compare case-insensitively; at most
// WebhookLimits.Headers of them, each name and value together at most
// WebhookLimits.HeaderBytes.

// HeaderError is a refused header: Code is a stable string
// (invalid_header_name, invalid_header_value, reserved_header,
// duplicate_header, too_many_headers, header_too_long), Name the header.
type HeaderError struct {
	Code, Name, Reason string
}

func (e *HeaderError) Error() string {
	if e.Name == "" {
		return fmt.Sprintf("webhook headers: %s", e.Reason)
	}
	return fmt.Sprintf("webhook header %q: %s", e.Name, e.Reason)
}

// Unwrap makes a HeaderError an ErrBadInput (and ErrLimit for the
// bounds).
func (e *HeaderError) Unwrap() error {
	if e.Code == "too_many_headers" || e.Code == "header_too_long" {
		return ErrLimit
	}
	return ErrBadInput
}

// reservedHeader reports whether name (lower case) is one a webhook may
// not set: the ones that frame the HTTP message or its connection (RFC
// 9110 §6.4.1, §7.2, §7.6.1, §8.6, §10.1.1; RFC 9112 §6.1, §9.6), the
// ones the delivery sets (Content-Type, User-Agent, Accept-Encoding and
// the signature's svix-*, also under the Standard Webhooks names
// webhook-*), and proxy credentials.
func reservedHeader(name string) bool {
	switch name {
	case "host", "content-length", "content-type", "content-encoding", "transfer-encoding", "te", "trailer",
		"connection", "keep-alive", "upgrade", "expect", "user-agent", "accept-encoding", "proxy-connection":
		return true
	}
	return strings.HasPrefix(name, "svix-") || strings.HasPrefix(name, "webhook-") || strings.HasPrefix(name, "proxy-")
}

// isToken reports whether s is an RFC 9110 §5.6.2 token: one or more
// tchar (ASCII letters, digits and !#$%&'*+-.^_`|~).
func isToken(s string) bool {
	return s != "" && strings.IndexFunc(s, func(r rune) bool {
		return r >= utf8.RuneSelf || !(unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("!#$%&'*+-.^_`|~", r))
	}) < 0
}

// isFieldValue reports whether s is a non-empty field value of visible
// ASCII and inner SP or HTAB.
func isFieldValue(s string) bool {
	if s == "" || s[0] == ' ' || s[0] == '\t' || s[len(s)-1] == ' ' || s[len(s)-1] == '\t' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x21 || c > 0x7e) && c != ' ' && c != '\t' {
			return false
		}
	}
	return true
}

// CheckWebhookHeaders checks h against the rule and l's bounds (zero
// fields: the defaults).
func (l WebhookLimits) CheckWebhookHeaders(h map[string]string) error {
	l = l.WithDefaults()
	if len(h) > l.Headers {
		return &HeaderError{Code: "too_many_headers", Reason: fmt.Sprintf("at most %d custom headers per webhook", l.Headers)}
	}
	seen := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(h)) {
		v := h[name]
		switch low := strings.ToLower(name); {
		case !isToken(name):
			return &HeaderError{Code: "invalid_header_name", Name: name, Reason: "a header name is an RFC 9110 token (letters, digits and !#$%&'*+-.^_`|~)"}
		case reservedHeader(low):
			return &HeaderError{Code: "reserved_header", Name: name, Reason: "set by the delivery itself or framing the request: it cannot be a custom header"}
		case seen[low] != "":
			return &HeaderError{Code: "duplicate_header", Name: name, Reason: fmt.Sprintf("the same header as %q (names are case-insensitive)", seen[low])}
		case len(name)+len(v) > l.HeaderBytes:
			return &HeaderError{Code: "header_too_long", Name: name, Reason: fmt.Sprintf("name and value at most %d bytes", l.HeaderBytes)}
		case !isFieldValue(v):
			return &HeaderError{Code: "invalid_header_value", Name: name, Reason: "a value is visible ASCII with inner spaces or tabs: not empty, no CR, LF or control characters, no leading or trailing whitespace"}
		default:
			seen[low] = name
		}
	}
	return nil
}

// WebhookHeaderNames is the names of w's custom headers, sorted (their
// values are never shown back).
func WebhookHeaderNames(w Webhook) []string { return slices.Sorted(maps.Keys(w.Headers)) }

// SetWebhookHeaders changes webhook id's custom headers in one
// transaction: set adds or replaces (a name replaces the one it equals
// case-insensitively), remove takes names away (case-insensitively; a
// name not there is no error). A name both set and removed is refused,
// and so is a result outside the rule or l. It returns the webhook as
// changed, or ErrNotFound.
func (s webhookRoom) SetWebhookHeaders(ctx context.Context, id string, set map[string]string, remove []string, l WebhookLimits, at time.Time) (Webhook, error) {
	drop := map[string]bool{}
	for _, n := range remove {
		drop[strings.ToLower(n)] = true
	}
	for n := range set {
		if drop[strings.ToLower(n)] {
			return Webhook{}, &HeaderError{Code: "duplicate_header", Name: n, Reason: "both set and removed in one request"}
		}
	}
	// The request's own headers first, so an error names what was asked.
	if err := l.CheckWebhookHeaders(set); err != nil {
		return Webhook{}, err
	}
	var out Webhook
	err := s.write(ctx, func(tx Tx) error {
		w, err := scanWebhook(tx.QueryRow(`SELECT `+webhookCols+` FROM api_webhooks WHERE id = ?`+s.d.forUpdate, id))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("webhook %s: %w", id, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("store: webhook headers: %w", err)
		}
		h := map[string]string{}
		for n, v := range w.Headers {
			if low := strings.ToLower(n); !drop[low] && !hasFold(set, n) {
				h[n] = v
			}
		}
		for n, v := range set {
			h[n] = v
		}
		if err := l.CheckWebhookHeaders(h); err != nil {
			return err
		}
		if _, err := tx.Exec(`UPDATE api_webhooks SET headers = ?, updated_at = ? WHERE id = ?`, jsonHeaders(h), at.UTC().UnixNano(), id); err != nil {
			return fmt.Errorf("store: webhook headers: %w", err)
		}
		w.Headers, w.UpdatedAt = h, at.UTC()
		out = w
		return nil
	})
	return out, err
}

// hasFold reports whether m has a key equal to k case-insensitively.
func hasFold(m map[string]string, k string) bool {
	for n := range m {
		if strings.EqualFold(n, k) {
			return true
		}
	}
	return false
}
