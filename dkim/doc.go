// Package dkim verifies and creates DKIM signatures for envelopd, on top of
// github.com/emersion/go-msgauth/dkim, with the library's unsafe defaults
// replaced by safe ones.
//
// It follows RFC 6376 (DKIM), RFC 8301 (rsa-sha256 only, RSA keys of at
// least 1024 bits), RFC 8463 (ed25519-sha256) and RFC 8601 (result words and
// the Authentication-Results header field).
//
// Verification (Verifier.Verify) works on the raw received bytes, never on a
// re-serialised message, and returns one Result per DKIM-Signature field.
// Keys are looked up through a Resolver: DNSResolver for real DNS (timeout,
// small TTL cache with negative caching), StaticResolver for offline use and
// tests, fed from a file in OpenDKIM's TestDNSData format so that one file
// serves envelopd and OpenDKIM alike.
//
// Signing (Sign) uses relaxed/relaxed canonicalization and an explicit header
// list with From oversigned, with rsa-sha256 or ed25519-sha256 keys loaded by
// LoadKey or made by GenerateKey.
package dkim
