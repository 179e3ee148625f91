package parse

import (
	"encoding/json"

	"github.com/envelopd/envelopd/protocols"
)

// Default limits (memory and time bounded by the input).
const (
	DefaultMaxParts       = 1000
	DefaultMaxAttachments = 100
	DefaultMaxJSONDepth   = 64
	DefaultMaxJSONBytes   = 1 << 20
	DefaultMaxOutputBytes = 4 << 20
)

// OutputSlack is the constant part of the output bound: the analysis of a
// message of n bytes is never larger than 4n + OutputSlack bytes, whatever
// Limits.MaxOutputBytes says.
const OutputSlack = 64 << 10

// Limits bound the work one message may cause and the size of what is
// printed and stored about it. A zero field takes its default. Past a limit
// the message is still parsed as far as the limit allows and gets an error
// with the limit's code, so a store quarantines it (raw bytes intact).
type Limits struct {
	// MaxParts is how many MIME entities (multipart containers and leaves)
	// are analysed; the rest are not read (too_many_parts).
	MaxParts int
	// MaxAttachments is how many attachments the Result lists, and so how
	// many are decoded, inspected and stored in the analysis
	// (too_many_attachments).
	MaxAttachments int
	// MaxJSONDepth bounds the nesting of arrays and objects in the JSON
	// body and in JSON attachments (json_too_deep).
	MaxJSONDepth int
	// MaxJSONBytes bounds the size of the JSON body and of each JSON
	// attachment that is parsed (json_too_large).
	MaxJSONBytes int
	// MaxOutputBytes bounds the Result's JSON (what `envelopd parse`
	// prints and the store keeps); it is never more than 4× the input +
	// OutputSlack. Past it, Bound leaves out list entries
	// (analysis_too_large).
	MaxOutputBytes int
}

// WithDefaults returns l with every zero (or negative) field set to its
// default.
func (l Limits) WithDefaults() Limits {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.MaxParts, DefaultMaxParts)
	def(&l.MaxAttachments, DefaultMaxAttachments)
	def(&l.MaxJSONDepth, DefaultMaxJSONDepth)
	def(&l.MaxJSONBytes, DefaultMaxJSONBytes)
	def(&l.MaxOutputBytes, DefaultMaxOutputBytes)
	return l
}

// OutputLimit is the largest Result JSON allowed for an input of n bytes:
// MaxOutputBytes, and never more than 4n + OutputSlack.
func (l Limits) OutputLimit(n int) int {
	l = l.WithDefaults()
	lim := 4*n + OutputSlack
	if l.MaxOutputBytes < lim {
		lim = l.MaxOutputBytes
	}
	return lim
}

// CheckJSON returns the json_too_large or json_too_deep problem for a JSON
// document (field names where it is, e.g. "body" or "attachments[2]"), or
// nil when it is within the limits. It reads data once, without
// allocating, skipping strings; it does not check the syntax.
func (l Limits) CheckJSON(data []byte, field string) *protocols.Problem {
	l = l.WithDefaults()
	if len(data) > l.MaxJSONBytes {
		p := protocols.New(protocols.CodeJSONTooLarge, field, "the JSON is %d bytes, more than the limit of %d; not parsed", len(data), l.MaxJSONBytes)
		return &p
	}
	if d := JSONDepth(data); d > l.MaxJSONDepth {
		p := protocols.New(protocols.CodeJSONTooDeep, field, "the JSON nests %d levels deep, more than the limit of %d; not parsed", d, l.MaxJSONDepth)
		return &p
	}
	return nil
}

// JSONDepth returns the deepest nesting of arrays and objects in data,
// skipping JSON strings (with escapes). Unbalanced input gives the depth
// reached.
func JSONDepth(data []byte) int {
	depth, most := 0, 0
	for j := 0; j < len(data); j++ {
		switch data[j] {
		case '"':
			for j++; j < len(data) && data[j] != '"'; j++ {
				if data[j] == '\\' {
					j++
				}
			}
		case '{', '[':
			depth++
			if depth > most {
				most = depth
			}
		case '}', ']':
			if depth > 0 {
				depth--
			}
		}
	}
	return most
}

// clipBytes bounds the scalar strings Bound keeps.
const clipBytes = 256

