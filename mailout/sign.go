package mailout

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/envelopd/envelopd/dkim"
	"github.com/envelopd/envelopd/internal/secretfile"
	"github.com/envelopd/envelopd/message"
	"github.com/envelopd/envelopd/parse"
	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/store"
)

// LoadSigner reads a DKIM private key (PEM: PKCS#8, PKCS#1 RSA, or what
// dkim.LoadKey accepts) for domain and selector.
func LoadSigner(keyPath, selector, domain string) (dkim.Signer, error) {
	if keyPath == "" || selector == "" || domain == "" {
		return dkim.Signer{}, fmt.Errorf("mailout: DKIM signing needs a key file, a selector and a domain")
	}
	// A key file the group or others can read is refused (secretfile).
	pemKey, err := secretfile.Read(keyPath)
	if err != nil {
		return dkim.Signer{}, &dkim.KeyError{Path: keyPath, Err: err}
	}
	k, err := dkim.ParseKey(pemKey)
	if err != nil {
		return dkim.Signer{}, &dkim.KeyError{Path: keyPath, Err: err}
	}
	return dkim.Signer{Domain: strings.ToLower(domain), Selector: selector, Key: k}, nil
}

// Sign DKIM-signs raw with every signer (envelopay-v0.2.0 "DKIM": senders
// should sign; RFC 6376, relaxed/relaxed, From oversigned). With no signer
// it returns raw unchanged.
func Sign(raw []byte, signers []dkim.Signer) ([]byte, error) {
	if len(signers) == 0 {
		return raw, nil
	}
	return dkim.Sign(raw, signers...)
}

// Mailer turns drafts into signed queue entries.
type Mailer struct {
	Signers []dkim.Signer
	// Expiry is how long delivery is retried (default store.DefaultExpiry
	// semantics: 24 h).
	Expiry time.Duration
	Now    func() time.Time
}

// Prepare composes d, signs it and returns the queue entry of kind
// ("send", "oops", …) for the store, with the copy the store keeps in
// its thread (message.Sent).
func (m *Mailer) Prepare(d Draft, kind string) (*store.Outgoing, error) {
	msg, err := ComposeMessage(d)
	if err != nil {
		return nil, err
	}
	return m.queue(msg, kind)
}

// queue signs a composed message and returns its queue entry of kind,
// with its stored copy (Prepare, PrepareMail).
func (m *Mailer) queue(msg *Message, kind string) (*store.Outgoing, error) {
	raw, err := Sign(msg.Raw, m.Signers)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	if m.Now != nil {
		now = m.Now()
	}
	out := &store.Outgoing{
		From:       msg.From,
		Recipients: msg.Recipients,
		Raw:        raw,
		MessageID:  parse.NormalizeMessageID(msg.MessageID),
		Kind:       kind,
		Expires:    now.Add(orDefault(m.Expiry, 24*time.Hour)),
	}
	// The copy is analysed as received mail is (package message), so a
	// thread shows both directions alike.
	out.Copy = message.Sent(context.Background(), raw, now)
	return out, nil
}

// OOPS composes and signs a courtesy OOPS; it has the shape of
// mailin.OOPSComposer.
func (m *Mailer) OOPS(orig *parse.Result, p protocols.Problem, from string) ([]byte, error) {
	raw, err := ComposeOOPSFor(orig, p, from)
	if err != nil {
		return nil, err
	}
	return Sign(raw, m.Signers)
}
