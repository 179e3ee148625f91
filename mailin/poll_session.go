package mailin

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/mail"
	"slices"
	"strings"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/emersion/go-sasl"

	"github.com/envelopd/envelopd/internal/oauth"
)

// How one session keeps "exactly once":
//
//  1. SELECT gives the mailbox's UIDVALIDITY (RFC 9051 §2.3.1.1). The store
//     holds (UIDVALIDITY, highest processed UID) per Account.Key. If the
//     UIDVALIDITY differs, UIDs were reassigned: the cursor restarts at 0
//     and every mail is fetched again; the store recognises each one it
//     already has (same Message-ID and content hash → Outcome.Redelivery)
//     and hands none of them to the agent again.
//  2. UID FETCH cursor+1:* (UID RFC822.SIZE) lists what is new; bodies are
//     then fetched in small batches with BODY.PEEK[] (PEEK: fetching does
//     not set \Seen, RFC 9051 §6.4.5), collected, and the FETCH closed
//     before any other command.
//  3. Each mail goes through Ingest, which returns only once it is durable.
//  4. Only then is it marked on the server (\Seen, or moved), and only after
//     the mark is the cursor advanced in the store.
//
// A crash between 3 and 4 leaves the mail unmarked and the cursor behind
// it: the next run fetches it again, Ingest reports a redelivery, and it is
// marked then. A crash between 4 and the cursor update does the same. So a
// restart loses nothing and hands nothing to the agent twice. A mail whose
// Ingest fails stops the pass: later mails are not marked ahead of it.

// Fetch batch limits: a batch is held in memory between FETCH and marking.
const (
	fetchBatchCount = 32
	fetchBatchBytes = 32 << 20
)

// bodyPeek is BODY.PEEK[]: the whole message, byte for byte.
var bodyPeek = &imap.FetchItemBodySection{Peek: true}

// pollConn is one logged-in connection with the mailbox selected.
type pollConn struct {
	c           *imapclient.Client
	uidValidity uint32
	newMail     chan struct{} // signalled on EXISTS
}

func (p *Poller) session(ctx context.Context, once bool, st *PollStats) (selected bool, err error) {
	pc, err := p.connect(ctx)
	if err != nil {
		return false, err
	}
	defer func() {
		// LOGOUT politely when the session ends normally; a broken
		// connection is just closed.
		if err == nil || ctx.Err() != nil {
			done := make(chan struct{})
			go func() { pc.c.Logout().Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
			}
		}
		pc.c.Close()
	}()
	for {
		n, err := p.pass(ctx, pc)
		st.add(n)
		if err != nil {
			return true, err
		}
		if once || ctx.Err() != nil {
			return true, nil
		}
		if err := p.wait(ctx, pc); err != nil {
			return true, err
		}
		if ctx.Err() != nil {
			return true, nil
		}
	}
}

