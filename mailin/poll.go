package mailin

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/envelopd/envelopd/internal/oauth"
	"github.com/envelopd/envelopd/store"
)

// Ingester is what the poller feeds: *Pipeline. The error is non-nil only
// when nothing was stored.
type Ingester interface {
	Ingest(ctx context.Context, raw []byte, meta Meta) (store.Outcome, error)
}

// IMAPStateStore keeps the poll position of each mailbox: its UIDVALIDITY
// and the highest UID processed (store.Store implements it).
type IMAPStateStore interface {
	IMAPState(ctx context.Context, key string) (uidValidity uint32, lastUID uint32, err error)
	SetIMAPState(ctx context.Context, key string, uidValidity, lastUID uint32) error
}

// Poller defaults.
const (
	DefaultPollInterval = time.Minute
	// DefaultIdleRestart re-issues IDLE before the 29 minutes after which
	// a server may log the client out (RFC 2177 §3; RFC 9051 §6.3.13).
	DefaultIdleRestart = 25 * time.Minute
	DefaultMaxBackoff  = 5 * time.Minute
	// ProgressThreshold is the backlog size from which progress is shown.
	ProgressThreshold = 50
)

// Poller reads one IMAP mailbox and feeds every new mail to Ingest exactly
// once (see poll_session.go for how). It is not safe to run the same
// Poller twice at the same time.
type Poller struct {
	Account IMAPAccount
	Ingest  Ingester
	State   IMAPStateStore
	// MoveTo, when set, moves processed mail to this folder (created if
	// missing) instead of flagging it \Seen.
	MoveTo string
	// Address is the account's own mail address, used as the envelope
	// recipient (courtesy OOPS sender); default: Username if it holds "@".
	Address string
	// StoreMailbox is Meta.Mailbox ("" = the default mailbox).
	StoreMailbox string
	// Interval between polls when the server lacks IDLE or NoIdle is set.
	Interval time.Duration
	NoIdle   bool
	// IdleRestart is how long one IDLE runs before it is re-issued.
	IdleRestart time.Duration
	// MaxBackoff caps the reconnect delay.
	MaxBackoff time.Duration
	// Insecure allows plain-text IMAP to a non-loopback host.
	Insecure bool
	// Tokens, when set, logs in with an OAuth2 access token (AUTHENTICATE
	// OAUTHBEARER, RFC 7628, or XOAUTH2) instead of Account.Password; it is
	// asked for a token on every (re)connect.
	Tokens oauth.TokenSource
	// Mechanism is the SASL mechanism for Tokens: oauth.Auto ("" too:
	// OAUTHBEARER when offered, else XOAUTH2), oauth.XOAUTH2 or
	// oauth.OAUTHBEARER.
	Mechanism string
	// TLSConfig overrides the TLS settings (tests: RootCAs).
	TLSConfig *tls.Config
	Logger    *slog.Logger
	// Progress, when set, shows "N of M" for large backlogs.
	Progress *Progress

	// dial replaces net.Dialer.DialContext (tests use it to cut the
	// connection at a chosen moment).
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// idleStarted, when set, is called each time IDLE is running (tests).
	idleStarted func()
}

// PollStats counts what one pass or one Once did.
type PollStats struct {
	Seen       int // mails fetched
	Stored     int // newly stored
	Redelivery int // already in the store (re-fetched after a crash or a UIDVALIDITY change)
	Failed     int // not stored (left unmarked, fetched again next time)
}

func (s *PollStats) add(o PollStats) {
	s.Seen += o.Seen
	s.Stored += o.Stored
	s.Redelivery += o.Redelivery
	s.Failed += o.Failed
}

func (p *Poller) log() *slog.Logger {
	if p.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return p.Logger
}

// Once connects, processes every mail not yet processed and returns. The
// error is non-nil when anything failed (connection, login, a mail not
// stored, a mail not marked); what was stored stays stored.
func (p *Poller) Once(ctx context.Context) (PollStats, error) {
	var st PollStats
	_, err := p.session(ctx, true, &st)
	return st, err
}

// Run polls until ctx ends: it processes the backlog, then waits for new
// mail with IDLE when the server offers it (else every Interval), and
// reconnects after failures with capped exponential backoff and jitter.
// Cancelling ctx lets the mail being processed finish (stored and marked)
// and returns nil. Permanent failures (bad URL, login rejected, mailbox
// missing, no TLS) end Run with the error.
func (p *Poller) Run(ctx context.Context) error {
	maxBackoff := p.MaxBackoff
	if maxBackoff <= 0 {
		maxBackoff = DefaultMaxBackoff
	}
	backoff := time.Second
	for {
		var st PollStats
		start := time.Now()
		selected, err := p.session(ctx, false, &st)
		if ctx.Err() != nil {
			return nil
		}
		if Permanent(err) {
			return err
		}
		if selected && time.Since(start) > 30*time.Second {
			backoff = time.Second // the session worked for a while
		}
		// Full jitter in [backoff/2, backoff) spreads reconnects of many
		// pollers after a server restart.
		d := backoff/2 + rand.N(backoff/2+1)
		p.log().Warn("imap: reconnecting", "account", p.Account, "in", d.Round(time.Millisecond), "err", err)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// Permanent reports whether err will not go away by reconnecting.
func Permanent(err error) bool {
	return errors.Is(err, ErrIMAPURL) || errors.Is(err, ErrIMAPNoTLS) ||
		errors.Is(err, ErrIMAPLogin) || errors.Is(err, ErrIMAPMailbox)
}

// PollAll runs the pollers concurrently (Once when once is set, else Run)
// and returns the summed stats and every error, joined.
func PollAll(ctx context.Context, pollers []*Poller, once bool) (PollStats, error) {
	var (
		mu    sync.Mutex
		total PollStats
		errs  []error
		wg    sync.WaitGroup
	)
	for _, p := range pollers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var st PollStats
			var err error
			if once {
				st, err = p.Once(ctx)
			} else {
				err = p.Run(ctx)
			}
			mu.Lock()
			defer mu.Unlock()
			total.add(st)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", p.Account, err))
			}
		}()
	}
	wg.Wait()
	return total, errors.Join(errs...)
}