// Bound makes r's JSON at most lim bytes (Limits.OutputLimit of the input
// length; lim below OutputSlack is taken as OutputSlack), with its errors
// and warnings counted twice (a store keeps them in their own columns as
// well, and the whole stays within lim). When it is larger, r gets an analysis_too_large error and keeps, in this order and
// while they fit: its errors, the body, the address and reference lists,
// its warnings, its attachments; what does not fit is left out (the error
// says how much). Fields, the stateful checks' input, are left as they
// are. It reports whether r was cut.
func (r *Result) Bound(lim int) bool {
	_, cut := r.BoundJSON(lim)
	return cut
}

// BoundJSON is Bound that also returns r's JSON (MarshalJSON) when
// nothing was cut, so that a caller storing it need not marshal r again;
// nil when r was cut (its Valid is then out of date: the caller sets it
// and marshals the cut result).
func (r *Result) BoundJSON(lim int) ([]byte, bool) {
	if lim < OutputSlack {
		lim = OutputSlack
	}
	full, err := r.MarshalJSON()
	if err != nil {
		return nil, false
	}
	eb, _ := json.Marshal(r.Errors)
	wb, _ := json.Marshal(r.Warnings)
	if len(full)+len(eb)+len(wb) <= lim {
		return full, false
	}
	return nil, r.cut(lim, len(full))
}

// cut is Bound for a result found too large (fullSize: its JSON's length).
func (r *Result) cut(lim, fullSize int) bool {
	errs, warns, atts, body := r.Errors, r.Warnings, r.Attachments, r.Body
	lists := []*[]string{&r.From, &r.To, &r.Cc, &r.InReplyTo, &r.References}
	saved := make([][]string, len(lists))
	for i, l := range lists {
		saved[i] = *l
		*l = []string{}
	}
	r.Errors, r.Warnings, r.Attachments, r.Body = protocols.Problems{}, protocols.Problems{}, []Attachment{}, nil
	for _, s := range []*string{&r.Subject, &r.Note, &r.Date, &r.MessageID, &r.TypeHeader} {
		*s = clipString(*s, clipBytes)
	}
	r.OOPS = clipRaw(r.OOPS, 4*clipBytes)
	const reserve = 2 * 512 // the analysis_too_large problem itself, twice
	base, _ := r.MarshalJSON()
	size := len(base) + reserve
	// weight 2 for errors and warnings: a store keeps them in the result
	// and in their own columns, and both count.
	fitsW := func(v any, weight int) bool {
		b, err := json.Marshal(v)
		if err != nil || size+weight*(len(b)+1) > lim {
			return false
		}
		size += weight * (len(b) + 1)
		return true
	}
	fits := func(v any) bool { return fitsW(v, 1) }
	left := 0
	for _, p := range errs {
		if !fitsW(p, 2) {
			left += len(errs) - len(r.Errors)
			break
		}
		r.Errors = append(r.Errors, p)
	}
	if len(body) > 0 && size+len(body) <= lim {
		r.Body, size = body, size+len(body)
	} else if len(body) > 0 {
		left++
	}
	for i, l := range lists {
		for j, s := range saved[i] {
			if !fits(s) {
				left += len(saved[i]) - j
				break
			}
			*l = append(*l, s)
		}
	}
	for j, p := range warns {
		if !fitsW(p, 2) {
			left += len(warns) - j
			break
		}
		r.Warnings = append(r.Warnings, p)
	}
	for j, a := range atts {
		if !fits(a) {
			left += len(atts) - j
			// The rest are not printed; their data need not be kept.
			break
		}
		r.Attachments = append(r.Attachments, a)
	}
	r.Errors = append(r.Errors, protocols.New(protocols.CodeAnalysisTooLarge, "",
		"the analysis of this message is %d bytes, more than the limit of %d; %d entries (errors, body, addresses, warnings, attachments) left out", fullSize, lim, left))
	return true
}

func clipString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && s[i]&0xC0 == 0x80 { // do not cut a UTF-8 sequence
		i--
	}
	return s[:i] + "…"
}

// clipRaw drops a JSON value longer than n (an OOPS quoting a huge
// message) rather than cutting it into invalid JSON.
func clipRaw(b json.RawMessage, n int) json.RawMessage {
	if len(b) <= n {
		return b
	}
	return nil
}
