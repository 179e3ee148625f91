package mailin

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/envelopd/envelopd/authguard"
	"github.com/envelopd/envelopd/connlimit"
	"github.com/envelopd/envelopd/internal/defaults"
	"github.com/envelopd/envelopd/senderauth"
)

// SMTPConfig configures the SMTP front end. Every limit has a finite
// default: go-smtp's own defaults are all "unlimited".
type SMTPConfig struct {
	Addr            string        // listen address, default 127.0.0.1:2525
	Hostname        string        // greeting and Authentication-Results name
	MaxMessageBytes int64         // default 25 MiB; larger DATA → 552
	MaxRecipients   int           // default 100; more → 452
	MaxConnections  int           // default 100; more → 421 at connect
	MaxLineLength   int           // default 2000 (RFC 5321 §4.5.3.1.6 says ≥ 1000)
	ReadTimeout     time.Duration // default 5 min
	WriteTimeout    time.Duration // default 1 min
	TLS             *tls.Config   // enables STARTTLS
	// Users maps AUTH user names to passwords (PLAIN and LOGIN). Empty
	// disables AUTH.
	Users map[string]string
	// AcceptDomains, when set, limits unauthenticated RCPT TO to these
	// domains (and subdomains are not included).
	AcceptDomains []string
	// Router, when set, takes over AUTH, the recipient policy and delivery
	// (relay mode: Relay in relay.go); Users and AcceptDomains are unused.
	Router Router
	// MaxConnRate limits new connections per client IP per second (a
	// token bucket with a burst of twice the rate); beyond it the client
	// gets 421. 0 means no limit.
	MaxConnRate float64
	Logger      *slog.Logger
	// MaxInFlightBytes bounds the message bytes being received or
	// analysed at once, over all sessions (default 128 MiB; at least
	// MaxMessageBytes). DATA past it waits up to InFlightWait (default
	// 1 min; negative: not at all) for room, then gets 451 4.3.2.
	MaxInFlightBytes int64
	InFlightWait     time.Duration

	// Abuse limits.
	// MaxConnectionsPerIP caps concurrent connections from one client IP
	// (IPv6: one /64); more → 421 at connect. Default 20 (a fifth of
	// MaxConnections' default); < 0: no cap.
	MaxConnectionsPerIP int
	// IdleTimeout bounds the wait for a command outside a mail
	// transaction (default 1 min; within one, ReadTimeout applies and the
	// whole transaction must end within 2×ReadTimeout).
	IdleTimeout time.Duration
	// MaxIdleCommands is how many commands a session may send outside a
	// mail transaction without progress (a message received, whatever
	// its answer, or a successful AUTH) before it is closed with 421.
	// Default 20; < 0: none.
	MaxIdleCommands int
	// Auth throttles and bounds password checks (shared by every front
	// end of the process); nil: a Guard with the default policy.
	Auth *authguard.Guard
	// Service names this server in auth logs and metrics ("smtp",
	// "submission"); default "smtp".
	Service string
}

// Router decides who may log in, which recipients a session may use and
// where a message goes. Relay implements it; without one, the server
// checks Users and AcceptDomains and ingests each message once.
type Router interface {
	// Authenticate checks a password for AUTH PLAIN and LOGIN.
	Authenticate(user, pass string) error
	// Rcpt accepts or refuses a recipient; user is the authenticated user
	// ("" when none). An *smtp.SMTPError reaches the client as is.
	Rcpt(user, from, to string) error
	// Deliver takes a message (the bytes as received) for the session's
	// recipients and returns the text of the 250 reply. An *smtp.SMTPError
	// reaches the client as is; any other error answers 451.
	Deliver(ctx context.Context, raw []byte, meta Meta, user string) (string, error)
}

// PostmasterRouter is a Router with a mailbox for the bare <postmaster>
// recipient (RFC 5321 §4.5.1): the relay's postmaster@ its first domain.
type PostmasterRouter interface {
	Router
	Postmaster() string
}

func (c *SMTPConfig) defaults() {
	defaults.Unset(&c.Addr, "127.0.0.1:2525")
	defaults.Unset(&c.Hostname, "localhost")
	defaults.Unset(&c.MaxMessageBytes, 25<<20)
	defaults.Unset(&c.MaxRecipients, 100)
	defaults.Unset(&c.MaxConnections, 100)
	defaults.Unset(&c.MaxLineLength, 2000)
	defaults.Unset(&c.ReadTimeout, 5*time.Minute)
	defaults.Unset(&c.WriteTimeout, time.Minute)
	defaults.Unset(&c.MaxInFlightBytes, max(DefaultMaxInFlightBytes, c.MaxMessageBytes))
	defaults.Unset(&c.InFlightWait, DefaultInFlightWait)
	defaults.Unset(&c.MaxConnectionsPerIP, 20)
	defaults.Unset(&c.IdleTimeout, time.Minute)
	defaults.Unset(&c.MaxIdleCommands, 20)
	defaults.Unset(&c.Service, "smtp")
}

