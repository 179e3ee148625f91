package mailin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/mail"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/envelopd/envelopd/dkim"
	"github.com/envelopd/envelopd/mailout"
	"github.com/envelopd/envelopd/message"
	"github.com/envelopd/envelopd/parse"
	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/senderauth"
	"github.com/envelopd/envelopd/store"
)

// RelayStore is what a Relay uses of the store: ingest, the outbound
// queue, and the mailboxes with their folders.
type RelayStore interface {
	store.Ingester
	store.Reader
	store.OutboundQueue
	store.Mailboxes
}

// Relay is relay mode: envelopd as the whole mail world of a test
// suite. Every address at one of Domains is a mailbox; a message for a
// local address is ingested once per recipient mailbox (Meta.Mailbox = the
// address, so dedup and threads are per mailbox); a message for any other
// domain is queued for the smarthost, and only from an authenticated
// submitter (no open relay, RFC 5321 §3.9 and RFC 6409 §4.3). Mail a local
// user submits must carry that user's own address in From; with Signers it
// is DKIM-signed for its domain before anyone stores it, and a stored copy
// goes to the sender's own mailbox (Sent), so both sides of a thread are
// visible to each agent.
//
// Relay is a Router for SMTPServer (the MX port); Submission is the Router
// of the submission port, where AUTH is required. Sender delivers the
// outbound queue (courtesy OOPS, relayed mail): local recipients through
// the same per-mailbox ingest, others through the smarthost.
type Relay struct {
	Domains  []string
	Pipeline *Pipeline
	Store    RelayStore
	// Signers are the DKIM signers per local domain (LocalSigners); nil
	// or a missing domain signs nothing.
	Signers map[string][]dkim.Signer
	// ARCSealers, when set, ARC-seal (RFC 8617 §5.1) the mail the relay
	// queues for other domains, with the From domain's sealer
	// (LocalARCSigners; --arc-seal); AuthServID names the relay in the
	// seal's ARC-Authentication-Results.
	ARCSealers map[string][]dkim.Signer
	AuthServID string
	// Smarthost says whether mail for other domains may be queued (a
	// queue worker delivers it through a smarthost).
	Smarthost bool
	// Wake, when set, is signalled after queueing mail (the worker's Wake).
	Wake   chan<- struct{}
	Logger *slog.Logger
	Now    func() time.Time

	// authCache remembers passwords that verified, so that a test suite
	// logging in per message pays the key derivation once per password.
	authMu    sync.Mutex
	authCache map[string]string // user → hash\x00password that matched

	// PasswordIterations is the PBKDF2 work factor of the dummy hash
	// unknown users are checked against: that of the stored hashes
	// (0: DefaultPasswordIterations, what `mailbox add` uses).
	PasswordIterations int
	// CheckPassword verifies a password against a hash; nil means
	// CheckPassword. Tests inject a counting one.
	CheckPassword func(hash, pass string) error
	dummyOnce     sync.Once
	dummy         string
}

// Local reports whether addr is at a local domain.
func (r *Relay) Local(addr string) bool {
	return domainIn(addr, r.Domains) && strings.LastIndexByte(addr, '@') > 0
}

// Refusals, with their RFC 3463 codes.
var (
	ErrRelayDenied   = &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 7, 1}, Message: "Relaying denied: authenticate to send to other domains"}
	ErrNoSmarthost   = &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 7, 1}, Message: "Relaying denied: no smarthost configured, only local domains are served"}
	ErrFromNotYours  = &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 7, 1}, Message: "From must be the authenticated user's own address"}
	ErrBadMailHeader = &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 6, 0}, Message: "Message must have exactly one From address"}
	// ErrLocalAuthor refuses, at the end of DATA, unauthenticated mail
	// whose From is a local address (see Relay.checkLocalAuthor).
	ErrLocalAuthor = &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 7, 1},
		Message: "From is an address at a local domain: submit it with AUTH as that address on the submission port"}
)