// connect dials, secures, logs in and selects the mailbox.
func (p *Poller) connect(ctx context.Context) (*pollConn, error) {
	a := p.Account
	pc := &pollConn{newMail: make(chan struct{}, 1)}
	opts := &imapclient.Options{
		UnilateralDataHandler: &imapclient.UnilateralDataHandler{
			Mailbox: func(d *imapclient.UnilateralDataMailbox) {
				if d.NumMessages != nil {
					select {
					case pc.newMail <- struct{}{}:
					default:
					}
				}
			},
		},
	}
	tlsConf := p.TLSConfig.Clone()
	if tlsConf == nil {
		tlsConf = &tls.Config{}
	}
	if tlsConf.ServerName == "" {
		tlsConf.ServerName = a.Host
	}
	tlsConf.MinVersion = max(tlsConf.MinVersion, tls.VersionTLS12)
	opts.TLSConfig = tlsConf

	dial := p.dial
	if dial == nil {
		d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: time.Minute}
		dial = d.DialContext
	}
	raw, err := dial(ctx, "tcp", a.Addr())
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrIMAPConn, err)
	}
	var c *imapclient.Client
	if a.TLS {
		tc := tls.Client(raw, tlsConf)
		hctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err = tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			raw.Close()
			return nil, fmt.Errorf("%w: TLS: %v", ErrIMAPConn, err)
		}
		c = imapclient.New(tc, opts)
	} else {
		c = imapclient.New(raw, opts)
	}
	fail := func(sentinel error, format string, args ...any) (*pollConn, error) {
		c.Close()
		return nil, fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...)
	}
	if err := c.WaitGreeting(); err != nil {
		return fail(ErrIMAPConn, "greeting: %v", err)
	}
	if !a.TLS {
		if c.Caps().Has(imap.CapStartTLS) {
			// Start TLS on the same connection: imapclient.NewStartTLS
			// wants a fresh one, so close this and redial.
			c.Close()
			if raw, err = dial(ctx, "tcp", a.Addr()); err != nil {
				return nil, fmt.Errorf("%w: %v", ErrIMAPConn, err)
			}
			if c, err = imapclient.NewStartTLS(raw, opts); err != nil {
				raw.Close()
				return nil, fmt.Errorf("%w: STARTTLS: %v", ErrIMAPConn, err)
			}
		} else if !a.Loopback() && !p.Insecure {
			return fail(ErrIMAPNoTLS, "%s offers no STARTTLS (use imaps://, or --insecure to send the password in clear)", a.Addr())
		}
	}
	if c.State() == imap.ConnStateNotAuthenticated {
		if err := p.login(ctx, c); err != nil {
			c.Close()
			return nil, err
		}
	}
	pc.c = c
	sel, err := c.Select(a.Mailbox, nil).Wait()
	if err != nil {
		if isNo(err) {
			return fail(ErrIMAPMailbox, "SELECT %q: %v", a.Mailbox, err)
		}
		return fail(ErrIMAPConn, "SELECT %q: %v", a.Mailbox, err)
	}
	pc.uidValidity = sel.UIDValidity
	if p.MoveTo != "" {
		if err := ensureMailbox(c, p.MoveTo); err != nil {
			c.Close()
			return nil, err
		}
	}
	p.log().Info("imap: connected", "account", a, "uidvalidity", sel.UIDValidity, "messages", sel.NumMessages,
		"idle", c.Caps().Has(imap.CapIdle) && !p.NoIdle, "move", c.Caps().Has(imap.CapMove))
	return pc, nil
}

// login authenticates with LOGIN, or AUTHENTICATE PLAIN when the server
// disables LOGIN (RFC 9051 §6.2.3), or with an OAuth2 token (loginToken).
// The password is never logged.
func (p *Poller) login(ctx context.Context, c *imapclient.Client) error {
	if p.Tokens != nil {
		return p.loginToken(ctx, c)
	}
	a := p.Account
	var err error
	if c.Caps().Has(imap.CapLoginDisabled) {
		err = c.Authenticate(sasl.NewPlainClient("", a.Username, a.Password))
	} else {
		err = c.Login(a.Username, a.Password).Wait()
	}
	if err == nil {
		return nil
	}
	var ie *imap.Error
	if errors.As(err, &ie) {
		if ie.Code == imap.ResponseCodeUnavailable {
			return fmt.Errorf("%w: login: %v", ErrIMAPConn, err)
		}
		return fmt.Errorf("%w: %s: %v", ErrIMAPLogin, a.Username, err)
	}
	return fmt.Errorf("%w: login: %v", ErrIMAPConn, err)
}

