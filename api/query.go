package api

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// List parameters (AgentMail's list queries: limit, page_token, labels,
// before, after, ascending) and the opaque page tokens.

const (
	defaultLimit = 50
	maxLimit     = 1000
	maxLabels    = 20
)

// ListParams are the parsed list query parameters.
type ListParams struct {
	Limit     int
	Cursor    Cursor
	Labels    []string
	Before    time.Time
	After     time.Time
	Ascending bool
	// Extension filters (the web inbox's; message lists only):
	// type, sender, error (a code among errors and warnings) and q (free
	// text over subject and note).
	Type, Sender, Error, Search string
}

// Cursor is a keyset position: the last row of the previous page. Inbox
// is set for lists ordered by (id, inbox) and by address (inboxes).
type Cursor struct {
	ID    int64  `json:"i,omitempty"`
	Inbox string `json:"b,omitempty"`
	Asc   bool   `json:"a,omitempty"`
}

// fieldError is a request problem on one field (400 ValidationError).
type fieldError struct {
	Field, Message string
}

func (e *fieldError) Error() string { return e.Field + ": " + e.Message }

func badField(field, format string, args ...any) error {
	return &fieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// EncodeCursor makes the opaque page token of c.
func EncodeCursor(c Cursor) string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeCursor reads a page token made by EncodeCursor.
func DecodeCursor(tok string) (Cursor, error) {
	var c Cursor
	if len(tok) > 2048 {
		return c, badField("page_token", "too long")
	}
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return c, badField("page_token", "not a page token of this server")
	}
	if err := json.Unmarshal(b, &c); err != nil || c.ID < 0 || (c.ID == 0 && c.Inbox == "") {
		return Cursor{}, badField("page_token", "not a page token of this server")
	}
	return c, nil
}

// timeParams reads the query parameters names, in order, as RFC 3339
// times into dsts; an absent one leaves its destination as it was.
func timeParams(q url.Values, names []string, dsts ...*time.Time) error {
	for i, k := range names {
		v := q.Get(k)
		if v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return badField(k, "want an RFC 3339 timestamp")
		}
		*dsts[i] = t
	}
	return nil
}

// boolParam reads the query parameter k as a boolean into dst; an absent
// one leaves dst as it was.
func boolParam(q url.Values, k string, dst *bool) error {
	v := q.Get(k)
	if v == "" {
		return nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return badField(k, "want true or false")
	}
	*dst = b
	return nil
}

// ParseList reads list parameters from a query string. labels is a JSON
// array (as the SDK sends it), or repeated/comma-separated values.
func ParseList(q url.Values) (ListParams, error) {
	p := ListParams{Limit: defaultLimit}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxLimit {
			return p, badField("limit", "want an integer from 1 to %d", maxLimit)
		}
		p.Limit = n
	}
	if err := boolParam(q, "ascending", &p.Ascending); err != nil {
		return p, err
	}
	if v := q.Get("page_token"); v != "" {
		c, err := DecodeCursor(v)
		if err != nil {
			return p, err
		}
		if c.Asc != p.Ascending {
			return p, badField("page_token", "the token was made for ascending=%v", c.Asc)
		}
		p.Cursor = c
	}
	if err := timeParams(q, []string{"before", "after"}, &p.Before, &p.After); err != nil {
		return p, err
	}
	for _, v := range q["labels"] {
		var ls []string
		if strings.HasPrefix(strings.TrimSpace(v), "[") {
			if err := json.Unmarshal([]byte(v), &ls); err != nil {
				return p, badField("labels", "want a JSON array of strings")
			}
		} else {
			ls = strings.Split(v, ",")
		}
		for _, l := range ls {
			l = strings.TrimSpace(l)
			if l == "" || strings.ContainsAny(l, " \t\r\n\x00") {
				return p, badField("labels", "bad label %q", l)
			}
			p.Labels = append(p.Labels, l)
		}
	}
	for _, f := range []struct {
		key string
		dst *string
	}{{"type", &p.Type}, {"sender", &p.Sender}, {"error", &p.Error}, {"q", &p.Search}} {
		v := strings.TrimSpace(q.Get(f.key))
		if len(v) > 200 || strings.ContainsAny(v, "\r\n\x00") {
			return p, badField(f.key, "at most 200 characters on one line")
		}
		if f.key != "q" {
			v = strings.ToLower(v)
		}
		*f.dst = v
	}
	if len(p.Labels) > maxLabels {
		return p, badField("labels", "at most %d labels", maxLabels)
	}
	return p, nil
}

// Download tokens: a download URL (raw message, attachment) is
// /v0/download/TOKEN where TOKEN = base64url(payload) "." base64url(HMAC-
// SHA256(key, payload)); payload is "kind:row:part:expires". The key is
// random per process: URLs expire at the given time or at restart.

type download struct {
	Kind string // "raw", "att" or "drf" (a draft's attachment)
	// Row is the message's row id ("raw", "att"), Draft the hex of the
	// draft's id ("drf"; the payload holds it in Row's place).
	Row     int64
	Draft   string
	Part    int
	Expires time.Time
	// Key is the id of the API key the URL was made for: the URL stops
	// working when the key is revoked.
	Key string
}

func signDownload(key []byte, d download) string {
	ref := strconv.FormatInt(d.Row, 10)
	if d.Kind == "drf" {
		ref = d.Draft
	}
	payload := fmt.Sprintf("%s:%s:%d:%d:%s", d.Kind, ref, d.Part, d.Expires.Unix(), d.Key)
	m := hmac.New(sha256.New, key)
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString([]byte(payload)) + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// parseDownload checks a download token; now bounds its expiry.
func parseDownload(key []byte, tok string, now time.Time) (download, bool) {
	var d download
	if len(tok) > 512 {
		return d, false
	}
	p64, s64, ok := strings.Cut(tok, ".")
	if !ok {
		return d, false
	}
	payload, err1 := base64.RawURLEncoding.DecodeString(p64)
	sig, err2 := base64.RawURLEncoding.DecodeString(s64)
	if err1 != nil || err2 != nil {
		return d, false
	}
	m := hmac.New(sha256.New, key)
	m.Write(payload)
	if !hmac.Equal(sig, m.Sum(nil)) {
		return d, false
	}
	parts := strings.Split(string(payload), ":")
	if len(parts) != 5 || (parts[0] != "raw" && parts[0] != "att" && parts[0] != "drf") {
		return d, false
	}
	var row int64
	if parts[0] == "drf" {
		if _, err1 = hex.DecodeString(parts[1]); parts[1] == "" {
			err1 = strconv.ErrSyntax
		}
	} else if row, err1 = strconv.ParseInt(parts[1], 10, 64); err1 == nil && row <= 0 {
		err1 = strconv.ErrRange
	}
	part, err2 := strconv.Atoi(parts[2])
	exp, err3 := strconv.ParseInt(parts[3], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || part < 0 {
		return d, false
	}
	d = download{Kind: parts[0], Row: row, Part: part, Expires: time.Unix(exp, 0), Key: parts[4]}
	if d.Kind == "drf" {
		d.Draft = parts[1]
	}
	if !now.Before(d.Expires) {
		return d, false
	}
	return d, true
}