// Authenticate implements Router: the mailbox's password hash, set by
// `envelopd mailbox add`. A mailbox without a password cannot log in.
//
// Every failure costs one full password hash, whatever went wrong (issue
// 22): an address outside the local domains, an unknown mailbox, one
// without a password or a store error are checked against a dummy hash of
// the same parameters (DummyHash), so the reply time does not tell which
// addresses exist. The comparison itself is constant-time (CheckPassword).
func (r *Relay) Authenticate(user, pass string) error {
	user = strings.ToLower(user)
	hash := ""
	if r.Local(user) {
		hash, _ = r.Store.MailboxPassword(context.Background(), user)
	}
	if hash == "" {
		r.checkPassword(r.DummyHash(), pass)
		return ErrBadPassword
	}
	key := hash + "\x00" + pass
	r.authMu.Lock()
	hit := r.authCache[user] == key
	r.authMu.Unlock()
	if hit {
		return nil
	}
	if err := r.checkPassword(hash, pass); err != nil {
		return ErrBadPassword
	}
	if h, ok := r.rehash(user, hash, pass); ok {
		key = h + "\x00" + pass
	}
	r.authMu.Lock()
	if r.authCache == nil {
		r.authCache = map[string]string{}
	}
	r.authCache[user] = key
	r.authMu.Unlock()
	return nil
}

func (r *Relay) checkPassword(hash, pass string) error {
	if r.CheckPassword != nil {
		return r.CheckPassword(hash, pass)
	}
	return CheckPassword(hash, pass)
}

// rehash replaces, after a successful login, a stored hash whose work
// factor is not the current one (PasswordIterations) by a fresh hash of
// the same password: older databases move to the current parameters
// transparently, and every stored hash then costs what the dummy costs.
func (r *Relay) rehash(user, hash, pass string) (string, bool) {
	want := r.PasswordIterations
	if want <= 0 {
		want = DefaultPasswordIterations
	}
	if passwordIterations(hash) == want {
		return "", false
	}
	h, err := HashPassword(pass, want)
	if err == nil {
		err = r.Store.SetMailboxPassword(context.Background(), user, h)
	}
	if err != nil {
		if r.Logger != nil {
			r.Logger.Warn("relay: rehash password", "mailbox", user, "err", err)
		}
		return "", false
	}
	return h, true
}

// DummyHash is the hash an authentication for a user without one is
// checked against: a random salt and key with PasswordIterations rounds
// (the cost of a real check), made once.
func (r *Relay) DummyHash() string {
	r.dummyOnce.Do(func() { r.dummy = DummyPasswordHash(r.PasswordIterations) })
	return r.dummy
}

// ErrNoMailbox refuses an unauthenticated recipient at a local domain that
// has no mailbox (RFC 3463 5.1.1): mail from strangers never creates
// mailboxes; `envelopd mailbox add` does.
var ErrNoMailbox = &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "No such mailbox"}

// Rcpt implements Router. A local recipient must have a mailbox unless the
// session is authenticated (a local user's mail creates the mailboxes it
// is delivered to).
func (r *Relay) Rcpt(user, _, to string) error {
	if r.Local(to) {
		// The postmaster is always accepted (RFC 5321 §4.5.1); its
		// mailbox is created on first delivery.
		if user != "" || strings.EqualFold(to, r.Postmaster()) {
			return nil
		}
		if _, err := r.Store.MailboxPassword(context.Background(), strings.ToLower(to)); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return ErrNoMailbox
			}
			return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "Temporary local error; try again later"}
		}
		return nil
	}
	if user == "" {
		return ErrRelayDenied
	}
	if !r.Smarthost {
		return ErrNoSmarthost
	}
	return nil
}