// loginToken authenticates with AUTHENTICATE OAUTHBEARER (RFC 7628 §4.1)
// or XOAUTH2, with a token asked for now (a token command runs on every
// connect). A token that cannot be had for good (refresh token revoked,
// file missing) is ErrIMAPLogin, a passing failure ErrIMAPConn; the
// server's refusal is ErrIMAPLogin with its OAuth2 status. The token is
// never logged.
func (p *Poller) loginToken(ctx context.Context, c *imapclient.Client) error {
	a := p.Account
	mech, err := oauth.Choose(p.Mechanism, func(m string) bool { return c.Caps().Has(imap.AuthCap(m)) })
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrIMAPLogin, a.Addr(), err)
	}
	tok, err := p.Tokens.Token(ctx)
	if err != nil {
		if oauth.Permanent(err) {
			return fmt.Errorf("%w: %s: %w", ErrIMAPLogin, a.Username, err)
		}
		return fmt.Errorf("%w: %w", ErrIMAPConn, err)
	}
	sc, err := oauth.NewClient(mech, a.Username, tok, a.Host, a.Port)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrIMAPLogin, err)
	}
	err = c.Authenticate(sc)
	if err == nil {
		return nil
	}
	detail := ""
	if sc.ServerError != "" {
		detail = " (" + sc.ServerError + ")"
	}
	var ie *imap.Error
	if errors.As(err, &ie) {
		if ie.Code == imap.ResponseCodeUnavailable {
			return fmt.Errorf("%w: AUTHENTICATE %s: %v%s", ErrIMAPConn, mech, err, detail)
		}
		return fmt.Errorf("%w: %s: AUTHENTICATE %s: %v%s", ErrIMAPLogin, a.Username, mech, err, detail)
	}
	return fmt.Errorf("%w: AUTHENTICATE %s: %v", ErrIMAPConn, mech, err)
}

// ensureMailbox creates name unless it exists.
func ensureMailbox(c *imapclient.Client, name string) error {
	err := c.Create(name, nil).Wait()
	if err == nil || !isNo(err) {
		if err != nil {
			return fmt.Errorf("%w: CREATE %q: %v", ErrIMAPConn, name, err)
		}
		return nil
	}
	// NO: most likely [ALREADYEXISTS]; check that it can be used.
	if _, serr := c.Status(name, &imap.StatusOptions{NumMessages: true}).Wait(); serr != nil {
		return fmt.Errorf("%w: --move-to %q: %v", ErrIMAPMailbox, name, err)
	}
	return nil
}

func isNo(err error) bool {
	var ie *imap.Error
	return errors.As(err, &ie) && ie.Type == imap.StatusResponseTypeNo
}

// pendingMail is a UID above the stored cursor, with its size.
type pendingMail struct {
	uid  imap.UID
	size int64
}

// pass processes every mail above the cursor.
func (p *Poller) pass(ctx context.Context, pc *pollConn) (PollStats, error) {
	var st PollStats
	key := p.Account.Key()
	sctx := context.WithoutCancel(ctx) // store writes finish even on SIGTERM
	v, last, err := p.State.IMAPState(sctx, key)
	if err != nil {
		return st, fmt.Errorf("%w: read IMAP state: %v", ErrIMAPIngest, err)
	}
	if v != pc.uidValidity {
		if v != 0 {
			p.log().Warn("imap: UIDVALIDITY changed, rescanning the mailbox (the store skips mail it has)",
				"account", p.Account, "old", v, "new", pc.uidValidity)
		}
		last = 0
	}
	todo, err := listAbove(pc.c, imap.UID(last))
	if err != nil {
		return st, err
	}
	if len(todo) == 0 {
		return st, nil
	}
	total := len(todo)
	progress := p.Progress != nil && total >= ProgressThreshold
	if progress {
		p.Progress.Set(key, 0, total)
		defer p.Progress.Done(key)
	}
	done := 0
	for len(todo) > 0 {
		if ctx.Err() != nil {
			return st, nil
		}
		n, bytes := 0, int64(0)
		for n < len(todo) && n < fetchBatchCount && (n == 0 || bytes+todo[n].size <= fetchBatchBytes) {
			bytes += todo[n].size
			n++
		}
		batch := todo[:n]
		todo = todo[n:]
		msgs, err := fetchBodies(pc.c, batch)
		if err != nil {
			return st, err
		}
		var ok []imap.UID
		var ingestErr error
		for _, m := range msgs {
			// SIGTERM: finish the current mail (already stored ones get
			// marked below), start no new one.
			if ctx.Err() != nil {
				break
			}
			raw := m.FindBodySection(bodyPeek)
			if raw == nil {
				// Answered without a body: expunged meanwhile, or a
				// server bug. Leave it for the next pass.
				ingestErr = fmt.Errorf("%w: UID %d: no body in FETCH response", ErrIMAPConn, m.UID)
				break
			}
			st.Seen++
			out, err := p.Ingest.Ingest(sctx, raw, p.meta(raw))
			if err != nil {
				st.Failed++
				ingestErr = fmt.Errorf("%w: UID %d: %v", ErrIMAPIngest, m.UID, err)
				break
			}
			if out.Redelivery {
				st.Redelivery++
			} else {
				st.Stored++
			}
			p.log().Info("imap: mail", "account", p.Account, "uid", m.UID, "id", out.ID,
				"status", out.Status, "redelivery", out.Redelivery)
			ok = append(ok, m.UID)
			done++
			if progress {
				p.Progress.Set(key, done, total)
			}
		}
		if len(ok) > 0 {
			if err := p.mark(pc.c, ok); err != nil {
				return st, err
			}
			if err := p.State.SetIMAPState(sctx, key, pc.uidValidity, uint32(ok[len(ok)-1])); err != nil {
				return st, fmt.Errorf("%w: write IMAP state: %v", ErrIMAPIngest, err)
			}
		}
		// UIDs of the batch the server did not return were expunged by
		// another client meanwhile: they are gone, nothing to do.
		if ingestErr != nil {
			return st, ingestErr
		}
	}
	return st, nil
}

