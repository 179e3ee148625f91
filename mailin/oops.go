package mailin

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/envelopd/envelopd/parse"
	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/store"
)

// oopsFunc returns the store callback that decides, inside the ingest
// transaction and with the final outcome, whether a courtesy OOPS is owed,
// and composes it. The OOPS is queued atomically with the message: a crash
// cannot store the one without the other.
func (p *Pipeline) oopsFunc(r *parse.Result, meta Meta, now time.Time) func(store.Outcome) *store.Outgoing {
	return func(out store.Outcome) *store.Outgoing {
		if out.Redelivery {
			return nil
		}
		var prob *protocols.Problem
		for i := range out.Errors {
			if slices.Contains(OOPSCodes, out.Errors[i].Code) {
				prob = &out.Errors[i]
				break
			}
		}
		if prob == nil {
			return nil
		}
		to := ""
		if len(r.From) > 0 {
			to = strings.ToLower(r.From[0])
		} else {
			to = strings.ToLower(meta.MailFrom)
		}
		from := ""
		if len(meta.Rcpts) > 0 {
			from = strings.ToLower(meta.Rcpts[0])
		} else if len(r.To) > 0 {
			from = strings.ToLower(r.To[0])
		}
		if to == "" || from == "" {
			return nil
		}
		raw, err := p.OOPS(r, prob.Code, prob.Message, from)
		if err != nil {
			p.log().Warn("courtesy OOPS not composed", "err", err, "message_id", r.MessageID)
			return nil
		}
		a := Analyze(context.Background(), raw, AnalyzeOptions{Now: now})
		cp := Incoming(a, raw, store.DirOut)
		cp.Mailbox = meta.Mailbox
		cp.ReceivedAt = now.UTC()
		return &store.Outgoing{
			From:       from,
			Recipients: []string{to},
			Raw:        raw,
			MessageID:  a.Result.MessageID,
			Kind:       "oops",
			Copy:       cp,
			Expires:    now.Add(24 * time.Hour),
		}
	}
}

// isAutomated reports whether a message must never get an automatic reply
// (RFC 3834 §2 and §3.1.1; RFC 2369 List-* headers; RFC 6522
// multipart/report; an OOPS itself, so two envelopd instances cannot loop).
func isAutomated(raw []byte, meta Meta, r *parse.Result) bool {
	if r.Type == "oops" {
		return true
	}
	if meta.Source == "smtp" && meta.MailFrom == "" {
		return true
	}
	automated := false
	eachHeader(raw, func(name, value string) bool {
		v := strings.ToLower(strings.TrimSpace(value))
		switch {
		case strings.EqualFold(name, "Auto-Submitted"):
			if i := strings.IndexByte(v, ';'); i >= 0 {
				v = strings.TrimSpace(v[:i])
			}
			automated = v != "no"
		case len(name) > 5 && strings.EqualFold(name[:5], "List-"):
			automated = true
		case strings.EqualFold(name, "Precedence"):
			automated = v == "bulk" || v == "list" || v == "junk"
		case strings.EqualFold(name, "Content-Type"):
			automated = strings.HasPrefix(v, "multipart/report")
		case strings.EqualFold(name, "Return-Path"):
			automated = v == "<>"
		}
		return !automated
	})
	return automated
}

// eachHeader calls fn for each top-level header field of raw (unfolded),
// until fn returns false or the header section ends.
func eachHeader(raw []byte, fn func(name, value string) bool) {
	var name string
	var value []byte
	flush := func() bool {
		if name == "" {
			return true
		}
		ok := fn(name, string(value))
		name, value = "", value[:0]
		return ok
	}
	for len(raw) > 0 {
		line := raw
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			line, raw = raw[:i], raw[i+1:]
		} else {
			raw = nil
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) == 0 {
			break
		}
		if line[0] == ' ' || line[0] == '\t' {
			value = append(value, ' ')
			value = append(value, bytes.TrimSpace(line)...)
			continue
		}
		if !flush() {
			return
		}
		if i := bytes.IndexByte(line, ':'); i > 0 {
			name = string(bytes.TrimSpace(line[:i]))
			value = append(value[:0], bytes.TrimSpace(line[i+1:])...)
		}
	}
	flush()
}
