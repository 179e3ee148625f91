package parse

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/mail"
	"slices"
	"strings"
	"time"

	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/protocols/envelopay"
)

// Options tune Parse.
type Options struct {
	// Lenient accepts what the Envelopay reference implementation sends:
	// repeated "Re:" prefixes are stripped from the subject (never "Fwd:")
	// and the keyword matches in any case (implementation-notes.md).
	Lenient bool
	// Limits bound the work and the output (zero fields: defaults).
	Limits Limits
}

// Parse parses one raw RFC 5322 message (CRLF or LF line endings) into a
// Result. It never fails and never panics: whatever is wrong with the input
// is in Result.Errors and Result.Warnings. The Result may share memory with
// raw (attachment data, header values): do not modify raw afterwards.
func Parse(raw []byte, opts Options) *Result {
	lim := opts.Limits.WithDefaults()
	r := &Result{
		Errors: protocols.Problems{}, Warnings: protocols.Problems{},
		InReplyTo: []string{}, References: []string{},
		From: []string{}, To: []string{}, Cc: []string{},
		Attachments: []Attachment{},
	}
	h, body, bad := readHeader(raw)
	if bad != nil {
		r.err(protocols.CodeInvalidField, "header", "malformed header line %q; the header ends there and the line starts the body", clipLine(bad))
	}
	r.headers(h)

	// MIME structure (RFC 2045, 2046): flatten into leaves.
	w := walker{parts: make([]part, 0, 4), maxParts: lim.MaxParts}
	w.walk(h, body, 0, "text/plain")
	r.Errors = append(r.Errors, w.errs...)
	if w.skipped > 0 {
		r.err(protocols.CodeTooManyParts, "mime", "more than %d MIME parts; the %d after the first %d were not analysed", lim.MaxParts, w.skipped, lim.MaxParts)
	}

	// Subject ("Protocol" / "Subject parsing").
	subj, serr := envelopay.ParseSubject(r.Subject, opts.Lenient)
	r.Type, r.Note = subj.Type, subj.Note
	var subjProblem protocols.Problem
	if serr != nil {
		errors.As(serr, &subjProblem)
		r.Errors = append(r.Errors, subjProblem)
	}

	textIdx := r.attachments(w.parts, lim.MaxAttachments)
	var text []byte
	if serr == nil && r.Note == "" || r.Type == "" && subj.Keyword == "" {
		// A reply written the Envelopay reference's way (SubjectLine):
		// the first text line is the subject when the header's is not
		// Envelopay (AgentMail's "Re: …", also when Lenient read a type
		// through the Re:) or is the bare same TYPE.
		n := len(r.Errors)
		text = stripQuoted(r.bodyText(w.parts, textIdx))
		if ls, rest, ok := SubjectLine(text); ok && (r.Type == "" || r.Type == ls.Type || !strictSubject(r.Subject)) {
			if r.Type == "" {
				r.Errors = slices.DeleteFunc(r.Errors, func(p protocols.Problem) bool { return p == subjProblem })
			}
			r.Type, r.Note, text = ls.Type, ls.Note, rest
		} else if r.Type == "" {
			r.Errors = r.Errors[:n] // the text of mail that is not Envelopay is not judged
		}
	} else if r.Type != "" {
		text = stripQuoted(r.bodyText(w.parts, textIdx))
	}
	if r.Type != "" {
		if th := strings.TrimSpace(r.TypeHeader); th != "" && !strings.EqualFold(th, r.Type) {
			r.warn(protocols.CodeTypeMismatch, "x-envelopay-type",
				"X-Envelopay-Type says %q but the subject says %q; the subject wins", th, r.Type)
		}
		r.body(text, lim)
	}
	r.Valid = len(r.Errors) == 0
	r.OOPS = r.oops(subj)
	return r
}

func (r *Result) err(code protocols.Code, field, format string, args ...any) {
	r.Errors = append(r.Errors, protocols.New(code, field, format, args...))
}

func (r *Result) warn(code protocols.Code, field, format string, args ...any) {
	r.Warnings = append(r.Warnings, protocols.New(code, field, format, args...))
}

// headers fills the header-derived fields (RFC 5322 §3.6).
func (r *Result) headers(h header) {
	switch n := h.count("from"); {
	case n == 0:
		r.err(protocols.CodeMissingField, "from", "no From header field")
	case n > 1:
		r.err(protocols.CodeInvalidField, "from", "%d From header fields; a message has exactly one (RFC 5322 §3.6)", n)
	}
	for _, a := range []struct {
		name  string
		dst   *[]string
		fatal bool
	}{{"from", &r.From, true}, {"to", &r.To, false}, {"cc", &r.Cc, false}} {
		v, ok := h.get(a.name)
		if !ok || len(v) == 0 {
			continue
		}
		list, good := addressList(v)
		*a.dst = list
		if !good {
			msg := fmt.Sprintf("cannot parse the %s address list %q; addresses picked out of it", a.name, clipLine(v))
			p := protocols.Problem{Code: protocols.CodeInvalidField, Field: a.name, Message: msg}
			if a.fatal {
				r.Errors = append(r.Errors, p)
			} else {
				r.Warnings = append(r.Warnings, p)
			}
		}
	}
	if v, ok := h.get("date"); ok {
		if t, err := parseDate(string(v)); err == nil {
			r.Date = t.Format(time.RFC3339)
		} else {
			r.Date = string(v)
			r.warn(protocols.CodeInvalidField, "date", "unparseable Date %q", clipLine(v))
		}
	}
	if v, ok := h.get("message-id"); ok {
		r.MessageID = NormalizeMessageID(string(v))
	}
	if v, ok := h.get("in-reply-to"); ok {
		r.InReplyTo = nonNil(MessageIDList(string(v)))
	}
	if v, ok := h.get("references"); ok {
		r.References = nonNil(MessageIDList(string(v)))
	}
	if v, ok := h.get("subject"); ok {
		s, good := decodeWords(v)
		r.Subject = s
		if !good {
			r.err(protocols.CodeInvalidField, "subject", "malformed RFC 2047 encoded-word in the Subject; taken as written")
		}
	}
	r.TypeHeader = h.getString("x-envelopay-type")
}

