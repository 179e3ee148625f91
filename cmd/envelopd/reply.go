package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/envelopd/envelopd/mailout"
	"github.com/envelopd/envelopd/message"
	"github.com/envelopd/envelopd/parse"
	"github.com/envelopd/envelopd/store"
)

// runReply: envelopd reply STORED_ID --type T --json FILE answers a stored
// message: threaded (In-Reply-To, References), addressed to its sender, the
// typed ref filled. STORED_ID is the store row id, a Message-ID or an
// Envelopay id. It is then queued and delivered as by send; with --print
// it is only printed.
func runReply(ctx context.Context, e *env) int {
	c, f, s := newSendCmd(e, "reply", true)
	printOnly := c.fs.Bool("print", false, "print the reply instead of queueing it")
	pos, ok := c.parse()
	if !ok {
		return 2
	}
	if len(pos) != 1 {
		fmt.Fprintln(e.stderr, "usage: envelopd reply STORED_ID --type T [--json FILE] [flags]")
		return 2
	}
	return c.withStore(ctx, func(st store.DB) int { return reply(ctx, e, st, pos[0], f, s, *printOnly) })
}

// reply is runReply over the open store: ref names the message answered.
func reply(ctx context.Context, e *env, st store.DB, ref string, f *draftFlags, s *sendFlags, printOnly bool) int {
	m, err := findStored(ctx, st, ref)
	if err != nil {
		fmt.Fprintf(e.stderr, "envelopd reply: %s: %v\n", ref, err)
		return 2
	}
	orig, err := mailout.ResultOf(m)
	if err != nil {
		return failed(e, "reply", err)
	}
	// The body first, so that ReplyDraft fills the typed ref into it.
	var body []byte
	if f.jsonFile != "" {
		if body, err = readInput(e, f.jsonFile); err != nil {
			fmt.Fprintf(e.stderr, "envelopd reply: --json: %v\n", err)
			return 2
		}
	}
	base, err := mailout.ReplyDraft(orig, f.typ, body)
	if err != nil {
		return reportCompose(e, "reply", err)
	}
	f.jsonFile = "" // the body is in base now
	d, err := f.draft(e, base)
	if err != nil {
		return failed(e, "reply", err)
	}
	if d.From == nil {
		fmt.Fprintln(e.stderr, "envelopd reply: the original has no recipient to send from; give --from")
		return 2
	}
	if printOnly {
		raw, status := composeSigned(e, "reply", f, d)
		if raw == nil {
			return status
		}
		if !checkOutbound(ctx, e, "reply", true, st, message.Sent(ctx, raw, time.Now()), f.force) {
			return 1
		}
		e.stdout.Write(raw)
		return 0
	}
	return sendDraft(ctx, e, "reply", d, f, s, st)
}

// findStored finds a stored message by row id, Message-ID or Envelopay id
// (the newest match): every command that takes a message accepts these
// three forms. A number is a row id when such a row exists, else it is
// looked up as the other two.
func findStored(ctx context.Context, st store.Reader, ref string) (*store.Message, error) {
	ref = strings.TrimSpace(ref)
	if id, err := strconv.ParseInt(ref, 10, 64); err == nil {
		m, err := st.Message(ctx, id)
		if err == nil || !errors.Is(err, store.ErrNotFound) {
			return m, err
		}
	}
	msgs, err := st.Thread(ctx, ref)
	if err != nil {
		return nil, err
	}
	norm := parse.NormalizeMessageID(ref)
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].MessageID == norm || msgs[i].EnvelopayID == ref {
			return st.Message(ctx, msgs[i].ID)
		}
	}
	return nil, fmt.Errorf("no stored message with that id: %w", store.ErrNotFound)
}
