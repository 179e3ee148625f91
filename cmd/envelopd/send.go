package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/envelopd/envelopd/mailout"
	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/store"
)

// sendFlags are what send and reply add to the message flags: the store,
// the smarthost and the output format.
type sendFlags struct {
	db, smtpURL, passwordFile, format string
	oauth                             oauthFlags // --smtp-token-command, --smtp-oauth2-*
}

func (f *sendFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.db, "db", defaultDB, "SQLite database file (queue and threads), or a postgres:// URL")
	fs.StringVar(&f.smtpURL, "smtp-url", "", "smarthost: smtps://USER@HOST:465 or smtp://USER@HOST:587; empty only queues (serve/poll deliver)")
	fs.StringVar(&f.passwordFile, "password-file", "", "smarthost AUTH password file (or $"+mailout.PasswordEnv+")")
	f.oauth.register(fs, "smtp-", "smarthost")
	fs.StringVar(&f.format, "format", "text", "output: text or json")
}

// sendResult is what send and reply print (--format json).
type sendResult struct {
	QueueID     int64                  `json:"queue_id"`
	MessageID   string                 `json:"message_id"`
	Type        string                 `json:"type"`
	EnvelopayID string                 `json:"envelopay_id"`
	Status      string                 `json:"status"` // sent, pending, failed
	Recipients  []store.QueueRecipient `json:"recipients"`
}

// runSend: envelopd send composes, signs, queues (storing the message in
// its thread) and, with --smtp-url, delivers, then prints the queue id and
// the final status. Exit status 1 when delivery failed permanently.
func runSend(ctx context.Context, e *env) int {
	c, f, s := newSendCmd(e, "send", false)
	d, ok := f.fromArgs(e, "send", c.fs)
	if !ok {
		return 2
	}
	return sendDraft(ctx, e, "send", d, f, s, nil)
}

// newSendCmd starts send or reply (reply: the flags only reply has): its
// flag set holds the draft's flags (f) and the sending's (s, with --db).
func newSendCmd(e *env, name string, reply bool) (c *storeCmd, f *draftFlags, s *sendFlags) {
	c = &storeCmd{e: e, name: name, args: e.args, fs: newFlags(e, name)}
	f, s = &draftFlags{}, &sendFlags{}
	f.register(c.fs, reply)
	s.register(c.fs)
	c.db = &s.db
	return c, f, s
}

