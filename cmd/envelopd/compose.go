package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/emersion/go-message/mail"

	"github.com/envelopd/envelopd/mailout"
	"github.com/envelopd/envelopd/message"
	"github.com/envelopd/envelopd/protocols/tunnel"
)

// draftFlags are the message flags compose, send and reply share.
type draftFlags struct {
	from, typ, note, jsonFile, text, html, inReplyTo, messageID string
	to, cc, bcc, refs, attach                                   multiFlag
	noJSON, force                                               bool
	dkim                                                        outboundFlags
}

func (f *draftFlags) register(fs *flag.FlagSet, reply bool) {
	fs.StringVar(&f.from, "from", "", "sender address (reply: default the original's first recipient)")
	fs.StringVar(&f.typ, "type", "", "Envelopay type (WHICH, METHODS, PAY, ORDER, FULFILL, INVOICE, OFFER, ACCEPT, OOPS)")
	fs.StringVar(&f.note, "note", "", "subject note (TYPE | note); copied into the body when it has none")
	fs.StringVar(&f.jsonFile, "json", "", "Envelopay JSON body file, - for stdin (v, type and id are filled when absent)")
	fs.BoolVar(&f.noJSON, "no-json", false, "send no JSON (bare WHICH, natural-language METHODS)")
	fs.StringVar(&f.text, "text", "", "human-readable text before the JSON")
	fs.StringVar(&f.html, "html", "", "HTML alternative part")
	fs.Var(&f.attach, "attach", "attach a file (repeatable; JSON files get their protocol's media type)")
	fs.StringVar(&f.messageID, "message-id", "", "Message-ID to use (default: random on the sender's domain)")
	if !reply {
		fs.Var(&f.to, "to", "recipient (repeatable, or comma-separated)")
		fs.Var(&f.cc, "cc", "Cc recipient (repeatable)")
		fs.Var(&f.bcc, "bcc", "Bcc recipient, envelope only (repeatable)")
		fs.StringVar(&f.inReplyTo, "in-reply-to", "", "Message-ID this message answers")
		fs.Var(&f.refs, "references", "Message-ID for References (repeatable)")
	}
	fs.BoolVar(&f.force, "force", false, "send even when the message breaks a rule of the thread's stored state (ACCEPT amount, unknown typed ref, duplicate id); the problems are still printed")
	fs.Var(&f.dkim.dkimKeys, "dkim-key", "DKIM private key PEM (repeatable, paired with --dkim-selector)")
	fs.Var(&f.dkim.dkimSels, "dkim-selector", "DKIM selector for the --dkim-key at the same position")
	fs.StringVar(&f.dkim.dkimDomain, "dkim-domain", "", "DKIM signing domain (d=)")
	fs.StringVar(&f.dkim.dkimConfig, "dkim-config", "", dkimConfigUsage)
}

// draft builds the Draft the flags describe; base carries what a reply
// already filled in.
func (f *draftFlags) draft(e *env, base mailout.Draft) (mailout.Draft, error) {
	d := base
	var err error
	if f.from != "" {
		if d.From, err = mail.ParseAddress(f.from); err != nil {
			return d, fmt.Errorf("--from: %w", err)
		}
	}
	for _, l := range []struct {
		name string
		in   multiFlag
		out  *[]*mail.Address
	}{{"--to", f.to, &d.To}, {"--cc", f.cc, &d.Cc}, {"--bcc", f.bcc, &d.Bcc}} {
		for _, v := range l.in {
			as, err := mail.ParseAddressList(v)
			if err != nil {
				return d, fmt.Errorf("%s %q: %w", l.name, v, err)
			}
			*l.out = append(*l.out, as...)
		}
	}
	if f.typ != "" {
		d.Type = f.typ
	}
	d.Note, d.Text, d.HTML, d.NoJSON, d.MessageID = f.note, f.text, f.html, f.noJSON, f.messageID
	if f.inReplyTo != "" {
		d.InReplyTo = f.inReplyTo
	}
	d.References = append(d.References, f.refs...)
	if f.jsonFile != "" {
		b, err := readInput(e, f.jsonFile)
		if err != nil {
			return d, fmt.Errorf("--json: %w", err)
		}
		d.Body = b
	}
	for _, p := range f.attach {
		data, err := os.ReadFile(p)
		if err != nil {
			return d, fmt.Errorf("--attach: %w", err)
		}
		d.Attachments = append(d.Attachments, mailout.Attachment{Filename: filepath.Base(p), ContentType: mediaType(p, data), Data: data})
	}
	return d, nil
}