// ErrOpenRelay is returned when a configuration would make envelopd an open
// relay: listening beyond loopback with neither AUTH nor accepted domains.
var ErrOpenRelay = errors.New("mailin: listening beyond loopback needs AUTH (--auth-file) or --accept-domain")

// SMTPServer is envelopd's SMTP front end over a Pipeline.
type SMTPServer struct {
	cfg SMTPConfig
	p   *Pipeline
	srv *smtp.Server
	ln  net.Listener
	// ctx is cancelled when the server shuts down hard.
	ctx    context.Context
	cancel context.CancelFunc
	// inFlight is the DATA byte budget (MaxInFlightBytes).
	inFlight *byteBudget
	guard    *authguard.Guard
	users    *fileUsers // --auth-file users, nil when none
}

// NewSMTPServer validates cfg and listens; Serve starts accepting.
func NewSMTPServer(cfg SMTPConfig, p *Pipeline) (*SMTPServer, error) {
	cfg.defaults()
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, err
	}
	if !isLoopback(ln.Addr()) && len(cfg.Users) == 0 && len(cfg.AcceptDomains) == 0 && cfg.Router == nil {
		ln.Close()
		return nil, ErrOpenRelay
	}
	if cfg.MaxInFlightBytes < cfg.MaxMessageBytes {
		ln.Close()
		return nil, fmt.Errorf("mailin: the in-flight budget (%d bytes) is smaller than the largest message (%d bytes)", cfg.MaxInFlightBytes, cfg.MaxMessageBytes)
	}
	s := &SMTPServer{cfg: cfg, p: p, inFlight: newByteBudget(cfg.MaxInFlightBytes), guard: cfg.Auth}
	if s.guard == nil {
		s.guard = authguard.New(0, cfg.Logger, nil)
	}
	if len(cfg.Users) > 0 {
		s.users = newFileUsers(cfg.Users)
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	srv := smtp.NewServer(s)
	srv.Domain = cfg.Hostname
	srv.MaxMessageBytes = cfg.MaxMessageBytes
	srv.MaxRecipients = cfg.MaxRecipients
	srv.MaxLineLength = cfg.MaxLineLength
	srv.ReadTimeout = cfg.ReadTimeout
	srv.WriteTimeout = cfg.WriteTimeout
	srv.TLSConfig = cfg.TLS
	srv.EnableSMTPUTF8 = true
	srv.AllowInsecureAuth = isLoopback(ln.Addr())
	srv.ErrorLog = slogPrinter{s.log()}
	s.srv = srv
	s.ln = &smtpListener{s: s, Listener: &connlimit.Listener{Listener: ln, Max: cfg.MaxConnections,
		PerIP: cfg.MaxConnectionsPerIP, Rate: cfg.MaxConnRate, Refuse: smtpRefusal,
		Refused: func(r connlimit.Reason, remote string) {
			s.log().Info("smtp connection refused", "reason", string(r), "remote", remote)
		}}}
	return s, nil
}

// smtpRefusal is the line a client refused at connect gets (RFC 5321 §3.8).
func smtpRefusal(r connlimit.Reason) string {
	switch r {
	case connlimit.TooFast:
		return "421 4.7.0 Too many connections from your address, slow down\r\n"
	case connlimit.TooManyFromIP:
		return "421 4.7.0 Too many concurrent connections from your address\r\n"
	}
	return "421 4.7.0 Too many connections, try again later\r\n"
}

// smtpListener wraps each accepted connection in an smtpConn.
type smtpListener struct {
	*connlimit.Listener
	s *SMTPServer
}

func (l *smtpListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	cfg := &l.s.cfg
	return &smtpConn{Conn: c.(*connlimit.Conn), idleTimeout: cfg.IdleTimeout, txTimeout: 2 * cfg.ReadTimeout,
		maxIdle: max(cfg.MaxIdleCommands, 0), log: l.s.log()}, nil
}

// Addr is the address the server listens on.
func (s *SMTPServer) Addr() net.Addr { return s.ln.Addr() }

