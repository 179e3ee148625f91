// Package relaytest runs envelopd's relay mode in-process for the tests of
// an agent, in the spirit of net/http/httptest: Start gives an SMTP port
// (the relay's MX: local domains only, no AUTH needed, but mail From a
// local address is refused there unless its DKIM signature passes), a
// submission port
// (AUTH required, DKIM-signed for the local domains, RFC 6409) and an IMAP
// port (the store's folder view), all on 127.0.0.1:0 with a temporary
// database, closed by t.Cleanup. Every address at a local domain is a
// mailbox; Mailbox declares one with a password and returns helpers to
// send typed Envelopay messages and to wait for the next one received.
//
// Mail between local agents never leaves the process: courtesy OOPS
// replies and other queued mail for local addresses are delivered by the
// queue worker straight into the recipient's mailbox (mailin.Relay.Sender).
package relaytest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-message/mail"
	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/envelopd/envelopd/dkim"
	"github.com/envelopd/envelopd/mailin"
	"github.com/envelopd/envelopd/mailin/imapview"
	"github.com/envelopd/envelopd/mailout"
	"github.com/envelopd/envelopd/parse"
	"github.com/envelopd/envelopd/store"
)

// testIterations is the PBKDF2 work factor of the test mailboxes: few, for
// test speed (unknown users are checked against a dummy of the same).
const testIterations = 1000

// DefaultTimeout is how long Mailbox.Next waits.
const DefaultTimeout = 5 * time.Second

type config struct {
	domains []string
	sign    bool
	db      string
}

// Option configures Start.
type Option func(*config)

// Domains sets the local domains (default "agents.test").
func Domains(d ...string) Option { return func(c *config) { c.domains = append(c.domains, d...) } }

// DB runs the relay on the store a --db value names (e.g. a postgres://
// URL) instead of a fresh SQLite file.
func DB(db string) Option { return func(c *config) { c.db = db } }

// NoSigning turns --sign-local off: submitted mail is stored unsigned.
func NoSigning() Option { return func(c *config) { c.sign = false } }

// Relay is a running relay.
type Relay struct {
	SMTPAddr       string // MX: mail for local domains, no AUTH (and no local From)
	SubmissionAddr string // AUTH PLAIN/LOGIN required
	IMAPAddr       string
	Store          store.DB
	// Resolver holds the relay's DKIM keys (selector mailin.LocalSelector).
	Resolver *dkim.StaticResolver
	Relay    *mailin.Relay

	t         testing.TB
	mu        sync.Mutex
	mailboxes map[string]*Mailbox
}

