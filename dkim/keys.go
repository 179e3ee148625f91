package dkim

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
)

// Key errors. LoadKey wraps them in a *KeyError.
var (
	ErrKeyNotPEM = errors.New("no PEM block found")
	// ErrKeyPublic is a PEM file holding only a public key ("PUBLIC KEY",
	// "RSA PUBLIC KEY") where a private key is needed. The error ParseKey
	// returns for it is also an ErrKeyType (a kind of key it cannot sign
	// with).
	ErrKeyPublic    = errors.New("a public key, not a private key")
	ErrKeyEncrypted = errors.New("encrypted PEM keys are not supported")
	ErrKeyType      = errors.New("unsupported key type (want RSA or Ed25519)")
	ErrKeyMalformed = errors.New("malformed key")
	ErrUnknownAlgo  = errors.New(`dkim: unknown key algorithm (want "rsa" or "ed25519")`)
)

// publicKeyError is ErrKeyPublic for one PEM block type.
type publicKeyError struct{ pemType string }

func (e publicKeyError) Error() string {
	return fmt.Sprintf("%s: the file holds a %q PEM block; signing needs the private key (a \"PRIVATE KEY\" or \"RSA PRIVATE KEY\" PEM block, as `envelopd dkim keygen` writes)", ErrKeyPublic, e.pemType)
}

func (e publicKeyError) Is(target error) bool { return target == ErrKeyPublic || target == ErrKeyType }

// KeyError is a key file that cannot be used.
type KeyError struct {
	Path string
	Err  error
}

func (e *KeyError) Error() string { return "dkim: key " + e.Path + ": " + e.Err.Error() }
func (e *KeyError) Unwrap() error { return e.Err }

// LoadKey reads a private key from a PEM file: "RSA PRIVATE KEY" (PKCS#1,
// as opendkim-genkey writes) or "PRIVATE KEY" (PKCS#8) holding an RSA or
// Ed25519 key. RSA keys shorter than 1024 bits are refused (RFC 8301).
func LoadKey(path string) (crypto.Signer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &KeyError{Path: path, Err: err}
	}
	k, err := ParseKey(data)
	if err != nil {
		return nil, &KeyError{Path: path, Err: err}
	}
	return k, nil
}

// ParseKey parses a PEM private key as LoadKey does; errors are the Err* key
// errors (possibly wrapped). A file with only a public key gives
// ErrKeyPublic.
func ParseKey(data []byte) (crypto.Signer, error) {
	var block *pem.Block
	public := ""
	for {
		block, data = pem.Decode(data)
		if block == nil {
			if public != "" {
				return nil, publicKeyError{public}
			}
			return nil, ErrKeyNotPEM
		}
		if public == "" && (block.Type == "PUBLIC KEY" || block.Type == "RSA PUBLIC KEY") {
			public = block.Type
		}
		if block.Type == "RSA PRIVATE KEY" || block.Type == "PRIVATE KEY" || block.Type == "ENCRYPTED PRIVATE KEY" {
			break
		}
	}
	if block.Type == "ENCRYPTED PRIVATE KEY" || block.Headers["Proc-Type"] != "" {
		return nil, ErrKeyEncrypted
	}
	var key any
	var err error
	if block.Type == "RSA PRIVATE KEY" {
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	} else {
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrKeyMalformed, err)
	}
	switch k := key.(type) {
	case *rsa.PrivateKey:
		if k.N.BitLen() < 1024 {
			return nil, ErrKeyTooWeak
		}
		return k, nil
	case ed25519.PrivateKey:
		return k, nil
	default:
		return nil, fmt.Errorf("%w: %T", ErrKeyType, key)
	}
}

// GenerateKey makes a new key: algo "rsa" (2048 bits) or "ed25519".
func GenerateKey(algo string) (crypto.Signer, error) {
	switch algo {
	case "rsa":
		return rsa.GenerateKey(rand.Reader, 2048)
	case "ed25519":
		_, k, err := ed25519.GenerateKey(rand.Reader)
		return k, err
	default:
		return nil, fmt.Errorf("%w: %q", ErrUnknownAlgo, algo)
	}
}

// MarshalKeyPEM encodes a private key as a PKCS#8 "PRIVATE KEY" PEM block.
func MarshalKeyPEM(k crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrKeyType, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// TXTRecord returns the key record line for a static key file (and, after
// the name, the TXT value to publish in DNS):
//
//	S._domainkey.D v=DKIM1; k=rsa; p=BASE64
//
// p= is the DER SubjectPublicKeyInfo for RSA (RFC 6376 section 3.6.1) and the
// raw 32-byte key for Ed25519 (RFC 8463 section 4.2).
func TXTRecord(domain, selector string, pub crypto.PublicKey) (string, error) {
	var k string
	var p []byte
	switch pub := pub.(type) {
	case *rsa.PublicKey:
		der, err := x509.MarshalPKIXPublicKey(pub)
		if err != nil {
			return "", fmt.Errorf("%w: %v", ErrKeyMalformed, err)
		}
		k, p = "rsa", der
	case ed25519.PublicKey:
		if len(pub) != ed25519.PublicKeySize {
			return "", ErrKeyMalformed
		}
		k, p = "ed25519", pub
	default:
		return "", fmt.Errorf("%w: %T", ErrKeyType, pub)
	}
	if domain == "" || selector == "" {
		return "", ErrBadSigner
	}
	return fmt.Sprintf("%s._domainkey.%s v=DKIM1; k=%s; p=%s", selector, domain, k, base64.StdEncoding.EncodeToString(p)), nil
}
