package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/envelopd/envelopd/internal/oauth"
	"github.com/envelopd/envelopd/mailin"
)

// onceDrainTimeout bounds the hand-off and queue pass of `poll --once`
// after polling; a delivery started before it runs to its own timeout.
const onceDrainTimeout = 30 * time.Second

// pollSummary is what `envelopd poll --once` prints on stdout.
type pollSummary struct {
	Mailboxes  int    `json:"mailboxes"`
	Seen       int    `json:"seen"`
	Stored     int    `json:"stored"`
	Redelivery int    `json:"redelivery"`
	Failed     int    `json:"failed"`
	Error      string `json:"error,omitempty"`
}

// runPoll is `envelopd poll`: read IMAP mailboxes into the same pipeline as
// serve. Exit status: 0 success; 2 bad flags, or (with --once) any
// mailbox failed; without --once, 2 when a poller stopped on a permanent
// error (login rejected, mailbox missing, no TLS).
func runPoll(ctx context.Context, e *env) int {
	fs := newFlags(e, "poll")
	var f ingestFlags
	f.register(fs)
	var urls multiFlag
	var pwFile, moveTo, config, address string
	var once, insecure, noIdle bool
	var interval time.Duration
	fs.Var(&urls, "imap", "mailbox to poll: imaps://USER@HOST[:PORT]/MAILBOX or imap://… with STARTTLS (repeatable)")
	fs.StringVar(&pwFile, "imap-password-file", "", "file whose first line is the IMAP password (default: $"+mailin.IMAPPasswordEnv+")")
	fs.StringVar(&config, "config", "", "file listing mailboxes, one per line: URL [password-file=F | oauth2=F] [move-to=FOLDER] [address=A] [mailbox=M]")
	fs.StringVar(&moveTo, "move-to", "", "move processed mail to this folder (created if missing) instead of flagging it \\Seen")
	fs.StringVar(&address, "address", "", "the mailbox's own address (courtesy OOPS sender when at a signing domain); default: the user name if it contains @")
	fs.BoolVar(&once, "once", false, "process what is there and exit (status 2 if anything failed)")
	fs.DurationVar(&interval, "interval", mailin.DefaultPollInterval, "poll interval when the server has no IDLE (or with --no-idle)")
	fs.BoolVar(&noIdle, "no-idle", false, "poll every --interval even if the server offers IDLE")
	fs.BoolVar(&insecure, "insecure", false, "allow plain-text IMAP (password in clear) to a non-loopback server")
	var imapOAuth oauthFlags // --token-command, --oauth2-*: OAuth2 instead of a password
	imapOAuth.register(fs, "", "IMAP")
	if err := fs.Parse(e.args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(e.stderr, "envelopd poll: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	accounts, err := pollAccounts(urls, config, pwFile, moveTo, address, &imapOAuth)
	if err != nil {
		return failed(e, "poll", err)
	}
	rt, err := f.build(ctx, e)
	if err != nil {
		return failed(e, "poll", err)
	}
	defer rt.close()
	if err := checkOOPS(rt.pipeline, rt.log); err != nil {
		return failed(e, "poll", err)
	}
	var progress *mailin.Progress
	if isTerminal(e.stderr) {
		progress = &mailin.Progress{W: e.stderr}
	}
	pollers := make([]*mailin.Poller, len(accounts))
	for i, a := range accounts {
		pollers[i] = &mailin.Poller{
			Account:      a.Account,
			Ingest:       rt.pipeline,
			State:        rt.store,
			MoveTo:       a.MoveTo,
			Address:      a.Address,
			StoreMailbox: a.StoreMailbox,
			Interval:     interval,
			NoIdle:       noIdle,
			Insecure:     insecure,
			Tokens:       a.Tokens,
			Mechanism:    a.Mechanism,
			Logger:       rt.log,
			Progress:     progress,
		}
	}
	// Hand-off and queue workers run while polling. Stopping them lets a
	// started exec or webhook finish (mailin.Handoff.RunOnce); what is not
	// delivered when poll exits stays in the store's delivery log and is
	// delivered by the next serve or poll.
	wctx, stopWorkers := context.WithCancel(context.Background())
	wait := rt.start(wctx)
	stop := sync.OnceFunc(func() { stopWorkers(); wait() })
	defer stop()
	rt.log.Info("envelopd polling", "mailboxes", len(pollers), "once", once, "db", dbName(f.db))
	st, err := mailin.PollAll(ctx, pollers, once)
	if once {
		// The workers may not have looked at what this run stored yet:
		// stop them, then hand off and send the queue once, bounded.
		stop()
		if ctx.Err() == nil {
			drainOnce(ctx, rt, &f, onceDrainTimeout)
		}
		sum := pollSummary{Mailboxes: len(pollers), Seen: st.Seen, Stored: st.Stored, Redelivery: st.Redelivery, Failed: st.Failed}
		if err != nil {
			sum.Error = err.Error()
		}
		b, _ := json.Marshal(sum)
		fmt.Fprintf(e.stdout, "%s\n", b)
	}
	if err != nil {
		rt.log.Error("poll failed", "err", err)
		return 2
	}
	return 0
}

// drainOnce delivers, once, what is due now: the exec and webhook
// hand-offs, the owed courtesy OOPS and the outbound queue (the OOPS
// mails), with the same settings as
// the workers build and outboundFlags.setup start. It stops starting new
// deliveries after timeout; failures stay pending for the next run (at
// least once).
func drainOnce(ctx context.Context, rt *runtime, f *ingestFlags, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	hs := f.handoffs(rt.store, rt.log)
	start := time.Now()
	for _, h := range hs {
		// RunDue takes a batch of what was due at the start; failures
		// are rescheduled past it, so this ends when nothing more was
		// due, each delivery tried at most once.
		for ctx.Err() == nil {
			n, err := h.RunDue(ctx, start)
			if err != nil {
				if ctx.Err() == nil {
					rt.log.Error("hand-off", "target", h.Target, "err", err)
				}
				break
			}
			if n == 0 {
				break
			}
		}
	}
	if ctx.Err() != nil {
		return
	}
	if rt.oops != nil {
		// The courtesy OOPS this run's mail is owed, queued before the
		// queue is sent.
		if _, err := rt.oops.RunOnce(ctx); err != nil && ctx.Err() == nil {
			rt.log.Error("courtesy OOPS", "err", err)
		}
	}
	w, err := f.out.worker(rt.store, rt.log)
	if err != nil {
		rt.log.Error("outbound queue", "err", err)
	}
	if w == nil {
		return
	}
	if _, err := w.RunOnce(ctx); err != nil && ctx.Err() == nil {
		rt.log.Error("outbound queue", "err", err)
	}
}

// pollAccounts collects the mailboxes from --imap and --config, with their
// passwords or OAuth2 token sources. Flags apply to --imap accounts and are
// defaults for config lines (a line's password-file= or oauth2= wins).
func pollAccounts(urls []string, config, pwFile, moveTo, address string, of *oauthFlags) ([]mailin.PollAccountConfig, error) {
	flagOAuth, err := of.settings()
	if err != nil {
		return nil, err
	}
	var out []mailin.PollAccountConfig
	for _, u := range urls {
		a, err := mailin.ParseIMAPURL(u)
		if err != nil {
			return nil, err
		}
		out = append(out, mailin.PollAccountConfig{Account: a, PasswordFile: pwFile, MoveTo: moveTo, Address: address})
	}
	if config != "" {
		fh, err := os.Open(config)
		if err != nil {
			return nil, err
		}
		cs, err := mailin.ParsePollConfig(fh)
		fh.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", config, err)
		}
		for _, c := range cs {
			if c.PasswordFile == "" {
				c.PasswordFile = pwFile
			}
			if c.MoveTo == "" {
				c.MoveTo = moveTo
			}
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no mailbox: give --imap URL or --config FILE")
	}
	seen := map[string]bool{}
	for i := range out {
		k := out[i].Account.Key()
		if seen[k] {
			return nil, fmt.Errorf("%s given twice", k)
		}
		seen[k] = true
		if set, err := pollOAuth(&out[i], pwFile, flagOAuth); err != nil {
			return nil, fmt.Errorf("%s: %w", out[i].Account, err)
		} else if set {
			continue
		}
		pw, err := mailin.LoadIMAPPassword(out[i].PasswordFile, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", out[i].Account, err)
		}
		out[i].Account.Password = pw
	}
	return out, nil
}

// pollOAuth sets a's token source when it logs in with OAuth2: its
// oauth2= file, else the --token-command / --oauth2-* flags unless the
// config line names its own password file. It reports whether it did.
func pollOAuth(a *mailin.PollAccountConfig, flagPwFile string, flags oauth.Settings) (bool, error) {
	s := flags
	if a.OAuth2Config != "" {
		c, err := oauth.LoadConfig(a.OAuth2Config)
		if err != nil {
			return false, err
		}
		s = c
	} else if s.Empty() || (a.PasswordFile != "" && a.PasswordFile != flagPwFile) {
		return false, nil
	} else if flagPwFile != "" {
		return false, errors.New("--imap-password-file and an OAuth2 token (--token-command, --oauth2-*) both given; the account logs in with one")
	}
	ts, err := s.Source()
	if err != nil {
		return false, err
	}
	a.Tokens, a.Mechanism = ts, s.Mechanism
	return true, nil
}

// isTerminal reports whether w is a character device (progress lines only
// make sense there).
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