// Deliver implements Router.
func (r *Relay) Deliver(ctx context.Context, raw []byte, meta Meta, user string) (string, error) {
	user = strings.ToLower(user)
	var local, remote []string
	for _, rc := range meta.Rcpts {
		rc = strings.ToLower(rc)
		if r.Local(rc) {
			local = append(local, rc)
		} else {
			remote = append(remote, rc)
		}
	}
	if user != "" {
		from, err := headerFrom(raw)
		if err != nil {
			return "", ErrBadMailHeader
		}
		if from != user {
			return "", ErrFromNotYours
		}
		if s := r.Signers[domainOf(from)]; len(s) > 0 {
			if raw, err = dkim.Sign(raw, s...); err != nil {
				return "", &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 6, 0}, Message: "Cannot sign: " + err.Error()}
			}
		}
		if err := r.storeSent(ctx, raw, user); err != nil {
			return "", err
		}
	} else if err := r.checkLocalAuthor(ctx, raw, meta); err != nil {
		return "", err
	}
	// At most one courtesy OOPS per inbound mail, whatever its number of
	// local recipients: the copies after the first OOPS queued
	// record one_per_mail instead.
	oopsDone := false
	for _, rc := range local {
		m := Meta{Source: "smtp", MailFrom: meta.MailFrom, Rcpts: []string{rc}, Mailbox: rc, Remote: meta.Remote, User: user, SPF: meta.SPF}
		if oopsDone {
			m.NoOOPS = store.OOPSOnePerMail
		}
		out, err := r.deliverLocal(ctx, raw, m, user != "" || rc == strings.ToLower(r.Postmaster()))
		if err != nil {
			return "", err
		}
		oopsDone = oopsDone || out.OOPS != nil && out.OOPS.Pending // pending: owed, queued by the owed-OOPS worker
	}
	if len(remote) > 0 {
		// Rcpt let these through only for an authenticated user with a
		// smarthost.
		if s := r.ARCSealers[domainOf(user)]; len(s) > 0 {
			var err error
			if raw, err = r.seal(ctx, raw, user, s[0]); err != nil {
				return "", &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 6, 0}, Message: "Cannot ARC-seal: " + err.Error()}
			}
		}
		a := message.Analyze(ctx, raw, message.AnalyzeOptions{})
		_, err := r.Store.Enqueue(ctx, &store.Outgoing{
			From: meta.MailFrom, Recipients: remote, Raw: raw,
			MessageID: a.Result.MessageID, Kind: "relay",
		})
		if err != nil {
			return "", errors.Join(ErrStore, err)
		}
		r.wake()
	}
	return fmt.Sprintf("OK delivered to %d local mailbox(es), %d recipient(s) queued", len(local), len(remote)), nil
}

// seal ARC-seals raw, submitted by the authenticated user, for its way
// out: the ARC-Authentication-Results say the submission was
// authenticated (RFC 8601 §2.7.4 auth) and carry the relay's own DKIM
// signature when it signed; an earlier chain is verified with the
// pipeline's resolver.
func (r *Relay) seal(ctx context.Context, raw []byte, user string, s dkim.Signer) ([]byte, error) {
	id := r.AuthServID
	if id == "" {
		id = "localhost"
	}
	ar := id + "; auth=pass smtp.auth=" + user
	if sig := r.Signers[domainOf(user)]; len(sig) > 0 {
		ar += "; dkim=pass header.d=" + sig[0].Domain + " header.s=" + sig[0].Selector
	}
	var res senderauth.Resolver = senderauth.TXTTable{Table: dkim.NewStaticResolver()}
	if r.Pipeline != nil && r.Pipeline.Sender != nil {
		res = r.Pipeline.Sender.Resolver
	}
	now := time.Now()
	if r.Now != nil {
		now = r.Now()
	}
	return senderauth.SealARC(ctx, res, raw, ar, s, now)
}