// Serve accepts connections until Shutdown or Close.
func (s *SMTPServer) Serve() error {
	err := s.srv.Serve(s.ln)
	if errors.Is(err, smtp.ErrServerClosed) || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// Shutdown stops accepting and waits for sessions to end (in-flight
// messages finish and are answered) until ctx ends; then it closes them.
func (s *SMTPServer) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if err != nil {
		s.cancel()
		s.srv.Close()
	}
	return err
}

// Close stops the server at once.
func (s *SMTPServer) Close() error {
	s.cancel()
	return s.srv.Close()
}

func (s *SMTPServer) log() *slog.Logger {
	if s.cfg.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.cfg.Logger
}

// NewSession implements smtp.Backend.
func (s *SMTPServer) NewSession(c *smtp.Conn) (smtp.Session, error) {
	if badHelo(c.Hostname()) {
		// Never echo it back (go-smtp's reply would: "250 Hello …").
		return nil, errBadHelo
	}
	nc := c.Conn()
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	sc, _ := nc.(*smtpConn)
	return &session{s: s, c: c, conn: sc, remote: c.Conn().RemoteAddr().String()}, nil
}

// errBadHelo refuses a HELO/EHLO argument holding control characters (a
// bare CR, say): RFC 5321 §4.1.1.1 wants a domain or address literal.
var errBadHelo = &smtp.SMTPError{Code: 501, EnhancedCode: smtp.EnhancedCode{5, 5, 2}, Message: "Invalid HELO/EHLO argument"}

func badHelo(h string) bool {
	for i := 0; i < len(h); i++ {
		if h[i] < 0x20 || h[i] == 0x7f {
			return true
		}
	}
	return false
}

type session struct {
	s       *SMTPServer
	c       *smtp.Conn
	conn    *smtpConn // nil if the connection did not come from our listener
	fails   int       // failed AUTH attempts in this session
	remote  string
	authed  bool
	user    string
	from    string
	rcpts   []string
	hasMail bool
	size    int64 // SIZE declared in MAIL FROM (RFC 1870), 0 when none
}

func (ss *session) AuthMechanisms() []string {
	if len(ss.s.cfg.Users) == 0 && ss.s.cfg.Router == nil {
		return nil
	}
	return []string{sasl.Plain, sasl.Login}
}

func (ss *session) Auth(mech string) (sasl.Server, error) {
	check := func(identity, user, pass string) error {
		return ss.checkAuth(mech, identity, user, pass)
	}
	switch mech {
	case sasl.Plain:
		return authguard.NewPlainServer(check), nil
	case sasl.Login:
		return newLoginServer(check), nil
	}
	return nil, smtp.ErrAuthUnknownMechanism
}

// Replies of AUTH beyond 535 (RFC 4954 §6).
var (
	ErrAuthBusy    = &smtp.SMTPError{Code: 454, EnhancedCode: smtp.EnhancedCode{4, 7, 0}, Message: "Temporary authentication failure, try again later"}
	ErrAuthLocked  = &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 7, 0}, Message: "Too many authentication failures from your address, closing connection"}
	ErrAuthTooMany = &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 7, 0}, Message: "Too many authentication failures, closing connection"}
)

// checkAuth runs one AUTH attempt through the guard: throttled before any
// hash, bounded in concurrency, logged and counted. Every failure costs
// one full password check whatever was wrong: an authorization
// identity other than the user is checked, then refused.
func (ss *session) checkAuth(mech, identity, user, pass string) error {
	verify := func() error {
		var err error
		if r := ss.s.cfg.Router; r != nil {
			err = r.Authenticate(user, pass)
		} else if ss.s.users != nil {
			err = ss.s.users.check(user, pass)
		} else {
			err = ErrBadPassword
		}
		if err == nil && identity != "" && identity != user {
			err = ErrBadPassword
		}
		return err
	}
	a := authguard.Attempt{Service: ss.s.cfg.Service, IP: ss.remote, Account: user, Mechanism: mech}
	err := ss.s.guard.Check(ss.s.ctx, a, verify)
	switch {
	case err == nil:
		// The authenticated user: a relay's mailbox, or an --auth-file
		// user (a verified sender for courtesy OOPS).
		ss.authed, ss.user = true, user
		ss.conn.progress()
		return nil
	case errors.Is(err, authguard.ErrBusy):
		// Counts toward the session's limit too: a client that retries
		// at once on 454 is closed like one that guesses.
		ss.failed()
		return ErrAuthBusy
	case errors.Is(err, authguard.ErrLockedOut):
		ss.closeAfterReply()
		return ErrAuthLocked
	case errors.Is(err, authguard.ErrFailed):
		if ss.failed() {
			return ErrAuthTooMany
		}
		return smtp.ErrAuthFailed
	}
	return ErrAuthBusy // the server is shutting down
}

