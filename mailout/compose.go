package mailout

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"strings"
	"time"

	"github.com/emersion/go-message/mail"

	"github.com/envelopd/envelopd/parse"
	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/protocols/envelopay"
)

// Draft is one Envelopay message to compose.
type Draft struct {
	From        *mail.Address   // required; its domain names the Message-ID
	To, Cc, Bcc []*mail.Address // at least one recipient; Bcc is envelope only
	// Type is the Envelopay type in any case ("order", "ORDER"); when empty
	// it is taken from the body's "type".
	Type string
	// Note is the subject's note (`TYPE | note`); when empty the body's
	// "note" is used. It is copied into a body that has no "note".
	Note string
	// Body is the Envelopay JSON object. v, type and id are filled when
	// absent (id with envelopay.NewID). Nil means an empty object, unless
	// NoJSON is set.
	Body json.RawMessage
	// NoJSON sends no JSON at all: a bare WHICH, or a METHODS in natural
	// language mode ("Natural language mode") with Text as its body.
	NoJSON bool
	// Text is human-readable text put before the JSON in the text/plain part.
	Text string
	// HTML, when set, is sent as a text/html alternative to the text part.
	HTML string
	// InReplyTo and References thread the message (RFC 5322 section
	// 3.6.4); ids with or without angle brackets.
	InReplyTo  string
	References []string
	// Attachments are added as attachment parts (multipart/mixed).
	Attachments []Attachment
	// Date defaults to now; MessageID (without angle brackets) to a random
	// id on the From domain.
	Date      time.Time
	MessageID string
	// AutoSubmitted sets the RFC 3834 Auto-Submitted field, e.g.
	// "auto-replied" on a courtesy OOPS, so that peers never answer it.
	AutoSubmitted string
}

// Attachment is one file sent with the message.
type Attachment struct {
	Filename    string
	ContentType string // "" means application/octet-stream
	Data        []byte
}

// ComposeError is why Compose refused a draft: the protocols.Problems the
// Envelopay validator found (the same codes a receiver would report), or a
// problem with the mail fields (code invalid_field, field "from", "to", …).
// errors.Is(err, protocols.Problem{Code: c}) matches any of them.
type ComposeError struct {
	Problems protocols.Problems
}

func (e *ComposeError) Error() string {
	msgs := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		msgs[i] = p.Error()
	}
	return "mailout: message refused: " + strings.Join(msgs, "; ")
}

// Unwrap exposes each problem to errors.Is and errors.As.
func (e *ComposeError) Unwrap() []error {
	errs := make([]error, len(e.Problems))
	for i, p := range e.Problems {
		errs[i] = p
	}
	return errs
}

func refuse(code protocols.Code, field, format string, args ...any) error {
	return &ComposeError{Problems: protocols.Problems{protocols.New(code, field, format, args...)}}
}

// Message is a composed message with the facts the queue and the store
// need.
type Message struct {
	Raw        []byte
	MessageID  string // without angle brackets
	From       string // envelope sender: the From address
	Recipients []string
	Type       string // lower case
	Body       json.RawMessage
}

// Compose returns d as an RFC 5322 message: From, To, Cc, Subject
// `TYPE | note` (envelopay-v0.2.0 "Protocol"; the note RFC 2047-encoded when
// not ASCII, the keyword always plain), Date, Message-ID, In-Reply-To and
// References, MIME-Version, X-Envelopay-Type, and the JSON as one compact
// object in a text/plain; charset=utf-8 part (7bit when it is ASCII,
// quoted-printable otherwise, so no line exceeds 998 octets, RFC 5322
// section 2.1.1). An invalid message is refused with a *ComposeError.
func Compose(d Draft) ([]byte, error) {
	m, err := ComposeMessage(d)
	if err != nil {
		return nil, err
	}
	return m.Raw, nil
}

// ComposeMessage is Compose returning the composed facts as well.
func ComposeMessage(d Draft) (*Message, error) {
	typ, body, err := prepareBody(&d)
	if err != nil {
		return nil, err
	}
	if err := checkFrom(d.From); err != nil {
		return nil, err
	}
	rcpts, err := recipients(d)
	if err != nil {
		return nil, err
	}
	msgID, date := identity(d.From, d.MessageID, d.Date)
	note := subjectNote(d.Note, body)

	text := TextBody(d.Text, body)
	single := len(d.Attachments) == 0 && d.HTML == ""

	var h mail.Header
	// go-message writes fields in reverse order of addition.
	setMIME(&h, single, text)
	h.Set("X-Envelopay-Type", strings.ToUpper(typ))
	if d.AutoSubmitted != "" {
		h.Set("Auto-Submitted", oneLine(d.AutoSubmitted))
	}
	setThreading(&h, d.References, d.InReplyTo, msgID, date)
	h.Set("Subject", subject(typ, note))
	setAddresses(&h, d.From, d.To, d.Cc, nil)

	var buf bytes.Buffer
	if err := writeBody(&buf, h, d, text); err != nil {
		return nil, fmt.Errorf("mailout: compose: %w", err)
	}
	if err := selfCheck(buf.Bytes(), typ, body); err != nil {
		return nil, err
	}
	return &Message{
		Raw:        buf.Bytes(),
		MessageID:  msgID,
		From:       strings.ToLower(d.From.Address),
		Recipients: rcpts,
		Type:       typ,
		Body:       body,
	}, nil
}