// Start runs a relay until the test ends.
func Start(t testing.TB, opts ...Option) *Relay {
	t.Helper()
	cfg := config{sign: true}
	for _, o := range opts {
		o(&cfg)
	}
	if len(cfg.domains) == 0 {
		cfg.domains = []string{"agents.test"}
	}
	ctx, cancel := context.WithCancel(context.Background())
	db := cfg.db
	if db == "" {
		db = filepath.Join(t.TempDir(), "relay.db")
	}
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatalf("relaytest: %v", err)
	}
	res := dkim.NewStaticResolver()
	var signers map[string][]dkim.Signer
	if cfg.sign {
		if signers, err = mailin.LocalSigners(ctx, st, cfg.domains, res); err != nil {
			t.Fatalf("relaytest: %v", err)
		}
	}
	p := &mailin.Pipeline{Store: st, Verifier: &dkim.Verifier{Resolver: res}, AuthServID: "relaytest"}
	wake := make(chan struct{}, 1)
	relay := &mailin.Relay{Domains: cfg.domains, Pipeline: p, Store: st, Signers: signers, Wake: wake,
		PasswordIterations: testIterations}
	p.OOPS, p.OOPSDomains = relay.OOPS, cfg.domains
	mx, err := mailin.NewSMTPServer(mailin.SMTPConfig{Addr: "127.0.0.1:0", Hostname: "relaytest", Router: relay}, p)
	if err != nil {
		t.Fatalf("relaytest: %v", err)
	}
	sub, err := mailin.NewSMTPServer(mailin.SMTPConfig{Addr: "127.0.0.1:0", Hostname: "relaytest", Router: relay.Submission()}, p)
	if err != nil {
		t.Fatalf("relaytest: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("relaytest: %v", err)
	}
	iv := imapview.New(imapview.Options{Store: st, Authenticate: relay.Authenticate, Hostname: "relaytest"})
	w := &mailout.Worker{Store: st, Sender: relay.Sender(nil), Wake: wake, Interval: time.Second, Initial: 200 * time.Millisecond}
	runs := []func(){
		func() { mx.Serve() },
		func() { sub.Serve() },
		func() { iv.Serve(ln) },
		func() { w.Run(ctx) },
	}
	// The courtesy OOPS, queued by the owed-OOPS worker, wakes the queue
	// worker.
	wakeQueue := mailout.WakeOnQueue(st, wake)
	runs = append(runs, func() { wakeQueue(ctx) },
		func() { (&mailin.OOPSWorker{Pipeline: p, Store: st}).Run(ctx) })
	var wg sync.WaitGroup
	for _, run := range runs {
		wg.Add(1)
		go func() { defer wg.Done(); run() }()
	}
	t.Cleanup(func() {
		cancel()
		mx.Close()
		sub.Close()
		iv.Close()
		wg.Wait()
		st.Close()
	})
	return &Relay{
		SMTPAddr: mx.Addr().String(), SubmissionAddr: sub.Addr().String(), IMAPAddr: ln.Addr().String(),
		Store: st, Resolver: res, Relay: relay, t: t, mailboxes: map[string]*Mailbox{},
	}
}

// Mailbox declares the mailbox addr with a random password (once; later
// calls return the same *Mailbox).
func (r *Relay) Mailbox(addr string) *Mailbox {
	r.t.Helper()
	addr = strings.ToLower(addr)
	r.mu.Lock()
	defer r.mu.Unlock()
	if m, ok := r.mailboxes[addr]; ok {
		return m
	}
	if !r.Relay.Local(addr) {
		r.t.Fatalf("relaytest: %s is not at a local domain %v", addr, r.Relay.Domains)
	}
	b := make([]byte, 12)
	rand.Read(b)
	pw := hex.EncodeToString(b)
	h, err := mailin.HashPassword(pw, testIterations)
	if err != nil {
		r.t.Fatalf("relaytest: %v", err)
	}
	if err := r.Store.SetMailboxPassword(context.Background(), addr, h); err != nil {
		r.t.Fatalf("relaytest: %v", err)
	}
	m := &Mailbox{Address: addr, Password: pw, r: r}
	r.mailboxes[addr] = m
	return m
}

// Mailbox is one agent's address with its credentials.
type Mailbox struct {
	Address  string
	Password string
	r        *Relay
	mu       sync.Mutex
	last     int64 // row id of the last message Next returned
}

// Next waits up to DefaultTimeout for the next message received in this
// mailbox (direction in, in storage order) and returns it with its raw
// bytes; the test fails on timeout.
func (m *Mailbox) Next() *store.Message {
	m.r.t.Helper()
	return m.NextWithin(DefaultTimeout)
}

// NextWithin is Next with a timeout.
func (m *Mailbox) NextWithin(timeout time.Duration) *store.Message {
	m.r.t.Helper()
	msg, err := m.next(timeout)
	if err != nil {
		m.r.t.Fatalf("relaytest: %s: no new message within %v: %v", m.Address, timeout, err)
	}
	return msg
}