// listAbove returns the mails with UID > last, oldest first. "last+1:*"
// always matches the highest UID even when it is ≤ last (RFC 9051 §6.4.9),
// so the result is filtered.
func listAbove(c *imapclient.Client, last imap.UID) ([]pendingMail, error) {
	set := imap.UIDSet{imap.UIDRange{Start: last + 1, Stop: 0}}
	msgs, err := c.Fetch(set, &imap.FetchOptions{UID: true, RFC822Size: true}).Collect()
	if err != nil {
		return nil, fmt.Errorf("%w: UID FETCH %v: %v", ErrIMAPConn, set, err)
	}
	var out []pendingMail
	for _, m := range msgs {
		if m.UID > last {
			out = append(out, pendingMail{uid: m.UID, size: m.RFC822Size})
		}
	}
	slices.SortFunc(out, func(a, b pendingMail) int { return cmp.Compare(a.uid, b.uid) })
	return out, nil
}

// fetchBodies fetches UID, FLAGS, INTERNALDATE, RFC822.SIZE and BODY.PEEK[]
// (nothing the client must parse structurally) and closes the FETCH before
// returning; the result is sorted by UID.
func fetchBodies(c *imapclient.Client, batch []pendingMail) ([]*imapclient.FetchMessageBuffer, error) {
	var set imap.UIDSet
	for _, m := range batch {
		set.AddNum(m.uid)
	}
	opts := &imap.FetchOptions{
		UID: true, Flags: true, InternalDate: true, RFC822Size: true,
		BodySection: []*imap.FetchItemBodySection{bodyPeek},
	}
	msgs, err := c.Fetch(set, opts).Collect()
	if err != nil {
		return nil, fmt.Errorf("%w: UID FETCH %v: %v", ErrIMAPConn, set, err)
	}
	slices.SortFunc(msgs, func(a, b *imapclient.FetchMessageBuffer) int { return cmp.Compare(a.UID, b.UID) })
	return msgs, nil
}