// prepareBody settles the type and the JSON body (filled and validated).
// It returns a nil body for NoJSON.
func prepareBody(d *Draft) (string, json.RawMessage, error) {
	typ := strings.ToLower(strings.TrimSpace(d.Type))
	var f map[string]json.RawMessage
	if !d.NoJSON {
		if len(bytes.TrimSpace(d.Body)) == 0 {
			d.Body = json.RawMessage(`{}`)
		}
		var err error
		f, err = envelopay.DecodeObject(d.Body)
		if err != nil {
			var p protocols.Problem
			if errors.As(err, &p) {
				return "", nil, &ComposeError{Problems: protocols.Problems{p}}
			}
			return "", nil, refuse(protocols.CodeInvalidJSON, "", "the body is not one JSON object: %v", err)
		}
		if bt, ok := envelopay.String(f["type"]); ok {
			if typ == "" {
				typ = strings.ToLower(bt)
			} else if bt != typ {
				return "", nil, refuse(protocols.CodeTypeMismatch, "type", "the body says type %q but the draft says %q", bt, typ)
			}
		}
	}
	if !envelopay.IsType(typ) {
		return "", nil, refuse(protocols.CodeUnknownType, "type",
			"unknown Envelopay type %q (one of %s)", d.Type, strings.Join(envelopay.Types, ", "))
	}
	if d.NoJSON {
		if typ != "which" && typ != "methods" {
			return "", nil, refuse(protocols.CodeMissingField, "", "only WHICH and METHODS may be sent without JSON")
		}
		if errs, _ := envelopay.Validate(typ, nil); len(errs) > 0 {
			return "", nil, &ComposeError{Problems: errs}
		}
		return typ, nil, nil
	}
	var fill []string
	add := func(k string, v any) {
		if _, ok := f[k]; !ok {
			b, _ := marshal(v)
			fill = append(fill, `"`+k+`":`+string(b))
		}
	}
	add("v", envelopay.Version)
	add("type", typ)
	if _, ok := f["id"]; !ok {
		add("id", envelopay.NewID(typ))
	}
	if d.Note != "" {
		add("note", d.Note)
	}
	body, err := spliceFront(d.Body, fill)
	if err != nil {
		return "", nil, refuse(protocols.CodeInvalidJSON, "", "%v", err)
	}
	if errs, _ := envelopay.Validate(typ, body); len(errs) > 0 {
		return "", nil, &ComposeError{Problems: errs}
	}
	if strings.TrimSpace(d.Text) != "" {
		// The receiver takes the first JSON-like candidate of the text
		// (parse.FindJSON): the text before the body must not hold one, nor
		// end so that it joins the body into one ("[" before "{").
		if j, err := parse.FindJSON([]byte(TextBody(d.Text, body))); err != nil || !bytes.Equal(j, body) {
			return "", nil, errHiddenBody()
		}
	}
	return typ, body, nil
}

// errHiddenBody refuses human text that a receiver would read instead of
// the Envelopay body.
func errHiddenBody() error {
	return refuse(protocols.CodeInvalidField, "text", "the text holds JSON that a receiver would take for the Envelopay body; move it into an attachment")
}

// spliceFront compacts the object obj and inserts the members fill at its
// front, keeping the caller's member order.
func spliceFront(obj json.RawMessage, fill []string) (json.RawMessage, error) {
	var c bytes.Buffer
	if err := json.Compact(&c, obj); err != nil {
		return nil, err
	}
	b := c.Bytes()
	if len(fill) == 0 {
		return b, nil
	}
	rest := b[1:] // after '{'
	out := []byte("{" + strings.Join(fill, ","))
	if len(rest) > 0 && rest[0] != '}' {
		out = append(out, ',')
	}
	return append(out, rest...), nil
}

// marshal encodes v without HTML escaping.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

func recipients(d Draft) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, l := range [][]*mail.Address{d.To, d.Cc, d.Bcc} {
		for _, a := range l {
			if a == nil || !strings.Contains(a.Address, "@") || strings.ContainsAny(a.Address, "\r\n<> ") {
				return nil, refuse(protocols.CodeInvalidField, "to", "bad recipient address %v", a)
			}
			addr := strings.ToLower(a.Address)
			if !seen[addr] {
				seen[addr] = true
				out = append(out, addr)
			}
		}
	}
	if len(out) == 0 {
		return nil, refuse(protocols.CodeMissingField, "to", "at least one recipient is required")
	}
	return out, nil
}