// failed counts a failed authentication toward the session's limit and,
// at the limit, closes the session after this reply (true).
func (ss *session) failed() bool {
	ss.fails++
	if ss.fails < ss.s.guard.MaxSessionFailures() {
		return false
	}
	ss.closeAfterReply()
	return true
}

// closeAfterReply ends the connection once the current reply is sent.
func (ss *session) closeAfterReply() {
	if ss.conn != nil {
		ss.conn.CloseAfterWrite()
	}
}

func (ss *session) Mail(from string, opts *smtp.MailOptions) error {
	ss.from, ss.hasMail = from, true
	if opts != nil {
		ss.size = opts.Size
	}
	ss.conn.transaction(true)
	return nil
}

func (ss *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	cfg := ss.s.cfg
	if isPostmaster(to) {
		// RFC 5321 §4.5.1: <postmaster> without a domain must be accepted.
		// Relay mode delivers it to postmaster@ the first --domain; plain
		// mode stores it like any accepted mail.
		if pr, ok := cfg.Router.(PostmasterRouter); ok {
			to = pr.Postmaster()
		} else if cfg.Router == nil {
			ss.rcpts = append(ss.rcpts, "postmaster")
			return nil
		}
	}
	if cfg.Router != nil {
		if err := cfg.Router.Rcpt(ss.user, ss.from, to); err != nil {
			return err
		}
		ss.rcpts = append(ss.rcpts, to)
		return nil
	}
	if !ss.authed && (len(cfg.Users) > 0 || len(cfg.AcceptDomains) > 0) {
		if !domainIn(to, cfg.AcceptDomains) {
			if len(cfg.Users) > 0 && len(cfg.AcceptDomains) == 0 {
				return smtp.ErrAuthRequired
			}
			return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 7, 1}, Message: "Relaying denied: " + to + " is not a local domain"}
		}
	}
	ss.rcpts = append(ss.rcpts, to)
	return nil
}

// ErrBareLineEnd is the reply to DATA holding a CR or LF that is not part
// of a CRLF pair (RFC 5321 §2.3.8; SMTP smuggling).
// The text names the line end expected: most senders that hit it write
// "\n" line ends (Python's smtplib sends bytes unchanged).
var ErrBareLineEnd = &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 6, 0},
	Message: `Message has a bare LF ("\n") or CR ("\r") line end: every line must end with CRLF ("\r\n"), RFC 5321 2.3.8`}

// ErrLineTooLong is the reply to a DATA line longer than MaxLineLength
// (RFC 5321 §4.5.3.1.6 and §4.2.2: 500 "line too long").
var ErrLineTooLong = &smtp.SMTPError{Code: 500, EnhancedCode: smtp.EnhancedCode{5, 5, 6}, Message: "Line too long"}

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func (ss *session) Data(r io.Reader) error {
	ss.conn.dataDeadline(ss.s.cfg.ReadTimeout)
	buf := bufPool.Get().(*bytes.Buffer)
	buf.Reset()
	defer func() {
		// Keep ordinary buffers for reuse, not ones grown by a huge DATA.
		if buf.Cap() <= 1<<20 {
			bufPool.Put(buf)
		}
	}()
	// The message's bytes count against the in-flight budget until it is
	// stored: past it, 451 4.3.2 rather than memory.
	declared := min(ss.size, ss.s.cfg.MaxMessageBytes)
	taken, err := readBudgeted(ss.s.ctx, ss.s.inFlight, ss.s.cfg.InFlightWait, declared, buf, r)
	defer ss.s.inFlight.release(taken)
	if err != nil {
		if err == ErrBusy {
			ss.s.log().Warn("DATA refused: in-flight budget exhausted", "remote", ss.remote, "max_in_flight_bytes", ss.s.cfg.MaxInFlightBytes)
			if ss.s.p != nil {
				if b, ok := ss.s.p.Metrics.(BusyObserver); ok {
					b.ObserveInFlightBusy()
				}
			}
			return ErrBusy
		}
		// go-smtp's ErrDataTooLarge (552) must reach the client as is; any
		// other read error means a truncated DATA: nothing is stored.
		if errors.Is(err, smtp.ErrTooLongLine) {
			return ErrLineTooLong
		}
		return err
	}
	if hasBareLineEnd(buf.Bytes()) {
		return ErrBareLineEnd
	}
	// A whole message received is progress, whatever its answer: a
	// client whose mail the store refuses (451 on a full disk) is busy,
	// not idle (--max-idle-commands).
	ss.conn.progress()
	raw := buf.Bytes()
	if buf.Cap() <= 1<<20 {
		raw = bytes.Clone(raw) // buf goes back to the pool
	}
	spf := ss.checkSPF()
	if r := ss.s.cfg.Router; r != nil {
		msg, err := r.Deliver(ss.s.ctx, raw, Meta{Source: "smtp", MailFrom: ss.from, Rcpts: ss.rcpts, Remote: ss.remote, SPF: spf}, ss.user)
		var reply *smtp.SMTPError
		if errors.As(err, &reply) {
			return reply
		}
		if err != nil {
			ss.s.log().Error("relay delivery failed", "err", err, "remote", ss.remote)
			return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "Temporary local error, message not delivered; try again later"}
		}
		return &smtp.SMTPError{Code: 250, EnhancedCode: smtp.EnhancedCode{2, 0, 0}, Message: msg}
	}
	out, err := ss.s.p.Ingest(ss.s.ctx, raw, Meta{Source: "smtp", MailFrom: ss.from, Rcpts: ss.rcpts, Remote: ss.remote, User: ss.user, SPF: spf})
	var reply *smtp.SMTPError
	if errors.As(err, &reply) {
		return reply // --dmarc-enforce
	}
	if err != nil {
		return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "Temporary local error, message not stored; try again later"}
	}
	msg := fmt.Sprintf("OK stored as %d (%s)", out.ID, out.Status)
	if out.Redelivery {
		msg = fmt.Sprintf("OK already stored as %d", out.ID)
	}
	return &smtp.SMTPError{Code: 250, EnhancedCode: smtp.EnhancedCode{2, 0, 0}, Message: msg}
}