// checkLocalAuthor refuses mail that names a local address as its author
// without proof: only the relay itself can vouch for a
// local author, either because the mail came through submission with AUTH
// as that address (Deliver checks From == user there) or because it
// carries a passing DKIM signature aligned with the author's domain
// (RFC 7489 §3.1.1 relaxed alignment, each local domain taken as its own
// organizational domain: d= is the domain or a subdomain of it; the
// relay's own keys are the only ones that verify for it), or because the
// domain passes DMARC (an aligned SPF or DKIM pass; relayed mail from an
// SPF-authorised host of the domain). Every From
// address counts, so a second From field or address cannot hide a local
// one. The refusal is 550 5.7.1 at DATA, before any 250, so nothing
// accepted is lost and no courtesy OOPS can be owed to a forged local
// sender (DMARC's p=reject, RFC 7489 §6.3, for the relay's own domains).
func (r *Relay) checkLocalAuthor(ctx context.Context, raw []byte, meta Meta) error {
	var domains []string
	for _, a := range parse.FromAddresses(raw) {
		if r.Local(a) {
			domains = append(domains, domainOf(a))
		}
	}
	if len(domains) == 0 {
		return nil
	}
	var results []dkim.Result
	if r.Pipeline != nil && r.Pipeline.Verifier != nil {
		// An error means the header cannot be read (dkim.ErrUnreadable):
		// no signature vouches for the author, which is a refusal too.
		results, _ = r.Pipeline.Verifier.Verify(ctx, raw)
	}
	for _, d := range domains {
		if !alignedPass(results, d) && !r.dmarcPass(ctx, d, meta, results) {
			if r.Logger != nil {
				r.Logger.Info("relay: unauthenticated mail from a local address refused",
					"from_domain", d, "remote", meta.Remote, "mail_from", meta.MailFrom)
			}
			return ErrLocalAuthor
		}
	}
	return nil
}

// dmarcPass reports whether the local From domain d passes DMARC (RFC
// 7489: an aligned SPF or DKIM pass under d's published policy), which
// proves the author as well as the relay's own signature does.
func (r *Relay) dmarcPass(ctx context.Context, d string, meta Meta, results []dkim.Result) bool {
	p := r.Pipeline
	if p == nil || p.Sender == nil {
		return false
	}
	return senderauth.CheckDMARC(ctx, p.Sender.Resolver, d, meta.SPF, results, "").Result == senderauth.Pass
}

// alignedPass reports whether some result passes for domain or one of
// its subdomains.
func alignedPass(results []dkim.Result, domain string) bool {
	for _, res := range results {
		d := strings.ToLower(strings.TrimSuffix(res.Domain, "."))
		if res.Result == dkim.Pass && (d == domain || strings.HasSuffix(d, "."+domain)) {
			return true
		}
	}
	return false
}

// DeliverLocal ingests raw into the mailbox of the local address rcpt,
// creating the mailbox on first delivery. It is the outbound queue's local
// delivery: the queue holds only mail the operator sent (`envelopd send`,
// `reply`) and courtesy OOPS to verified senders, never a stranger's mail,
// which goes through Deliver and creates no mailbox.
func (r *Relay) DeliverLocal(ctx context.Context, raw []byte, mailFrom, rcpt, remote string) (store.Outcome, error) {
	rcpt = strings.ToLower(rcpt)
	return r.deliverLocal(ctx, raw, Meta{Source: "smtp", MailFrom: mailFrom, Rcpts: []string{rcpt}, Mailbox: rcpt, Remote: remote}, true)
}

// deliverLocal ingests raw into the mailbox meta.Mailbox, creating it
// first when create is set (mail of an authenticated local user; never
// for a stranger's mail).
func (r *Relay) deliverLocal(ctx context.Context, raw []byte, meta Meta, create bool) (store.Outcome, error) {
	meta.Mailbox = strings.ToLower(meta.Mailbox)
	if create {
		if _, err := r.Store.EnsureMailbox(ctx, meta.Mailbox); err != nil {
			return store.Outcome{}, errors.Join(ErrStore, err)
		}
	}
	// A courtesy OOPS the mail is owed is queued by the owed-OOPS
	// worker; the queue's commit wakes the queue worker.
	return r.Pipeline.Ingest(ctx, raw, meta)
}

