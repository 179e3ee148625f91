package api

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/envelopd/envelopd/store"
)

// API keys. A key is
//
//	ek_<id>_<secret>
//
// where id is 12 random hex digits (48 bits, not secret: it names the
// stored row, so lookup needs no scan) and secret is 43 base64url
// characters (256 random bits). The store keeps only SHA-256(secret): a
// 256-bit random secret cannot be guessed or brute-forced from its hash,
// so no slow or peppered hash is needed, and checking a key costs one
// SHA-256 whatever went wrong. The hash is compared in constant time
// (crypto/subtle); an unknown id is compared against a dummy hash, so a
// wrong id and a wrong secret cost the same.

const (
	keyPrefix    = "ek_"
	keyIDLen     = 12
	keySecretLen = 43 // base64url (no padding) of 32 bytes
)

// ErrBadKey is returned for a malformed, unknown, revoked or wrong key.
var ErrBadKey = errors.New("api: invalid API key")

// NewKey returns a new key string and its stored form.
func NewKey(inboxes []string, name string, now time.Time) (string, store.APIKey, error) {
	var idb [keyIDLen / 2]byte
	var sec [32]byte
	if _, err := rand.Read(idb[:]); err != nil {
		return "", store.APIKey{}, err
	}
	if _, err := rand.Read(sec[:]); err != nil {
		return "", store.APIKey{}, err
	}
	id := hex.EncodeToString(idb[:])
	secret := base64.RawURLEncoding.EncodeToString(sec[:])
	h := sha256.Sum256([]byte(secret))
	if inboxes == nil {
		inboxes = []string{}
	}
	return keyPrefix + id + "_" + secret, store.APIKey{ID: id, Hash: h[:], Inboxes: inboxes, Name: name, CreatedAt: now.UTC()}, nil
}

// ParseKey splits a key string into its id and secret; ok is false for
// anything not of the form ek_<12 hex>_<43 base64url>.
func ParseKey(s string) (id, secret string, ok bool) {
	rest, found := strings.CutPrefix(s, keyPrefix)
	if !found || len(rest) != keyIDLen+1+keySecretLen || rest[keyIDLen] != '_' {
		return "", "", false
	}
	id, secret = rest[:keyIDLen], rest[keyIDLen+1:]
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return "", "", false
		}
	}
	for i := 0; i < len(secret); i++ {
		c := secret[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '-' || c == '_') {
			return "", "", false
		}
	}
	return id, secret, true
}

// KeyStore is what key checking reads.
type KeyStore interface {
	APIKeyByID(ctx context.Context, id string) (store.APIKey, error)
}

// Principal is an authenticated caller: its key id, the inboxes it may
// see (nil: every inbox), the pod it is bound to when it is not scoped
// to inboxes ("": the organisation) and the operations it may do
// (Permissions; nil: every one).
type Principal struct {
	KeyID       string
	Inboxes     []string
	Pod         string
	Permissions []string
}

// Allowed reports whether p may see inbox.
func (p *Principal) Allowed(inbox string) bool {
	return p.Inboxes == nil || slices.Contains(p.Inboxes, inbox)
}

// dummyHash is compared against when the key id is unknown or malformed,
// so that every failure costs one SHA-256 and one constant-time compare.
var dummyHash = sha256.Sum256([]byte("envelopd: no such key"))

// CheckKey authenticates a key string against ks.
func CheckKey(ctx context.Context, ks KeyStore, key string) (*Principal, error) {
	id, secret, ok := ParseKey(key)
	want := dummyHash[:]
	var k store.APIKey
	if ok {
		var err error
		k, err = ks.APIKeyByID(ctx, id)
		switch {
		case err == nil:
			want = k.Hash
		case errors.Is(err, store.ErrNotFound):
			ok = false
		default:
			return nil, fmt.Errorf("api: key lookup: %w", err)
		}
	}
	got := sha256.Sum256([]byte(secret))
	match := subtle.ConstantTimeCompare(got[:], want) == 1
	if !ok || !match || k.RevokedAt != nil {
		return nil, ErrBadKey
	}
	p := &Principal{KeyID: k.ID, Pod: k.Pod, Permissions: k.Permissions}
	if len(k.Inboxes) > 0 {
		p.Inboxes = k.Inboxes
	}
	return p, nil
}

// AuthThrottle counts failed key attempts (they count toward the same
// per-IP lockout as failed SMTP/IMAP authentication; authguard.KeyThrottle
// is the real one). Allow is asked before a key is checked (keyed: the
// request presents a well-formed key); Fail after a wrong one, refused
// true turning the 401 into a 429; Succeed after a valid one. A refusal
// answers 429 with Retry-After.
type AuthThrottle interface {
	Allow(ip string, keyed bool) (retryAfter time.Duration, ok bool)
	Fail(ip, account string) (retryAfter time.Duration, refused bool)
	Succeed(ip, account string)
}

// NoThrottle is the AuthThrottle that never refuses.
type NoThrottle struct{}

func (NoThrottle) Allow(string, bool) (time.Duration, bool)  { return 0, true }
func (NoThrottle) Fail(string, string) (time.Duration, bool) { return 0, false }
func (NoThrottle) Succeed(string, string)                    {}

// Authenticate checks the key a request from ip presents, through th:
// the principal, or the error to answer (401 UnauthorizedError, 429
// RateLimitError with RetryAfter, or a 500 when the store failed, logged
// on lg). Every front end that takes API keys (the API, its websocket,
// MCP over HTTP) authenticates through it.
func Authenticate(ctx context.Context, ks KeyStore, th AuthThrottle, lg *slog.Logger, ip, key string) (*Principal, *Error) {
	id, _, keyed := ParseKey(key)
	if after, ok := th.Allow(ip, keyed); !ok {
		return nil, rateLimited(after)
	}
	p, err := CheckKey(ctx, ks, key)
	if err == nil {
		th.Succeed(ip, p.KeyID)
		return p, nil
	}
	if !errors.Is(err, ErrBadKey) {
		lg.Error("api: key check", "err", err)
		return nil, asError(err)
	}
	if after, refused := th.Fail(ip, id); refused {
		return nil, rateLimited(after)
	}
	return nil, asError(err)
}

func rateLimited(after time.Duration) *Error {
	return &Error{Status: http.StatusTooManyRequests, Name: "RateLimitError",
		Message: "too many failed authentication attempts", RetryAfter: max(1, int((after+time.Second-1)/time.Second))}
}
