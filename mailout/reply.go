package mailout

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/emersion/go-message/mail"

	"github.com/envelopd/envelopd/parse"
	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/protocols/envelopay"
	"github.com/envelopd/envelopd/store"
)

// ErrNoSender is returned when the original message has no From address
// to reply to.
var ErrNoSender = errors.New("mailout: the original message has no sender to reply to")

// replyRef says which typed ref a reply of a type carries and the type of
// the message it names (envelopay-v0.2.0 "Identifiers" and the field
// tables): FULFILL and INVOICE name an ORDER, PAY an INVOICE, ACCEPT an
// OFFER, METHODS a WHICH; OOPS's generic ref names any message ("").
var replyRef = map[string]struct{ field, origType string }{
	"fulfill": {"order_ref", "order"},
	"invoice": {"order_ref", "order"},
	"pay":     {"invoice_ref", "invoice"},
	"accept":  {"offer_ref", "offer"},
	"methods": {"which_ref", "which"},
	"oops":    {"ref", ""},
}

// ReplyDraft returns a draft answering orig with a message of type typ and
// the given body (nil: an empty object). It threads the reply (spec
// "Threading"; RFC 5322 section 3.6.4: In-Reply-To is the original's
// Message-ID, References the original's References, or else its single
// In-Reply-To, followed by its Message-ID), addresses it to the original
// sender from the original's first recipient, and fills the typed ref
// when the body lacks it: order_ref for FULFILL and INVOICE, invoice_ref
// for PAY, offer_ref for ACCEPT, which_ref for METHODS, ref for OOPS. When
// the original is not of the named type but carries that ref itself (an
// INVOICE's order_ref answered by FULFILL), that value is used. An ACCEPT
// also gets amount, token and chain from the OFFER's want when absent.
func ReplyDraft(orig *parse.Result, typ string, body json.RawMessage) (Draft, error) {
	typ = strings.ToLower(strings.TrimSpace(typ))
	var d Draft
	if orig == nil || len(orig.From) == 0 {
		return d, ErrNoSender
	}
	to, err := parseAddr(orig.From[0])
	if err != nil {
		return d, fmt.Errorf("mailout: original sender: %w", err)
	}
	d.To = []*mail.Address{to}
	if len(orig.To) > 0 {
		if from, err := parseAddr(orig.To[0]); err == nil {
			d.From = from
		}
	}
	d.Type = typ
	if id := strings.Trim(orig.MessageID, "<>"); id != "" {
		d.InReplyTo = id
		refs := msgIDs(orig.References)
		if len(refs) == 0 && len(orig.InReplyTo) == 1 {
			refs = msgIDs(orig.InReplyTo)
		}
		d.References = append(refs, id)
	}
	filled, err := fillRefs(body, typ, orig)
	if err != nil {
		return d, err
	}
	d.Body = filled
	return d, nil
}

// fillRefs adds the typed ref (and an ACCEPT's payment) to body when absent.
func fillRefs(body json.RawMessage, typ string, orig *parse.Result) (json.RawMessage, error) {
	if len(body) == 0 {
		body = json.RawMessage(`{}`)
	}
	f, err := envelopay.DecodeObject(body)
	if err != nil {
		var p protocols.Problem
		if errors.As(err, &p) {
			return nil, &ComposeError{Problems: protocols.Problems{p}}
		}
		return nil, refuse(protocols.CodeInvalidJSON, "", "the body is not one JSON object: %v", err)
	}
	of := origFields(orig)
	origID := orig.ID
	if origID == "" {
		origID, _ = envelopay.String(of["id"])
	}
	var fill []string
	add := func(k string, v json.RawMessage) {
		if _, ok := f[k]; !ok && len(v) > 0 {
			fill = append(fill, `"`+k+`":`+string(v))
		}
	}
	if r, ok := replyRef[typ]; ok {
		switch {
		case (r.origType == "" || r.origType == orig.Type) && origID != "":
			b, _ := marshal(origID)
			add(r.field, b)
		case of[r.field] != nil:
			add(r.field, of[r.field])
		}
	}
	if typ == "accept" && orig.Type == "offer" {
		if want, err := envelopay.DecodeObject(of["want"]); err == nil {
			for _, k := range []string{"amount", "token", "chain"} {
				add(k, want[k])
			}
		}
	}
	return spliceFront(body, fill)
}

func origFields(orig *parse.Result) map[string]json.RawMessage {
	if orig.Fields != nil {
		return orig.Fields
	}
	if len(orig.Body) > 0 {
		if f, err := envelopay.DecodeObject(orig.Body); err == nil {
			return f
		}
	}
	return map[string]json.RawMessage{}
}

