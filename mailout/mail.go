package mailout

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	"github.com/emersion/go-message/mail"

	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/store"
)

// Mail is a message whose subject and text are the caller's, verbatim:
// what the HTTP API sends (an AgentMail send/reply/forward). It may or
// may not be Envelopay; the store's Check decides that from the composed
// bytes, as for received mail.
type Mail struct {
	From        *mail.Address
	To, Cc, Bcc []*mail.Address // Bcc is envelope only
	ReplyTo     []*mail.Address
	Subject     string
	Text, HTML  string
	InReplyTo   string
	References  []string
	Headers     [][2]string // extra fields (name, value), already checked by the caller
	Attachments []Attachment
	MessageID   string // default: random on the From domain
	Date        time.Time
}

// reservedHeaders are fields a Mail's Headers may not set: the composer
// writes them (RFC 5322 §3.6 fields, MIME structure, signatures).
var reservedHeaders = map[string]bool{
	"from": true, "sender": true, "to": true, "cc": true, "bcc": true, "message-id": true,
	"date": true, "mime-version": true, "content-type": true, "content-transfer-encoding": true,
	"dkim-signature": true, "received": true, "return-path": true, "subject": true,
	"in-reply-to": true, "references": true, "reply-to": true, "authentication-results": true,
	"received-spf": true, "delivered-to": true, "dkim-filter": true, "domainkey-signature": true,
}

// reservedPrefixes are families of fields a Mail's Headers may not set:
// every MIME structure field (RFC 2045 §9: Content-Type, -Disposition
// (RFC 2183), -ID (RFC 2392), -Description, -Transfer-Encoding,
// -Language, -Location, …) — one in the top header turns the whole body
// into something else, an attachment for instance — resent and trace
// fields (RFC 5322 §3.6.6, §3.6.7) and ARC sets (RFC 8617).
var reservedPrefixes = []string{"content-", "resent-", "arc-"}

// ReservedHeader reports whether the caller may not set field name.
func ReservedHeader(name string) bool {
	n := strings.ToLower(name)
	if reservedHeaders[n] {
		return true
	}
	for _, p := range reservedPrefixes {
		if strings.HasPrefix(n, p) {
			return true
		}
	}
	return false
}

// ComposeMail composes m: From, To, Cc, Reply-To, Subject, Date,
// Message-ID, In-Reply-To, References (RFC 5322 §3.6), the extra headers,
// and the body as Compose writes it (text/plain, with a text/html
// alternative and attachments as multipart when asked for).
func ComposeMail(m Mail) (*Message, error) {
	if err := checkFrom(m.From); err != nil {
		return nil, err
	}
	d := Draft{To: m.To, Cc: m.Cc, Bcc: m.Bcc, HTML: m.HTML, Attachments: m.Attachments}
	rcpts, err := recipients(d)
	if err != nil {
		return nil, err
	}
	if strings.ContainsAny(m.Subject, "\r\n") {
		return nil, refuse(protocols.CodeInvalidField, "subject", "the subject must be one line")
	}
	msgID, date := identity(m.From, m.MessageID, m.Date)
	var h mail.Header
	// go-message writes fields in reverse order of addition.
	text := crlf(m.Text)
	setMIME(&h, len(m.Attachments) == 0 && m.HTML == "", text)
	for i := len(m.Headers) - 1; i >= 0; i-- {
		k, v := m.Headers[i][0], m.Headers[i][1]
		if ReservedHeader(k) || strings.ContainsAny(k+v, "\r\n") || k == "" {
			return nil, refuse(protocols.CodeInvalidField, "headers", "header %q may not be set", k)
		}
		h.Add(k, v)
	}
	setThreading(&h, m.References, m.InReplyTo, msgID, date)
	h.SetSubject(m.Subject)
	setAddresses(&h, m.From, m.To, m.Cc, m.ReplyTo)
	var buf bytes.Buffer
	if err := writeBody(&buf, h, d, text); err != nil {
		return nil, fmt.Errorf("mailout: compose: %w", err)
	}
	return &Message{Raw: buf.Bytes(), MessageID: msgID, From: strings.ToLower(m.From.Address), Recipients: rcpts}, nil
}

// PrepareMail composes m, signs it and returns the queue entry of kind
// with its stored copy, as Prepare does for a Draft.
func (mr *Mailer) PrepareMail(m Mail, kind string) (*store.Outgoing, error) {
	msg, err := ComposeMail(m)
	if err != nil {
		return nil, err
	}
	return mr.queue(msg, kind)
}
