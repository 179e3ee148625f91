package mailin

import (
	"context"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/envelopd/envelopd/dkim"
	"github.com/envelopd/envelopd/store"
)

// Mailbox passwords are stored as "pbkdf2-sha256$ITERATIONS$SALT$KEY"
// (RFC 8018 §5.2 PBKDF2 with HMAC-SHA-256, 16-byte random salt, 32-byte
// key, both base64 without padding): never the password itself.
const (
	passwordScheme = "pbkdf2-sha256"
	// DefaultPasswordIterations is the PBKDF2 work factor of HashPassword
	// (OWASP 2023 recommends 600,000 for PBKDF2-HMAC-SHA256).
	DefaultPasswordIterations = 600_000
)

// ErrBadPassword is returned by CheckPassword for a wrong password, an
// empty hash (no password set) or a hash it cannot read.
var ErrBadPassword = errors.New("mailin: wrong password")

// HashPassword hashes pw with a fresh salt; iterations ≤ 0 means
// DefaultPasswordIterations (tests use fewer).
func HashPassword(pw string, iterations int) (string, error) {
	if pw == "" {
		return "", errors.New("mailin: empty password")
	}
	if iterations <= 0 {
		iterations = DefaultPasswordIterations
	}
	salt := make([]byte, 16)
	rand.Read(salt)
	key, err := pbkdf2.Key(sha256.New, pw, salt, iterations, 32)
	if err != nil {
		return "", fmt.Errorf("mailin: hash password: %w", err)
	}
	enc := base64.RawStdEncoding
	return fmt.Sprintf("%s$%d$%s$%s", passwordScheme, iterations, enc.EncodeToString(salt), enc.EncodeToString(key)), nil
}

// DummyPasswordHash returns a hash in HashPassword's format with a random
// salt and a random key: checking any password against it costs exactly
// what checking against a real hash of that many iterations costs, and
// always fails (unknown users cost the same as known ones).
func DummyPasswordHash(iterations int) string {
	if iterations <= 0 {
		iterations = DefaultPasswordIterations
	}
	salt, key := make([]byte, 16), make([]byte, 32)
	rand.Read(salt)
	rand.Read(key)
	enc := base64.RawStdEncoding
	return fmt.Sprintf("%s$%d$%s$%s", passwordScheme, iterations, enc.EncodeToString(salt), enc.EncodeToString(key))
}

// passwordIterations is the work factor of a HashPassword hash (0 if it
// cannot be read).
func passwordIterations(hash string) int {
	parts := strings.Split(hash, "$")
	if len(parts) != 4 || parts[0] != passwordScheme {
		return 0
	}
	n, _ := strconv.Atoi(parts[1])
	return n
}

// CheckPassword compares pw with a HashPassword hash in constant time.
func CheckPassword(hash, pw string) error {
	parts := strings.Split(hash, "$")
	if len(parts) != 4 || parts[0] != passwordScheme {
		return ErrBadPassword
	}
	iter, err := strconv.Atoi(parts[1])
	if err != nil || iter <= 0 || iter > 10_000_000 {
		return ErrBadPassword
	}
	enc := base64.RawStdEncoding
	salt, err1 := enc.DecodeString(parts[2])
	want, err2 := enc.DecodeString(parts[3])
	if err1 != nil || err2 != nil || len(want) == 0 {
		return ErrBadPassword
	}
	got, err := pbkdf2.Key(sha256.New, pw, salt, iter, len(want))
	if err != nil || subtle.ConstantTimeCompare(got, want) != 1 {
		return ErrBadPassword
	}
	return nil
}

// LocalSelector is the DKIM selector of the keys envelopd generates for
// its local domains (--sign-local).
const LocalSelector = "envelopd"

// LocalKeyProtocol is the store.PutKey protocol name the local domains'
// DKIM private keys (PEM) are kept under, one per domain handle.
const LocalKeyProtocol = "dkim-local"

// LocalARCSelector and LocalARCKeyProtocol are LocalSelector and
// LocalKeyProtocol for the RSA keys the relay ARC-seals with (--arc-seal).
const (
	LocalARCSelector    = "envelopd-arc"
	LocalARCKeyProtocol = "arc-local"
)

// LocalSigners returns an Ed25519 signer per local domain, generating and
// storing a key on first use (so the same key signs across restarts), and
// adds each public key to res as the record LocalSelector._domainkey.DOMAIN,
// the relay's own key table (RFC 6376 §3.6.2.1 names).
func LocalSigners(ctx context.Context, st store.Store, domains []string, res *dkim.StaticResolver) (map[string][]dkim.Signer, error) {
	return localKeys(ctx, st, domains, res, LocalKeyProtocol, LocalSelector, "ed25519")
}

// LocalARCSigners is LocalSigners for ARC sealing: RSA-2048 keys (ARC
// verifiers check rsa-sha256; dkimpy's refuses ed25519-sha256 seals),
// stored under LocalARCKeyProtocol, published as LocalARCSelector.
func LocalARCSigners(ctx context.Context, st store.Store, domains []string, res *dkim.StaticResolver) (map[string][]dkim.Signer, error) {
	return localKeys(ctx, st, domains, res, LocalARCKeyProtocol, LocalARCSelector, "rsa")
}

func localKeys(ctx context.Context, st store.Store, domains []string, res *dkim.StaticResolver, protocol, selector, algo string) (map[string][]dkim.Signer, error) {
	keys, err := st.Keys(ctx, protocol)
	if err != nil {
		return nil, err
	}
	out := map[string][]dkim.Signer{}
	for _, d := range domains {
		d = strings.ToLower(strings.TrimSuffix(d, "."))
		if _, done := out[d]; done {
			continue
		}
		pemKey, ok := keys[d]
		if !ok {
			k, err := dkim.GenerateKey(algo)
			if err != nil {
				return nil, err
			}
			b, err := dkim.MarshalKeyPEM(k)
			if err != nil {
				return nil, err
			}
			pemKey = string(b)
			if p, ok := st.(interface {
				PutKeyIfAbsent(ctx context.Context, protocol, handle, key string) (string, error)
			}); ok {
				// Several nodes starting at once each make a key; the
				// first stored wins and every node uses it.
				if pemKey, err = p.PutKeyIfAbsent(ctx, protocol, d, pemKey); err != nil {
					return nil, err
				}
			} else if err := st.PutKey(ctx, protocol, d, pemKey); err != nil {
				return nil, err
			}
		}
		k, err := dkim.ParseKey([]byte(pemKey))
		if err != nil {
			return nil, fmt.Errorf("mailin: stored DKIM key of %s: %w", d, err)
		}
		rec, err := dkim.TXTRecord(d, selector, k.Public())
		if err != nil {
			return nil, err
		}
		name, value, _ := strings.Cut(rec, " ")
		res.Add(name, value)
		out[d] = []dkim.Signer{{Domain: d, Selector: selector, Key: k}}
	}
	return out, nil
}

// LocalFirst is a DKIM resolver that answers from local (the relay's own
// key table) and asks next (DNS or a static file) for every other name.
type LocalFirst struct {
	Local *dkim.StaticResolver
	Next  dkim.Resolver // nil: local only
}

// LookupTXT implements dkim.Resolver.
func (r LocalFirst) LookupTXT(ctx context.Context, name string) ([]string, error) {
	txts, err := r.Local.LookupTXT(ctx, name)
	if err == nil || r.Next == nil || !errors.Is(err, dkim.ErrNoRecord) {
		return txts, err
	}
	return r.Next.LookupTXT(ctx, name)
}