// mark records on the server that uids are processed: \Seen, or a move to
// MoveTo. MOVE (RFC 6851) when offered; otherwise COPY, then — only if the
// copy succeeded — STORE \Deleted and UID EXPUNGE (RFC 4315, UIDPLUS) or
// plain EXPUNGE. (imapclient's own fallback pipelines the three commands,
// which would delete the mail even if the COPY failed.)
func (p *Poller) mark(c *imapclient.Client, uids []imap.UID) error {
	set := imap.UIDSetNum(uids...)
	if p.MoveTo == "" {
		err := c.Store(set, &imap.StoreFlags{Op: imap.StoreFlagsAdd, Silent: true, Flags: []imap.Flag{imap.FlagSeen}}, nil).Close()
		if err != nil {
			return fmt.Errorf("%w: UID STORE +FLAGS \\Seen: %v", ErrIMAPConn, err)
		}
		return nil
	}
	if c.Caps().Has(imap.CapMove) {
		if _, err := c.Move(set, p.MoveTo).Wait(); err != nil {
			return fmt.Errorf("%w: UID MOVE to %q: %v", ErrIMAPConn, p.MoveTo, err)
		}
		return nil
	}
	if _, err := c.Copy(set, p.MoveTo).Wait(); err != nil {
		return fmt.Errorf("%w: UID COPY to %q: %v", ErrIMAPConn, p.MoveTo, err)
	}
	err := c.Store(set, &imap.StoreFlags{Op: imap.StoreFlagsAdd, Silent: true, Flags: []imap.Flag{imap.FlagDeleted}}, nil).Close()
	if err != nil {
		return fmt.Errorf("%w: UID STORE +FLAGS \\Deleted: %v", ErrIMAPConn, err)
	}
	if c.Caps().Has(imap.CapUIDPlus) {
		_, err = c.UIDExpunge(set).Collect()
	} else {
		_, err = c.Expunge().Collect()
	}
	if err != nil {
		return fmt.Errorf("%w: EXPUNGE: %v", ErrIMAPConn, err)
	}
	return nil
}

// wait blocks until new mail may be there: IDLE until an EXISTS arrives (or
// IdleRestart passes), or Interval without IDLE. It returns nil at once
// when ctx ends.
func (p *Poller) wait(ctx context.Context, pc *pollConn) error {
	c := pc.c
	if p.NoIdle || !c.Caps().Has(imap.CapIdle) {
		interval := p.Interval
		if interval <= 0 {
			interval = DefaultPollInterval
		}
		t := time.NewTimer(interval)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
		case <-c.Closed():
			return fmt.Errorf("%w: connection closed", ErrIMAPConn)
		}
		return nil
	}
	restart := p.IdleRestart
	if restart <= 0 {
		restart = DefaultIdleRestart
	}
	idle, err := c.Idle()
	if err != nil {
		return fmt.Errorf("%w: IDLE: %v", ErrIMAPConn, err)
	}
	if p.idleStarted != nil {
		p.idleStarted()
	}
	t := time.NewTimer(restart)
	defer t.Stop()
	closed := false
	select {
	case <-ctx.Done():
	case <-pc.newMail:
	case <-t.C:
	case <-c.Closed():
		closed = true
	}
	if closed {
		return fmt.Errorf("%w: connection closed during IDLE", ErrIMAPConn)
	}
	if err := idle.Close(); err != nil {
		return fmt.Errorf("%w: IDLE DONE: %v", ErrIMAPConn, err)
	}
	if err := idle.Wait(); err != nil {
		return fmt.Errorf("%w: IDLE: %v", ErrIMAPConn, err)
	}
	return nil
}

// meta is what IMAP knows of the envelope: the Return-Path header (written
// by the final delivery agent, RFC 5321 §4.4) and the account address.
func (p *Poller) meta(raw []byte) Meta {
	m := Meta{Source: "imap", Mailbox: p.StoreMailbox, Remote: p.Account.Addr()}
	addr := p.Address
	if addr == "" && strings.Contains(p.Account.Username, "@") {
		addr = p.Account.Username
	}
	if addr != "" {
		m.Rcpts = []string{addr}
	}
	if msg, err := mail.ReadMessage(bytes.NewReader(raw)); err == nil {
		rp := strings.TrimSpace(msg.Header.Get("Return-Path"))
		rp = strings.TrimSuffix(strings.TrimPrefix(rp, "<"), ">")
		m.MailFrom = rp
	}
	return m
}