func (m *Mailbox) next(timeout time.Duration) (*store.Message, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.r.Store
	for {
		var top int64
		if ms, err := st.Messages(ctx, store.Filter{Newest: true, Limit: 1}); err == nil && len(ms) > 0 {
			top = ms[0].ID
		}
		ms, err := st.Messages(ctx, store.Filter{Mailbox: m.Address, AfterID: m.last, WithRaw: true})
		if err != nil {
			return nil, err
		}
		for i := range ms {
			m.last = ms[i].ID
			if ms[i].Direction == store.DirIn {
				return &ms[i], nil
			}
		}
		if err := st.WaitNew(ctx, top); err != nil {
			return nil, err
		}
	}
}

// Send composes d (From defaults to this mailbox) with mailout.Compose and
// submits it with AUTH through the submission port, where the relay signs
// it. It returns the composed message (Message-ID, Envelopay body).
func (m *Mailbox) Send(d mailout.Draft) *mailout.Message {
	m.r.t.Helper()
	if d.From == nil {
		d.From = &mail.Address{Address: m.Address}
	}
	msg, err := mailout.ComposeMessage(d)
	if err != nil {
		m.r.t.Fatalf("relaytest: compose: %v", err)
	}
	if err := m.Submit(msg.Recipients, msg.Raw); err != nil {
		m.r.t.Fatalf("relaytest: submit: %v", err)
	}
	return msg
}

// SendType sends an Envelopay message of type typ with the JSON body to
// the given addresses.
func (m *Mailbox) SendType(typ, body string, to ...string) *mailout.Message {
	m.r.t.Helper()
	d := mailout.Draft{Type: typ, Body: json.RawMessage(body)}
	for _, a := range to {
		d.To = append(d.To, &mail.Address{Address: a})
	}
	return m.Send(d)
}

// Reply answers a received message with type typ and body (refs,
// In-Reply-To and References filled by mailout.ReplyDraft).
func (m *Mailbox) Reply(orig *store.Message, typ, body string) *mailout.Message {
	m.r.t.Helper()
	r, err := mailout.ResultOf(orig)
	if err != nil {
		m.r.t.Fatalf("relaytest: %v", err)
	}
	d, err := mailout.ReplyDraft(r, typ, json.RawMessage(body))
	if err != nil {
		m.r.t.Fatalf("relaytest: reply: %v", err)
	}
	d.From = &mail.Address{Address: m.Address}
	return m.Send(d)
}

// Submit sends raw as this mailbox through the submission port (AUTH
// PLAIN); the error is the server's refusal, if any.
func (m *Mailbox) Submit(rcpts []string, raw []byte) error {
	return sendMail(m.r.SubmissionAddr, sasl.NewPlainClient("", m.Address, m.Password), m.Address, rcpts, raw)
}

// Inject delivers raw through the MX port without AUTH, as a stranger
// would (e.g. a tampered copy of a signed message).
func (r *Relay) Inject(from string, rcpts []string, raw []byte) error {
	return sendMail(r.SMTPAddr, nil, from, rcpts, raw)
}

// sendMail is one plain-text SMTP transaction on loopback (go-smtp's
// SendMail insists on STARTTLS).
func sendMail(addr string, auth sasl.Client, from string, rcpts []string, raw []byte) error {
	c, err := smtp.Dial(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if auth != nil {
		if err := c.Auth(auth); err != nil {
			return err
		}
	}
	if err := c.SendMail(from, rcpts, bytes.NewReader(raw)); err != nil {
		return err
	}
	return c.Quit()
}

// DKIM returns the DKIM results stored with a message.
func DKIM(t testing.TB, m *store.Message) []dkim.Result {
	t.Helper()
	var rs []dkim.Result
	if len(m.DKIM) > 0 {
		if err := json.Unmarshal(m.DKIM, &rs); err != nil {
			t.Fatalf("relaytest: dkim results of %d: %v", m.ID, err)
		}
	}
	return rs
}

// Result returns the parse result stored with a message (body fields in
// Fields).
func Result(t testing.TB, m *store.Message) *parse.Result {
	t.Helper()
	r, err := mailout.ResultOf(m)
	if err != nil {
		t.Fatalf("relaytest: %v", err)
	}
	return r
}