// subjectNote is the note for the subject: the draft's, else the body's
// "note", on one line.
func subjectNote(note string, body json.RawMessage) string {
	if note == "" && body != nil {
		if f, err := envelopay.DecodeObject(body); err == nil {
			note, _ = envelopay.String(f["note"])
		}
	}
	return oneLine(note)
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// subject is `KEYWORD | note` or the bare keyword. Only the note is
// RFC 2047-encoded, so that the keyword stays readable to any receiver.
func subject(typ, note string) string {
	kw := strings.ToUpper(typ)
	if note == "" {
		return kw
	}
	return kw + " | " + mime.QEncoding.Encode("utf-8", note)
}

// checkFrom refuses a message without a From address (user@domain).
func checkFrom(from *mail.Address) error {
	if from == nil || !strings.Contains(from.Address, "@") {
		return refuse(protocols.CodeMissingField, "from", "a From address (user@domain) is required")
	}
	return nil
}

// identity is the Message-ID and Date a message is written with: the
// given ones, or a new Message-ID in from's domain and now.
func identity(from *mail.Address, messageID string, date time.Time) (string, time.Time) {
	_, domain, _ := strings.Cut(from.Address, "@")
	msgID := strings.Trim(strings.TrimSpace(messageID), "<>")
	if msgID == "" {
		msgID = newMessageID(domain)
	}
	if date.IsZero() {
		date = time.Now()
	}
	return msgID, date
}

// setMIME adds MIME-Version and, for a single text part, its
// Content-Type and Content-Transfer-Encoding (go-message writes fields
// in reverse order of addition: these come last).
func setMIME(h *mail.Header, single bool, text string) {
	if single {
		h.Set("Content-Transfer-Encoding", transferEncoding(text))
		h.Set("Content-Type", "text/plain; charset=utf-8")
	}
	h.Set("MIME-Version", "1.0")
}

// setThreading adds References and In-Reply-To (RFC 5322 section 3.6.4)
// when there are any, then Message-ID and Date.
func setThreading(h *mail.Header, references []string, inReplyTo, msgID string, date time.Time) {
	if refs := msgIDs(references); len(refs) > 0 {
		h.SetMsgIDList("References", refs)
	}
	if irt := msgIDs([]string{inReplyTo}); len(irt) > 0 {
		h.SetMsgIDList("In-Reply-To", irt)
	}
	h.SetMessageID(msgID)
	h.SetDate(date)
}

// setAddresses adds Reply-To, Cc and To when there are any, then From:
// written first, From leads the header.
func setAddresses(h *mail.Header, from *mail.Address, to, cc, replyTo []*mail.Address) {
	if len(replyTo) > 0 {
		h.SetAddressList("Reply-To", replyTo)
	}
	if len(cc) > 0 {
		h.SetAddressList("Cc", cc)
	}
	if len(to) > 0 {
		h.SetAddressList("To", to)
	}
	h.SetAddressList("From", []*mail.Address{from})
}

// msgIDs strips angle brackets and drops empty ids.
func msgIDs(ids []string) []string {
	var out []string
	for _, id := range ids {
		for _, f := range strings.Fields(id) {
			if f = strings.Trim(f, "<>"); f != "" {
				out = append(out, f)
			}
		}
	}
	return out
}

func newMessageID(domain string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:]) + "@" + strings.ToLower(domain)
}

// selfCheck parses the composed message with the receiver's own rules
// (package parse) and refuses it unless it reads back valid, with the same
// type and the very JSON body: human text holding a JSON object of its own
// would otherwise be taken for the body.
func selfCheck(raw []byte, typ string, body json.RawMessage) error {
	r := parse.Parse(raw, parse.Options{})
	if len(r.Errors) > 0 {
		return &ComposeError{Problems: r.Errors}
	}
	if r.Type != typ {
		return refuse(protocols.CodeTypeMismatch, "subject", "the composed message reads back as type %q, not %q", r.Type, typ)
	}
	if body != nil && !bytes.Equal(r.Body, body) {
		return errHiddenBody()
	}
	return nil
}

// PrepareBody is the Envelopay body d would be sent with: its type (lower
// case) and its JSON with v, type, id (and note) filled when absent, or a
// *ComposeError naming the Envelopay codes (the stateless checks; the
// stateful ones are store.Check's). A bare WHICH/METHODS (NoJSON) has a
// nil body. Front ends that compose the text themselves (the MCP server)
// call it so the filling rules stay here.
func PrepareBody(d Draft) (string, json.RawMessage, error) { return prepareBody(&d) }