// ResultOf returns the parse result of a stored message (the parse JSON
// kept with it), completed from the stored columns, so that a stored
// message can be replied to.
func ResultOf(m *store.Message) (*parse.Result, error) {
	r := &parse.Result{}
	if len(m.Result) > 0 && string(m.Result) != "null" {
		if err := json.Unmarshal(m.Result, r); err != nil {
			return nil, fmt.Errorf("mailout: stored message %d: bad parse result: %w", m.ID, err)
		}
	}
	if r.MessageID == "" {
		r.MessageID = m.MessageID
	}
	if len(r.From) == 0 && m.Sender != "" {
		r.From = []string{m.Sender}
	}
	if len(r.To) == 0 {
		r.To = m.Recipients
	}
	if r.Type == "" {
		r.Type = m.Type
	}
	if len(r.Body) > 0 && string(r.Body) != "null" {
		if f, err := envelopay.DecodeObject(r.Body); err == nil {
			r.Fields = f
		}
	}
	r.ID = m.EnvelopayID
	if r.ID == "" && r.Fields != nil {
		r.ID, _ = envelopay.String(r.Fields["id"])
	}
	return r, nil
}

// ComposeOOPS composes a courtesy OOPS answering orig for the error code
// with the sentence note; it is ComposeOOPSFor with a problem of that code
// and message.
func ComposeOOPS(orig *parse.Result, code protocols.Code, note, from string) ([]byte, error) {
	return ComposeOOPSFor(orig, protocols.Problem{Code: code, Message: note}, from)
}

// ComposeOOPSFor composes a courtesy OOPS answering orig for the problem p
// (envelopay-v0.2.0 "OOPS": the note tells a human, error.code tells an
// agent). Its body is parse.OOPSBody — the body `envelopd parse` previews
// — with ref the offending message's Envelopay id; the reply is threaded,
// addressed to orig's sender from from, and marked Auto-Submitted:
// auto-replied (RFC 3834 section 5) so that no peer answers it in turn.
// Nothing the peer wrote reaches it unsanitised: the note is
// parse.OOPSNote (no control characters, bounded, no DKIM tags) and the
// threading ids are kept only when short and printable. The result is not
// signed (see Mailer.OOPS).
func ComposeOOPSFor(orig *parse.Result, p protocols.Problem, from string) ([]byte, error) {
	d, err := oopsDraft(orig, p, from)
	if err != nil {
		return nil, err
	}
	return Compose(d)
}

// Bounds on the threading ids a courtesy OOPS copies from the message it
// answers (RFC 5322 §3.6.4 ids are short; these are generous).
const (
	maxOOPSMsgID = 250
	maxOOPSRefs  = 20
)

func oopsDraft(orig *parse.Result, p protocols.Problem, from string) (Draft, error) {
	if orig == nil {
		return Draft{}, ErrNoSender
	}
	id := orig.ID
	if id == "" {
		id, _ = envelopay.String(origFields(orig)["id"])
	}
	d, err := ReplyDraft(orig, "oops", parse.OOPSBody(p, id))
	if err != nil {
		return d, err
	}
	f, err := parseAddr(from)
	if err != nil {
		return d, refuse(protocols.CodeInvalidField, "from", "bad From address %q", from)
	}
	d.From = f
	d.Note = parse.OOPSNote(p)
	d.AutoSubmitted = "auto-replied"
	if !cleanMsgID(d.InReplyTo) {
		d.InReplyTo = ""
	}
	var refs []string
	for _, r := range d.References {
		if cleanMsgID(r) {
			refs = append(refs, r)
		}
	}
	if len(refs) > maxOOPSRefs {
		refs = refs[len(refs)-maxOOPSRefs:]
	}
	d.References = refs
	return d, nil
}

// cleanMsgID reports whether id may be copied into a header: printable
// ASCII, no blanks or angle brackets, bounded.
func cleanMsgID(id string) bool {
	if id == "" || len(id) > maxOOPSMsgID {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c >= 0x7f || c == '<' || c == '>' {
			return false
		}
	}
	return true
}

// parseAddr accepts "Name <a@b>" and a bare a@b.
func parseAddr(s string) (*mail.Address, error) {
	s = strings.TrimSpace(s)
	if a, err := mail.ParseAddress(s); err == nil {
		return a, nil
	}
	if strings.Count(s, "@") == 1 && !strings.ContainsAny(s, " <>\r\n,") {
		return &mail.Address{Address: s}, nil
	}
	return nil, fmt.Errorf("bad address %q", s)
}