// checkSPF evaluates SPF for the transaction (RFC 7208 §2.3, §2.4): the
// client's IP, its HELO/EHLO name and MAIL FROM. nil when the pipeline
// has no sender checks; none for an authenticated submission, which SPF
// does not describe.
func (ss *session) checkSPF() *senderauth.SPF {
	p := ss.s.p
	if p == nil || p.Sender == nil {
		return nil
	}
	if ss.authed {
		return &senderauth.SPF{Result: senderauth.None, HELO: senderauth.None, Reason: "authenticated submission (AUTH)"}
	}
	var ip net.IP
	if ta, ok := ss.c.Conn().RemoteAddr().(*net.TCPAddr); ok {
		ip = ta.IP
	}
	r := senderauth.CheckSPF(ss.s.ctx, p.Sender.Resolver, ip, ss.c.Hostname(), ss.from)
	return &r
}

func (ss *session) Reset() {
	ss.from, ss.rcpts, ss.hasMail, ss.size = "", nil, false, 0
	ss.conn.transaction(false)
	if badHelo(ss.c.Hostname()) {
		// A later EHLO with control characters: go-smtp resets the session,
		// then echoes the argument; closing now keeps it off the wire.
		if ss.conn != nil {
			ss.conn.Close()
		}
	}
}

// isPostmaster reports the domainless postmaster address, any case
// (RFC 5321 §4.5.1, §2.4).
func isPostmaster(to string) bool {
	return strings.EqualFold(to, "postmaster") || strings.EqualFold(to, postmasterSentinel)
}

func (ss *session) Logout() error { return nil }

// hasBareLineEnd reports a CR not followed by LF or an LF not preceded by CR.
func hasBareLineEnd(b []byte) bool {
	for {
		i := bytes.IndexAny(b, "\r\n")
		if i < 0 {
			return false
		}
		if b[i] == '\n' {
			return true // an LF not preceded by CR (a CR would have matched first)
		}
		if i+1 >= len(b) || b[i+1] != '\n' {
			return true
		}
		b = b[i+2:]
	}
}

func domainIn(addr string, domains []string) bool {
	i := strings.LastIndexByte(addr, '@')
	if i < 0 {
		return false
	}
	d := strings.ToLower(strings.TrimSuffix(addr[i+1:], "."))
	for _, x := range domains {
		if strings.EqualFold(strings.TrimSuffix(x, "."), d) {
			return true
		}
	}
	return false
}

func isLoopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

type slogPrinter struct{ l *slog.Logger }

func (p slogPrinter) Printf(format string, v ...any) { p.l.Warn(fmt.Sprintf(format, v...)) }
func (p slogPrinter) Println(v ...any)               { p.l.Warn(fmt.Sprint(v...)) }