// mediaType labels an attachment: JSON by the tunnelled protocol it holds
// (tunnel.MediaType), anything else by extension, then by content.
func mediaType(path string, data []byte) string {
	ext := strings.ToLower(filepath.Ext(path))
	if ext == ".json" || (ext == "" && json.Valid(data) && bytes.HasPrefix(bytes.TrimSpace(data), []byte("{"))) {
		return tunnel.MediaType(data)
	}
	if t := mime.TypeByExtension(ext); t != "" {
		return t
	}
	return http.DetectContentType(data)
}

// reportCompose prints why a draft was refused and returns the exit status:
// 1 for an invalid message, 2 for anything else.
func reportCompose(e *env, cmd string, err error) int {
	var ce *mailout.ComposeError
	if errors.As(err, &ce) {
		for _, p := range ce.Problems {
			fmt.Fprintf(e.stderr, "envelopd %s: %v\n", cmd, p)
		}
		return 1
	}
	return failed(e, cmd, err)
}

// parseArgs parses flags that may come before or after positional
// arguments and returns the positional ones.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// composeSigned composes d and signs it with the DKIM keys f names. When
// that fails, the reason is on stderr, raw is nil and status is the exit
// status.
func composeSigned(e *env, cmd string, f *draftFlags, d mailout.Draft) (raw []byte, status int) {
	signers, err := f.dkim.signers()
	if err != nil {
		return nil, failed(e, cmd, err)
	}
	if raw, err = mailout.Compose(d); err != nil {
		return nil, reportCompose(e, cmd, err)
	}
	if raw, err = mailout.Sign(raw, signers); err != nil {
		return nil, failed(e, cmd, fmt.Errorf("dkim: %w", err))
	}
	return raw, 0
}

// fromArgs parses the command line of a command that takes no arguments
// but flags (fs, with f registered) and returns the draft they describe;
// ok is false when either fails (said on stderr: exit status 2).
func (f *draftFlags) fromArgs(e *env, cmd string, fs *flag.FlagSet) (d mailout.Draft, ok bool) {
	pos, err := parseArgs(fs, e.args)
	if err != nil || !noArgs(e, cmd, pos) {
		return d, false
	}
	if d, err = f.draft(e, mailout.Draft{}); err != nil {
		failed(e, cmd, err)
		return d, false
	}
	return d, true
}

// runCompose: envelopd compose --from A --to B --type T [...] prints the
// composed (and, with --dkim-key or --dkim-config, signed) message.
func runCompose(ctx context.Context, e *env) int {
	fs := newFlags(e, "compose")
	var f draftFlags
	f.register(fs, false)
	db := fs.String("db", "", "also check the message against this store's threads (ACCEPT amount, typed refs, duplicate ids); the file must exist")
	d, ok := f.fromArgs(e, "compose", fs)
	if !ok {
		return 2
	}
	raw, status := composeSigned(e, "compose", &f, d)
	if raw == nil {
		return status
	}
	if *db != "" {
		st, ok := openExistingStore(ctx, e, "compose", *db)
		if !ok {
			return 2
		}
		ok = checkOutbound(ctx, e, "compose", true, st, message.Sent(ctx, raw, time.Now()), f.force)
		st.Close()
		if !ok {
			return 1
		}
	}
	if _, err := e.stdout.Write(raw); err != nil {
		return 2
	}
	return 0
}
