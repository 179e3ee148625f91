package dkim

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"crypto/rsa"
	"errors"
	"fmt"

	msgdkim "github.com/emersion/go-msgauth/dkim"
)

// signedHeaders is the order of the header fields a signature covers, those
// absent from the message skipped. From is listed once more than it occurs
// (oversigned, RFC 6376 section 8.15), so that a From added later breaks the
// signature.
var signedHeaders = []string{
	"From", "To", "Cc", "Subject", "Date", "Message-ID", "In-Reply-To",
	"References", "MIME-Version", "Content-Type", "X-Envelopay-Type",
}

// Signer is one signing identity: the SDID (d=), the selector (s=) and the
// private key, *rsa.PrivateKey (rsa-sha256, at least 1024 bits, 2048
// recommended) or ed25519.PrivateKey (ed25519-sha256, RFC 8463).
type Signer struct {
	Domain, Selector string
	Key              crypto.Signer
}

// Signing errors.
var (
	ErrNoFrom     = errors.New("dkim: message has no From header field")
	ErrManyFrom   = errors.New("dkim: message has more than one From header field")
	ErrBadHeader  = errors.New("dkim: malformed header section")
	ErrNoSigner   = errors.New("dkim: no signer given")
	ErrBadSigner  = errors.New("dkim: signer needs a domain, a selector and a key")
	ErrKeyTooWeak = errors.New("RSA key shorter than 1024 bits (RFC 8301 section 3.2)")
)

// Sign signs raw with every signer and returns the message with one
// DKIM-Signature field per signer prepended, in signer order. Line ends are
// made CRLF first (bare LF becomes CRLF) and the result ends in CRLF. Each
// signature is relaxed/relaxed over signedHeaders and covers the message as
// given, not the other signatures.
func Sign(raw []byte, signers ...Signer) ([]byte, error) {
	if len(signers) == 0 {
		return nil, ErrNoSigner
	}
	msg := toCRLF(raw)
	fields, complete := headerFields(msg)
	if !complete {
		// A message without a body: add the empty line that ends the header.
		msg = append(msg, "\r\n"...)
	}
	if err := checkHeader(msg); err != nil {
		return nil, err
	}
	switch countFields(fields, "From") {
	case 0:
		return nil, ErrNoFrom
	case 1:
	default:
		return nil, ErrManyFrom
	}
	keys := signedKeys(fields)

	var out bytes.Buffer
	for _, s := range signers {
		if s.Domain == "" || s.Selector == "" || s.Key == nil {
			return nil, ErrBadSigner
		}
		switch pub := s.Key.Public().(type) {
		case *rsa.PublicKey:
			if pub.N.BitLen() < 1024 {
				return nil, fmt.Errorf("dkim: signer %s._domainkey.%s: %w", s.Selector, s.Domain, ErrKeyTooWeak)
			}
		case ed25519.PublicKey:
		default:
			return nil, fmt.Errorf("dkim: signer %s._domainkey.%s: %w: %T", s.Selector, s.Domain, ErrKeyType, pub)
		}
		ms, err := msgdkim.NewSigner(&msgdkim.SignOptions{
			Domain:                 s.Domain,
			Selector:               s.Selector,
			Signer:                 s.Key,
			Hash:                   crypto.SHA256,
			HeaderCanonicalization: msgdkim.CanonicalizationRelaxed,
			BodyCanonicalization:   msgdkim.CanonicalizationRelaxed,
			HeaderKeys:             keys,
		})
		if err != nil {
			return nil, err
		}
		if _, err := ms.Write(msg); err != nil {
			ms.Close()
			return nil, err
		}
		if err := ms.Close(); err != nil {
			return nil, fmt.Errorf("dkim: signing for %s._domainkey.%s: %w", s.Selector, s.Domain, err)
		}
		out.WriteString(ms.Signature())
	}
	out.Write(msg)
	return out.Bytes(), nil
}

// checkHeader rejects what would change meaning once a DKIM-Signature is
// prepended or that is not a header field at all (RFC 5322 section 2.2): a
// first line starting with white space (it would continue the signature),
// a line without a colon, an empty field name.
func checkHeader(msg []byte) error {
	for n, line := range bytes.Split(msg, []byte("\r\n")) {
		if len(line) == 0 {
			return nil
		}
		if line[0] == ' ' || line[0] == '\t' {
			if n == 0 {
				return fmt.Errorf("%w: line 1 starts with white space", ErrBadHeader)
			}
			continue
		}
		name, _, ok := bytes.Cut(line, []byte(":"))
		if !ok || len(bytes.TrimSpace(name)) == 0 {
			return fmt.Errorf("%w: line %d is not a header field", ErrBadHeader, n+1)
		}
	}
	return nil
}

// toCRLF returns raw with every line ending in CRLF, the last one included.
func toCRLF(raw []byte) []byte {
	var b bytes.Buffer
	b.Grow(len(raw) + len(raw)/40 + 2)
	for i, c := range raw {
		if c == '\n' && (i == 0 || raw[i-1] != '\r') {
			b.WriteByte('\r')
		}
		b.WriteByte(c)
	}
	if !bytes.HasSuffix(b.Bytes(), []byte("\r\n")) {
		if bytes.HasSuffix(b.Bytes(), []byte("\r")) {
			b.WriteByte('\n')
		} else {
			b.WriteString("\r\n")
		}
	}
	return b.Bytes()
}

// signedKeys is the h= list for a message with these header fields.
func signedKeys(fields []field) []string {
	var keys []string
	for _, name := range signedHeaders {
		n := countFields(fields, name)
		if name == "From" {
			n++
		}
		for range n {
			keys = append(keys, name)
		}
	}
	return keys
}