// sendDraft queues d and delivers it. st, when not nil, is an open store.
func sendDraft(ctx context.Context, e *env, cmd string, d mailout.Draft, f *draftFlags, s *sendFlags, st store.DB) int {
	if s.format != "text" && s.format != "json" {
		fmt.Fprintf(e.stderr, "envelopd %s: --format must be text or json\n", cmd)
		return 2
	}
	signers, err := f.dkim.signers()
	if err != nil {
		return failed(e, cmd, err)
	}
	var sub *mailout.Submitter
	if s.smtpURL != "" {
		var err error
		if sub, err = newSubmitter(s.smtpURL, s.passwordFile, &s.oauth); err != nil {
			return failed(e, cmd, err)
		}
	}
	mailer := &mailout.Mailer{Signers: signers}
	out, err := mailer.Prepare(d, "send")
	if err != nil {
		return reportCompose(e, cmd, err)
	}
	if st == nil {
		var ok bool
		if st, ok = openStore(ctx, e, s.db); !ok {
			return 2
		}
		defer st.Close()
	}
	// The copy is checked in the transaction that queues it
	// (store.EnqueueChecked): refused with nothing queued, or queued.
	q, err := st.EnqueueChecked(ctx, out, f.force)
	if refused, ok := errors.AsType[*store.RefusedError](err); ok {
		reportOutbound(e, cmd, false, refused.Outcome.Errors, false)
		return 1
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "envelopd %s: queue: %v\n", cmd, err)
		return 2
	}
	reportOutbound(e, cmd, false, q.Copy.Errors, f.force)
	id := q.ID
	if sub != nil {
		w := &mailout.Worker{Store: st, Sender: sub, Logger: newLogger(e.stderr, false)}
		if _, err := w.RunOnce(ctx); err != nil {
			fmt.Fprintf(e.stderr, "envelopd %s: deliver: %v\n", cmd, err)
		}
	}
	res := sendResult{QueueID: id, MessageID: out.MessageID, Status: store.QueuePending}
	if out.Copy != nil {
		res.Type, res.EnvelopayID = out.Copy.Type, out.Copy.EnvelopayID
	}
	entries, err := st.Queue(ctx, "")
	if err != nil {
		fmt.Fprintf(e.stderr, "envelopd %s: queue: %v\n", cmd, err)
		return 2
	}
	for _, q := range entries {
		if q.ID == id {
			res.Recipients = q.Recipients
		}
	}
	res.Status = overallStatus(res.Recipients)
	if s.format == "json" {
		b, _ := json.Marshal(res)
		fmt.Fprintf(e.stdout, "%s\n", b)
	} else {
		fmt.Fprintf(e.stdout, "queue %d  %s  %s\n", res.QueueID, res.Status, res.MessageID)
		for _, r := range res.Recipients {
			line := fmt.Sprintf("  %-30s %-8s attempts=%d", r.Rcpt, r.State, r.Attempts)
			if r.State == store.QueuePending {
				line += " next=" + r.NextAttempt.Local().Format(time.RFC3339)
			}
			if r.LastError != "" {
				line += "  " + r.LastError
			}
			fmt.Fprintln(e.stdout, line)
		}
	}
	if sub == nil {
		fmt.Fprintf(e.stderr, "envelopd %s: queued only (no --smtp-url); `envelopd serve`/`poll` with --smtp-url deliver it\n", cmd)
	}
	if res.Status == store.QueueFailed {
		return 1
	}
	return 0
}

// checkOutbound validates an outbound message's stored copy against the
// rules inbound mail meets, with the thread's stored state (store.Check:
// ACCEPT↔OFFER amounts, typed refs that exist, duplicate ids). It prints
// each problem and reports whether to go on: not when there are problems,
// unless force, which says it sends (or, when prints, prints) anyway.
func checkOutbound(ctx context.Context, e *env, cmd string, prints bool, st store.DB, in *store.Incoming, force bool) bool {
	oc, err := st.Check(ctx, in)
	if err != nil {
		fmt.Fprintf(e.stderr, "envelopd %s: check: %v\n", cmd, err)
		return false
	}
	return reportOutbound(e, cmd, prints, oc.Errors, force)
}

// reportOutbound prints an outbound message's problems (errs) and reports
// whether to go on, as checkOutbound says.
func reportOutbound(e *env, cmd string, prints bool, errs protocols.Problems, force bool) bool {
	if len(errs) == 0 {
		return true
	}
	for _, p := range errs {
		fmt.Fprintf(e.stderr, "envelopd %s: %v\n", cmd, p)
	}
	// compose and reply --print (prints) only print the message; send and
	// reply queue it.
	done, verb := "queued", "send"
	if prints {
		done, verb = "printed", "print"
	}
	if force {
		fmt.Fprintf(e.stderr, "envelopd %s: --force: %sing anyway despite %d problem(s)\n", cmd, verb, len(errs))
		return true
	}
	fmt.Fprintf(e.stderr, "envelopd %s: not %s; fix the message, or give --force to %s it anyway\n", cmd, done, verb)
	return false
}

// overallStatus is pending while any recipient is pending, sent when all
// were sent, failed otherwise.
func overallStatus(rs []store.QueueRecipient) string {
	if len(rs) == 0 {
		return store.QueuePending
	}
	all := true
	for _, r := range rs {
		if r.State == store.QueuePending {
			return store.QueuePending
		}
		all = all && r.State == store.QueueSent
	}
	if all {
		return store.QueueSent
	}
	return store.QueueFailed
}