// storeSent keeps the sender's copy (direction out) in its own mailbox,
// analysed like received mail, so its threads hold both directions.
func (r *Relay) storeSent(ctx context.Context, raw []byte, user string) error {
	now := time.Now()
	if r.Now != nil {
		now = r.Now()
	}
	a := message.Analyze(ctx, raw, message.AnalyzeOptions{Now: now})
	in := message.Incoming(a, raw, store.DirOut)
	in.Mailbox = user
	in.ReceivedAt = now.UTC()
	if _, err := r.Store.Ingest(ctx, in); err != nil {
		return errors.Join(ErrStore, err)
	}
	return nil
}

func (r *Relay) wake() {
	if r.Wake == nil {
		return
	}
	select {
	case r.Wake <- struct{}{}:
	default:
	}
}

// OOPS composes a courtesy OOPS from a local address and signs it with
// that domain's key; it has the shape of OOPSComposer.
func (r *Relay) OOPS(orig *parse.Result, p protocols.Problem, from string) ([]byte, error) {
	raw, err := mailout.ComposeOOPSFor(orig, p, from)
	if err != nil {
		return nil, err
	}
	return mailout.Sign(raw, r.Signers[domainOf(from)])
}

// Submission returns the Router of the submission port (RFC 6409): like
// the relay's, but every recipient needs an authenticated session.
func (r *Relay) Submission() Router { return submission{r} }

type submission struct{ *Relay }

func (s submission) Rcpt(user, from, to string) error {
	if user == "" {
		return smtp.ErrAuthRequired
	}
	return s.Relay.Rcpt(user, from, to)
}

// Sender returns the outbound queue's Sender in relay mode: local
// recipients get the message through DeliverLocal (a store failure is
// temporary, so the worker retries), the others go to next, the smarthost
// (nil: refused permanently).
func (r *Relay) Sender(next mailout.Sender) mailout.Sender { return relaySender{r, next} }

type relaySender struct {
	r    *Relay
	next mailout.Sender
}

func (s relaySender) Submit(ctx context.Context, from string, rcpts []string, raw []byte) []mailout.RcptResult {
	res := make([]mailout.RcptResult, len(rcpts))
	var remote []string
	var at []int
	for i, rc := range rcpts {
		res[i].Rcpt = rc
		if !s.r.Local(rc) {
			remote, at = append(remote, rc), append(at, i)
			continue
		}
		if _, err := s.r.DeliverLocal(ctx, raw, from, rc, "queue"); err != nil {
			res[i].Err = &mailout.SendError{Stage: "local", Err: err}
		}
	}
	if len(remote) == 0 {
		return res
	}
	if s.next == nil {
		for _, i := range at {
			res[i].Err = &mailout.SendError{Stage: "relay", Permanent: true, Code: 550, Enhanced: "5.7.1",
				Err: errors.New("no smarthost configured for non-local recipients")}
		}
		return res
	}
	for j, rr := range s.next.Submit(ctx, from, remote, raw) {
		if j < len(at) {
			res[at[j]].Err = rr.Err
		}
	}
	return res
}

// headerFrom returns the one From address of raw, lower case.
func headerFrom(raw []byte) (string, error) {
	var from []string
	eachHeader(raw, func(name, value string) bool {
		if strings.EqualFold(name, "From") {
			from = append(from, value)
		}
		return true
	})
	if len(from) != 1 {
		return "", fmt.Errorf("%d From fields", len(from))
	}
	l, err := mail.ParseAddressList(from[0])
	if err != nil || len(l) != 1 {
		return "", fmt.Errorf("From %q: not one address", from[0])
	}
	return strings.ToLower(l[0].Address), nil
}

func domainOf(addr string) string {
	i := strings.LastIndexByte(addr, '@')
	if i < 0 {
		return ""
	}
	return strings.ToLower(strings.TrimSuffix(addr[i+1:], "."))
}

// Postmaster is where RCPT TO:<postmaster> (no domain, RFC 5321 §4.5.1)
// goes in relay mode: the postmaster mailbox of the first local domain.
func (r *Relay) Postmaster() string {
	if len(r.Domains) == 0 {
		return "postmaster"
	}
	return "postmaster@" + r.Domains[0]
}