// parseDate reads an RFC 5322 §3.3 date. The two layouts nearly all mail
// uses are tried first (net/mail tries many, and every miss allocates).
func parseDate(v string) (time.Time, error) {
	for _, layout := range []string{"Mon, 2 Jan 2006 15:04:05 -0700", "2 Jan 2006 15:04:05 -0700"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, nil
		}
	}
	return mail.ParseDate(v)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// isBodyText reports whether a leaf may be the message text: an inline
// text/plain or text/html part without a file name.
func isBodyText(p *part) bool {
	return (p.mediaType == "text/plain" || p.mediaType == "text/html") &&
		p.disposition != "attachment" && p.filename == ""
}

// attachments lists every leaf that is not body text, decoded,
// and returns the indexes of the body-text candidates.
func (r *Result) attachments(parts []part, max int) (text []int) {
	skipped := 0
	for i := range parts {
		p := &parts[i]
		if isBodyText(p) {
			text = append(text, i)
			continue
		}
		if len(r.Attachments) == max {
			skipped++ // not decoded, not listed
			continue
		}
		data, problem := decodeTransfer(p.raw, p.cte)
		if problem != "" {
			r.warn(protocols.CodeInvalidField, fmt.Sprintf("attachments[%d]", len(r.Attachments)), "%s", problem)
		}
		r.Attachments = append(r.Attachments, Attachment{
			Filename: p.filename, ContentType: p.mediaType, Size: len(data), Data: data,
		})
	}
	if skipped > 0 {
		r.err(protocols.CodeTooManyAttachments, "attachments", "more than %d attachments; the %d after the first %d were not analysed", max, skipped, max)
	}
	return text
}

// bodyText returns the decoded text of the chosen body part: the first
// non-blank text/plain, else the first text/html turned into text.
func (r *Result) bodyText(parts []part, idx []int) []byte {
	var htmlPart *part
	for _, i := range idx {
		p := &parts[i]
		if p.mediaType == "text/html" {
			if htmlPart == nil {
				htmlPart = p
			}
			continue
		}
		t := r.decodeText(p)
		if len(bytes.TrimSpace(t)) > 0 {
			return t
		}
	}
	if htmlPart != nil {
		return htmlToText(r.decodeText(htmlPart))
	}
	return nil
}

// decodeText undoes the transfer encoding and the charset of a text part;
// problems with either are errors: what was decoded may not be what the
// sender wrote.
func (r *Result) decodeText(p *part) []byte {
	t, problem := decodeTransfer(p.raw, p.cte)
	if problem != "" {
		r.err(protocols.CodeInvalidField, "content-transfer-encoding", "%s", problem)
	}
	t, problem = toUTF8(t, p.params.charset)
	if problem != "" {
		r.err(protocols.CodeInvalidField, "content-type", "%s", problem)
	}
	if strings.EqualFold(p.params.format, "flowed") {
		t = unflow(t, strings.EqualFold(p.params.delsp, "yes"))
	}
	return t
}

// body finds and validates the JSON object of an Envelopay message.
func (r *Result) body(text []byte, lim Limits) {
	obj, fields, ferr := findJSONWithin(text, lim)
	if ferr != nil {
		var p protocols.Problem
		errors.As(ferr, &p)
		if r.Type == "methods" && p.Code == protocols.CodeInvalidJSON {
			// "A METHODS reply with no parseable JSON body is valid."
			r.NaturalLanguage = true
			r.Warnings = append(r.Warnings, p)
			return
		}
		r.Errors = append(r.Errors, p)
		return
	}
	if obj == nil {
		r.NaturalLanguage = r.Type == "methods"
		errs, warns := envelopay.ValidateFields(r.Type, nil)
		r.Errors = append(r.Errors, errs...)
		r.Warnings = append(r.Warnings, warns...)
		return
	}
	r.Body = json.RawMessage(obj)
	r.Fields = fields
	if id, ok := envelopay.String(fields["id"]); ok {
		r.ID = id
	}
	errs, warns := envelopay.ValidateFields(r.Type, fields)
	r.Errors = append(r.Errors, errs...)
	r.Warnings = append(r.Warnings, warns...)
}

// oops is the courtesy OOPS envelopd would send back for this message
// ("OOPS"; OOPSOwed, OOPSBody): the very body serve sends when the sender
// is verified, or nil when none is owed (a valid message, an error that
// gets no OOPS such as invalid_json, mail that is not Envelopay, an OOPS,
// a From header in doubt).
func (r *Result) oops(_ envelopay.Subject) json.RawMessage {
	p, ok := OOPSOwed(r.Type, r.Errors)
	if !ok {
		return nil
	}
	return OOPSBody(p, r.ID)
}

// strictSubject reports whether subject is an Envelopay subject as
// written, without the lenient reading.
func strictSubject(subject string) bool {
	_, err := envelopay.ParseSubject(subject, false)
	return err == nil
}
