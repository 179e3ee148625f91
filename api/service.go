package api

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/mail"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/envelopd/envelopd/domain"
	"github.com/envelopd/envelopd/mailout"
	"github.com/envelopd/envelopd/parse"
	"github.com/envelopd/envelopd/protocols/envelopay"
	"github.com/envelopd/envelopd/store"
)

// Store is what the service reads and writes: store.DB (SQLite or Postgres).
type Store interface {
	KeyStore
	SyncInboxes(ctx context.Context, max int) (int, error)
	CreateInbox(ctx context.Context, address, displayName, clientID string, mailbox bool) (store.Inbox, bool, error)
	InboxByAddress(ctx context.Context, address string) (store.Inbox, error)
	Inboxes(ctx context.Context, after string, limit int, desc bool, only []string) ([]store.Inbox, error)
	UpdateInbox(ctx context.Context, address, displayName string) error
	DeleteInbox(ctx context.Context, address string) error
	InboxMessages(ctx context.Context, q store.InboxQuery) ([]store.InboxMessage, error)
	InboxMessageByRef(ctx context.Context, inbox, ref string) (*store.InboxMessage, error)
	SetInboxLabels(ctx context.Context, inbox string, id int64, add, remove []string) ([]string, error)
	HideMessages(ctx context.Context, inbox, thread string, ids []int64) error
	InboxThreads(ctx context.Context, q store.InboxQuery) ([]store.ThreadRef, error)
	ThreadInboxes(ctx context.Context, thread string) ([]string, error)
	Message(ctx context.Context, id int64) (*store.Message, error)
	store.CheckedEnqueuer
	// Messages and WaitNew follow new commits (WaitMessage).
	Messages(ctx context.Context, f store.Filter) ([]store.Message, error)
	WaitNew(ctx context.Context, after int64) error
}

// Events is told what the service did (the seam for webhooks and the
// websocket; nil: nobody listens).
type Events interface {
	MessageSent(ctx context.Context, inbox string, queueID int64, messageID, threadID string)
}

// Config configures a Service.
type Config struct {
	Store Store
	// Relay is relay mode: inboxes are relay mailboxes at Domains, and
	// mail to a local inbox is delivered locally by the queue worker.
	Relay bool
	// Domains are the inbox domains; the first is the default of create.
	Domains []string
	// DomainService manages domains (/v0/domains; nil: 501).
	DomainService *domain.Service
	// Mailer returns the signing mailer for mail from domain (its Record
	// builds the stored copy).
	Mailer func(domain string) *mailout.Mailer
	// Wake, when set, is called after a message is queued (the relay's
	// worker delivers it at once).
	Wake   func()
	Events Events
	// Chains are the tokens and block explorers GET /v0/tokens serves
	// (nil: none).
	Chains *Chains
	// EventLog is what the websocket and webhooks follow (default: Store,
	// when it keeps one).
	EventLog EventLog
	// WebhookLimits bound each tenant's webhooks (zero fields: the
	// store's defaults, store.DefaultWebhookLimits).
	WebhookLimits store.WebhookLimits
	Logger        *slog.Logger
	Now           func() time.Time
	// EventRetention and IdempotencyRetention are how long Run keeps
	// the event log's events and the Idempotency-Key records (0:
	// forever), where the store can forget them (store.APILogPruner).
	EventRetention, IdempotencyRetention time.Duration
}

// Service is the query/command layer of the HTTP API over the store: one
// method per operation, taking the authenticated principal. Handlers only
// decode requests and encode answers; other front ends (a web inbox, an
// MCP server) can use the service as is.
type Service struct {
	cfg   Config
	dlKey []byte
}

// NewService returns a service; the download URL key is random per
// process.
func NewService(cfg Config) (*Service, error) {
	if cfg.Store == nil || cfg.Mailer == nil {
		return nil, errors.New("api: Config needs Store and Mailer")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	for i, d := range cfg.Domains {
		cfg.Domains[i] = strings.ToLower(strings.TrimSuffix(d, "."))
	}
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return nil, err
	}
	return &Service{cfg: cfg, dlKey: k}, nil
}

// syncPerRequest bounds the indexing a request does itself (0: none):
// every message committed before the request is indexed before it is
// read, so an answer never lags the store. Run indexes in the background,
// so that a backlog (a database from before the API) is mostly done
// before the first request.
const syncPerRequest = 0

// sync indexes new mail before a read; a failure is logged, the read goes
// on with the index as it is.
func (s *Service) sync(ctx context.Context) {
	if _, err := s.cfg.Store.SyncInboxes(ctx, syncPerRequest); err != nil && ctx.Err() == nil {
		s.cfg.Logger.Warn("api: inbox index sync", "err", err)
	}
}

// pruneInterval is how often Run forgets the API's logs past their
// retention (a few bounded writes when there is something to forget).
const pruneInterval = time.Minute

// Run keeps the inbox index up to date in the background (every
// interval) until ctx ends, so that no request waits for a backlog, and
// sends the scheduled drafts that fall due (SendDueDrafts).
func (s *Service) Run(ctx context.Context, interval time.Duration) error {
	if interval <= 0 {
		interval = time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	var pruned time.Time
	for {
		n, err := s.cfg.Store.SyncInboxes(ctx, 0)
		if err != nil && ctx.Err() == nil {
			s.cfg.Logger.Warn("api: inbox index sync", "err", err)
		} else if n > 10000 {
			s.cfg.Logger.Info("api: inbox index caught up", "messages", n)
		}
		if _, err := s.SendDueDrafts(ctx); err != nil && ctx.Err() == nil {
			s.cfg.Logger.Warn("api: scheduled drafts", "err", err)
		}
		if p, ok := s.cfg.Store.(store.APILogPruner); ok && (s.cfg.EventRetention > 0 || s.cfg.IdempotencyRetention > 0) &&
			time.Since(pruned) >= pruneInterval {
			pruned = time.Now()
			if _, err := p.PruneAPILogs(ctx, s.cfg.Now(), s.cfg.EventRetention, s.cfg.IdempotencyRetention); err != nil && ctx.Err() == nil {
				s.cfg.Logger.Warn("api: log retention", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// inbox returns the inbox if p may see it and it exists; 404 otherwise
// (a scoped key learns nothing of other inboxes).
func (s *Service) inbox(ctx context.Context, p *Principal, address string) (store.Inbox, error) {
	address = strings.ToLower(strings.TrimSpace(address))
	if !p.Allowed(address) {
		return store.Inbox{}, notFound("inbox %s not found", address)
	}
	b, err := s.cfg.Store.InboxByAddress(ctx, address)
	if errors.Is(err, store.ErrNotFound) {
		return store.Inbox{}, notFound("inbox %s not found", address)
	}
	return b, err
}

// Lists.

// ListInboxes is {count, limit, next_page_token, inboxes}.
type ListInboxes struct {
	Page
	Inboxes []Inbox `json:"inboxes"`
}

// ListMessages is {count, limit, next_page_token, messages}.
type ListMessages struct {
	Page
	Messages []Message `json:"messages"`
}

// ListThreads is {count, limit, next_page_token, threads}.
type ListThreads struct {
	Page
	Threads []Thread `json:"threads"`
}

// CreateInboxRequest is the SDK's CreateInboxRequest.
type CreateInboxRequest struct {
	Username    string          `json:"username"`
	Domain      string          `json:"domain"`
	DisplayName string          `json:"display_name"`
	ClientID    string          `json:"client_id"`
	Metadata    json.RawMessage `json:"metadata"`
}

var usernameRE = regexp.MustCompile(`^[a-z0-9](?:[a-z0-9._+-]{0,62}[a-z0-9])?$`)
var domainRE = regexp.MustCompile(`^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?)*$`)

// CreateInbox creates an inbox (idempotent per client_id). It reports
// whether it created one.
func (s *Service) CreateInbox(ctx context.Context, p *Principal, req CreateInboxRequest) (Inbox, bool, error) {
	user := strings.ToLower(strings.TrimSpace(req.Username))
	if user == "" {
		var b [5]byte
		_, _ = rand.Read(b[:])
		user = "inbox-" + strings.ToLower(base64.RawURLEncoding.EncodeToString(b[:]))
		user = strings.ReplaceAll(strings.ReplaceAll(user, "_", "x"), "-x", "-")
	}
	if !usernameRE.MatchString(user) {
		return Inbox{}, false, badField("username", "want 1 to 64 of a-z, 0-9, . _ + - (not at either end)")
	}
	dom := strings.ToLower(strings.TrimSuffix(strings.TrimSpace(req.Domain), "."))
	if dom == "" {
		if len(s.cfg.Domains) == 0 {
			return Inbox{}, false, badField("domain", "required: this server has no default domain")
		}
		dom = s.cfg.Domains[0]
	}
	if !domainRE.MatchString(dom) {
		return Inbox{}, false, badField("domain", "not a domain name")
	}
	if s.cfg.Relay && !slices.Contains(s.cfg.Domains, dom) {
		return Inbox{}, false, badField("domain", "not a local domain of this relay (%s)", strings.Join(s.cfg.Domains, ", "))
	}
	if len(req.DisplayName) > 200 || strings.ContainsAny(req.DisplayName, "\r\n") {
		return Inbox{}, false, badField("display_name", "at most 200 characters on one line")
	}
	if len(req.ClientID) > 200 {
		return Inbox{}, false, badField("client_id", "at most 200 characters")
	}
	addr := user + "@" + dom
	if !p.Allowed(addr) {
		return Inbox{}, false, notFound("inbox %s not found", addr)
	}
	s.sync(ctx)
	b, created, err := s.cfg.Store.CreateInbox(ctx, addr, req.DisplayName, req.ClientID, s.cfg.Relay)
	if err != nil {
		// A client_id naming an inbox p may not see is answered as
		// that inbox would be: 404, naming nothing.
		var taken *store.ClientIDTaken
		switch {
		case errors.As(err, &taken) && !p.Allowed(taken.Address):
			return Inbox{}, false, notFound("client_id %q not found", req.ClientID)
		case errors.As(err, &taken):
			return Inbox{}, false, &Error{Status: http.StatusConflict, Name: "AlreadyExistsError",
				Message: fmt.Sprintf("client_id %q names inbox %s", req.ClientID, taken.Address)}
		case errors.Is(err, store.ErrConflict):
			return Inbox{}, false, &Error{Status: http.StatusConflict, Name: "AlreadyExistsError", Message: fmt.Sprintf("inbox %s exists", addr)}
		}
		return Inbox{}, false, err
	}
	return inboxObject(b), created, nil
}

// ListInboxes lists the inboxes p may see, by address.
func (s *Service) ListInboxes(ctx context.Context, p *Principal, lp ListParams) (ListInboxes, error) {
	s.sync(ctx)
	// By address, A to Z (ascending=false: Z to A is not offered: an
	// inbox list has no time order).
	bs, err := s.cfg.Store.Inboxes(ctx, lp.Cursor.Inbox, lp.Limit+1, false, p.Inboxes)
	if err != nil {
		return ListInboxes{}, err
	}
	out := ListInboxes{Page: Page{Limit: lp.Limit}, Inboxes: []Inbox{}}
	bs, out.NextPageToken = cutPage(bs, lp, func(b store.Inbox) Cursor { return Cursor{Inbox: b.Address, Asc: lp.Ascending} })
	for _, b := range bs {
		out.Inboxes = append(out.Inboxes, inboxObject(b))
	}
	out.Count = len(out.Inboxes)
	return out, nil
}

// GetInbox returns one inbox.
func (s *Service) GetInbox(ctx context.Context, p *Principal, address string) (Inbox, error) {
	s.sync(ctx)
	b, err := s.inbox(ctx, p, address)
	if err != nil {
		return Inbox{}, err
	}
	return inboxObject(b), nil
}

// UpdateInbox sets an inbox's display name.
func (s *Service) UpdateInbox(ctx context.Context, p *Principal, address string, displayName *string) (Inbox, error) {
	b, err := s.inbox(ctx, p, address)
	if err != nil {
		return Inbox{}, err
	}
	if displayName != nil {
		if len(*displayName) > 200 || strings.ContainsAny(*displayName, "\r\n") {
			return Inbox{}, badField("display_name", "at most 200 characters on one line")
		}
		if err := s.cfg.Store.UpdateInbox(ctx, b.Address, *displayName); err != nil {
			return Inbox{}, err
		}
	}
	return s.GetInbox(ctx, p, b.Address)
}

// DeleteInbox hides an inbox (its stored mail stays).
func (s *Service) DeleteInbox(ctx context.Context, p *Principal, address string) error {
	s.sync(ctx)
	b, err := s.inbox(ctx, p, address)
	if err != nil {
		return err
	}
	return s.cfg.Store.DeleteInbox(ctx, b.Address)
}

func (lp ListParams) query() store.InboxQuery {
	return store.InboxQuery{Labels: lp.Labels, Before: lp.Before, After: lp.After, Ascending: lp.Ascending,
		CursorID: lp.Cursor.ID, CursorInbox: lp.Cursor.Inbox, Limit: lp.Limit + 1,
		Type: lp.Type, Sender: lp.Sender, ErrorCode: lp.Error, Search: lp.Search}
}

// ListMessages lists an inbox's messages, newest first unless ascending.
func (s *Service) ListMessages(ctx context.Context, p *Principal, inbox string, lp ListParams) (ListMessages, error) {
	s.sync(ctx)
	b, err := s.inbox(ctx, p, inbox)
	if err != nil {
		return ListMessages{}, err
	}
	q := lp.query()
	q.Inbox = b.Address
	ms, err := s.cfg.Store.InboxMessages(ctx, q)
	if err != nil {
		return ListMessages{}, err
	}
	out := ListMessages{Page: Page{Limit: lp.Limit}}
	ms, out.NextPageToken = cutPage(ms, lp, func(m store.InboxMessage) Cursor { return Cursor{ID: m.ID, Asc: lp.Ascending} })
	if out.Messages, err = messageItems(ms); err != nil {
		return ListMessages{}, err
	}
	out.Count = len(out.Messages)
	return out, nil
}

// message finds a message of an inbox p may see, with its raw bytes.
func (s *Service) message(ctx context.Context, p *Principal, inbox, ref string) (*store.InboxMessage, error) {
	s.sync(ctx)
	b, err := s.inbox(ctx, p, inbox)
	if err != nil {
		return nil, err
	}
	if strings.Contains(ref, "@") {
		ref = parse.NormalizeMessageID(ref) // the store keeps them so (domain lower case)
	}
	im, err := s.cfg.Store.InboxMessageByRef(ctx, b.Address, ref)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound("message %s not found in %s", ref, b.Address)
	}
	if err != nil {
		return nil, err
	}
	m, err := s.cfg.Store.Message(ctx, im.ID)
	if err != nil {
		return nil, err
	}
	im.Message = *m
	return im, nil
}

// GetMessage returns one message with its text, html, headers and
// attachments.
func (s *Service) GetMessage(ctx context.Context, p *Principal, inbox, ref string) (Message, error) {
	im, err := s.message(ctx, p, inbox, ref)
	if err != nil {
		return Message{}, err
	}
	return messageObject(im, true)
}

// RawMessage is the SDK's RawMessageResponse.
type RawMessage struct {
	MessageID   string    `json:"message_id"`
	Size        int       `json:"size"`
	DownloadURL string    `json:"download_url"`
	ExpiresAt   time.Time `json:"expires_at"`
}

// downloadTTL is how long a download URL works.
const downloadTTL = time.Hour

// GetRaw returns the stored message (exact bytes in Raw) and its download
// URL path (/v0/download/TOKEN, to be made absolute by the caller).
func (s *Service) GetRaw(ctx context.Context, p *Principal, inbox, ref string) (*store.Message, RawMessage, error) {
	im, err := s.message(ctx, p, inbox, ref)
	if err != nil {
		return nil, RawMessage{}, err
	}
	exp := s.cfg.Now().Add(downloadTTL).Truncate(time.Second)
	tok := signDownload(s.dlKey, download{Kind: "raw", Row: im.ID, Expires: exp, Key: p.KeyID})
	return &im.Message, RawMessage{MessageID: wireMessageID(&im.Message), Size: len(im.Raw),
		DownloadURL: "/v0/download/" + tok, ExpiresAt: exp.UTC()}, nil
}

// GetAttachment returns an attachment of a message (or of any message of
// a thread, when thread is set and ref is "") with its download URL path.
func (s *Service) GetAttachment(ctx context.Context, p *Principal, inbox, ref, attID string) (Attachment, []byte, error) {
	row, n, ok := parseAttachmentID(attID)
	if !ok {
		return Attachment{}, nil, notFound("attachment %s not found", attID)
	}
	var im *store.InboxMessage
	var err error
	if ref == "" {
		im, err = s.message(ctx, p, inbox, fmt.Sprint(row))
	} else {
		im, err = s.message(ctx, p, inbox, ref)
	}
	if err != nil {
		return Attachment{}, nil, err
	}
	if im.ID != row {
		return Attachment{}, nil, notFound("attachment %s not found", attID)
	}
	c := readContent(im.Raw)
	if n >= len(c.attachments) {
		return Attachment{}, nil, notFound("attachment %s not found", attID)
	}
	a := c.attachments[n]
	exp := s.cfg.Now().Add(downloadTTL).Truncate(time.Second).UTC()
	tok := signDownload(s.dlKey, download{Kind: "att", Row: row, Part: n, Expires: exp, Key: p.KeyID})
	return Attachment{AttachmentID: attID, Filename: a.filename, Size: len(a.data), ContentType: a.ctype,
		ContentDisposition: a.disposition, ContentID: a.cid, DownloadURL: "/v0/download/" + tok, ExpiresAt: &exp}, a.data, nil
}

// Download serves a download token: the exact stored bytes of a message,
// or an attachment's decoded content, and its content type. The token is
// refused once the key it was made for is revoked.
func (s *Service) Download(ctx context.Context, tok string) ([]byte, string, string, error) {
	d, ok := parseDownload(s.dlKey, tok, s.cfg.Now())
	if !ok {
		return nil, "", "", notFound("download link not found or expired")
	}
	// A URL made for a key works as long as the key does.
	if ks, isKS := s.cfg.Store.(KeyStore); isKS && d.Key != "" {
		k, err := ks.APIKeyByID(ctx, d.Key)
		if errors.Is(err, store.ErrNotFound) || err == nil && k.RevokedAt != nil {
			return nil, "", "", notFound("download link not found or expired")
		}
		if err != nil {
			return nil, "", "", err
		}
	}
	if d.Kind == "drf" {
		return s.draftDownload(ctx, d)
	}
	m, err := s.cfg.Store.Message(ctx, d.Row)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, "", "", notFound("download link not found or expired")
		}
		return nil, "", "", err
	}
	if d.Kind == "raw" {
		return m.Raw, "message/rfc822", "", nil
	}
	c := readContent(m.Raw)
	if d.Part >= len(c.attachments) {
		return nil, "", "", notFound("download link not found or expired")
	}
	a := c.attachments[d.Part]
	ct := a.ctype
	if ct == "" {
		ct = "application/octet-stream"
	}
	return a.data, ct, a.filename, nil
}

// UpdateLabels is the SDK's UpdateMessageRequest / UpdateThreadRequest.
type UpdateLabels struct {
	AddLabels    stringList `json:"add_labels"`
	RemoveLabels stringList `json:"remove_labels"`
}

// UpdateMessageResult is the SDK's UpdateMessageResponse.
type UpdateMessageResult struct {
	MessageID string   `json:"message_id"`
	Labels    []string `json:"labels"`
}

// reservedLabels are computed, not set.
var reservedLabels = []string{"received", "sent", store.StatusAccepted, store.StatusQuarantined, store.StatusDuplicate, store.LabelBlocked}

func checkLabels(u UpdateLabels) error {
	for _, l := range append(slices.Clone(u.AddLabels), u.RemoveLabels...) {
		if slices.Contains(reservedLabels, l) {
			return badField("add_labels", "label %q is set by envelopd and cannot be changed", l)
		}
		if l == "" || strings.ContainsAny(l, " \t\r\n\x00") || len(l) > 200 {
			return badField("add_labels", "bad label %q", l)
		}
	}
	return nil
}

// UpdateMessage adds and removes user labels.
func (s *Service) UpdateMessage(ctx context.Context, p *Principal, inbox, ref string, u UpdateLabels) (UpdateMessageResult, error) {
	if err := checkLabels(u); err != nil {
		return UpdateMessageResult{}, err
	}
	im, err := s.message(ctx, p, inbox, ref)
	if err != nil {
		return UpdateMessageResult{}, err
	}
	ls, err := s.cfg.Store.SetInboxLabels(ctx, im.Inbox, im.ID, u.AddLabels, u.RemoveLabels)
	if err != nil {
		return UpdateMessageResult{}, err
	}
	im.Labels = ls
	return UpdateMessageResult{MessageID: wireMessageID(&im.Message), Labels: labelsOf(im)}, nil
}

// DeleteMessage removes a message from the inbox (the stored message and
// its dedup facts stay).
func (s *Service) DeleteMessage(ctx context.Context, p *Principal, inbox, ref string) error {
	im, err := s.message(ctx, p, inbox, ref)
	if err != nil {
		return err
	}
	return s.cfg.Store.HideMessages(ctx, im.Inbox, "", []int64{im.ID})
}

// Threads.

// threadsStore reads the messages of a page of threads in one query.
type threadsStore interface {
	ThreadsMessages(ctx context.Context, refs []store.ThreadRef) ([]store.InboxMessage, error)
}

func (s *Service) threadItems(ctx context.Context, refs []store.ThreadRef) ([]Thread, error) {
	out := []Thread{}
	if ts, ok := s.cfg.Store.(threadsStore); ok && len(refs) > 0 {
		ms, err := ts.ThreadsMessages(ctx, refs)
		if err != nil {
			return nil, err
		}
		type key struct{ inbox, thread string }
		by := map[key][]store.InboxMessage{}
		for _, m := range ms {
			k := key{m.Inbox, m.ThreadID}
			by[k] = append(by[k], m)
		}
		for _, r := range refs {
			if ms := by[key{r.Inbox, r.ThreadID}]; len(ms) > 0 {
				out = append(out, threadObject(r.Inbox, r.ThreadID, ms))
			}
		}
		return out, nil
	}
	for _, r := range refs {
		ms, err := s.cfg.Store.InboxMessages(ctx, store.InboxQuery{Inbox: r.Inbox, ThreadID: r.ThreadID, Ascending: true})
		if err != nil {
			return nil, err
		}
		if len(ms) == 0 {
			continue
		}
		out = append(out, threadObject(r.Inbox, r.ThreadID, ms))
	}
	return out, nil
}

// ListThreads lists the threads of an inbox, or of every inbox p may see
// when inbox is "", by last message (newest first unless ascending).
func (s *Service) ListThreads(ctx context.Context, p *Principal, inbox string, lp ListParams) (ListThreads, error) {
	s.sync(ctx)
	q := lp.query()
	if inbox != "" {
		b, err := s.inbox(ctx, p, inbox)
		if err != nil {
			return ListThreads{}, err
		}
		q.Inbox = b.Address
	} else {
		q.Inboxes = p.Inboxes
	}
	refs, err := s.cfg.Store.InboxThreads(ctx, q)
	if err != nil {
		return ListThreads{}, err
	}
	out := ListThreads{Page: Page{Limit: lp.Limit}}
	refs, out.NextPageToken = cutPage(refs, lp, func(last store.ThreadRef) Cursor {
		return Cursor{ID: last.LastID, Inbox: last.Inbox, Asc: lp.Ascending}
	})
	if out.Threads, err = s.threadItems(ctx, refs); err != nil {
		return ListThreads{}, err
	}
	out.Count = len(out.Threads)
	return out, nil
}

// threadInbox picks the inbox of thread: inbox when given (p must see
// it), else the first inbox p may see that shows the thread.
func (s *Service) threadInbox(ctx context.Context, p *Principal, inbox, thread string) (string, error) {
	s.sync(ctx)
	if inbox != "" {
		b, err := s.inbox(ctx, p, inbox)
		if err != nil {
			return "", err
		}
		return b.Address, nil
	}
	bs, err := s.cfg.Store.ThreadInboxes(ctx, thread)
	if err != nil {
		return "", err
	}
	for _, b := range bs {
		if p.Allowed(b) {
			return b, nil
		}
	}
	return "", notFound("thread %s not found", thread)
}

// GetThread returns a thread with its messages (oldest first, paged by
// limit and page_token).
func (s *Service) GetThread(ctx context.Context, p *Principal, inbox, thread string, lp ListParams) (Thread, error) {
	b, err := s.threadInbox(ctx, p, inbox, thread)
	if err != nil {
		return Thread{}, err
	}
	all, err := s.cfg.Store.InboxMessages(ctx, store.InboxQuery{Inbox: b, ThreadID: thread, Ascending: true})
	if err != nil {
		return Thread{}, err
	}
	if len(all) == 0 {
		return Thread{}, notFound("thread %s not found", thread)
	}
	t := threadObject(b, thread, all)
	q := store.InboxQuery{Inbox: b, ThreadID: thread, Ascending: true, CursorID: lp.Cursor.ID, Limit: lp.Limit + 1}
	page, err := s.cfg.Store.InboxMessages(ctx, q)
	if err != nil {
		return Thread{}, err
	}
	page, next := cutPage(page, lp, func(m store.InboxMessage) Cursor { return Cursor{ID: m.ID} })
	t.NextPageToken = next
	t.Messages = []Message{}
	for i := range page {
		m, err := s.cfg.Store.Message(ctx, page[i].ID)
		if err != nil {
			return Thread{}, err
		}
		page[i].Message = *m
		o, err := messageObject(&page[i], true)
		if err != nil {
			return Thread{}, err
		}
		t.Messages = append(t.Messages, o)
	}
	n, l := len(t.Messages), lp.Limit
	t.Count, t.Limit = &n, &l
	return t, nil
}

// UpdateThread adds and removes user labels on every message of a thread.
func (s *Service) UpdateThread(ctx context.Context, p *Principal, inbox, thread string, u UpdateLabels) (map[string]any, error) {
	if err := checkLabels(u); err != nil {
		return nil, err
	}
	b, err := s.threadInbox(ctx, p, inbox, thread)
	if err != nil {
		return nil, err
	}
	ms, err := s.cfg.Store.InboxMessages(ctx, store.InboxQuery{Inbox: b, ThreadID: thread, Ascending: true})
	if err != nil {
		return nil, err
	}
	if len(ms) == 0 {
		return nil, notFound("thread %s not found", thread)
	}
	for i := range ms {
		if ms[i].Labels, err = s.cfg.Store.SetInboxLabels(ctx, b, ms[i].ID, u.AddLabels, u.RemoveLabels); err != nil {
			return nil, err
		}
	}
	return map[string]any{"thread_id": thread, "labels": threadObject(b, thread, ms).Labels}, nil
}

// DeleteThread removes a thread from an inbox (stored mail stays).
func (s *Service) DeleteThread(ctx context.Context, p *Principal, inbox, thread string) error {
	b, err := s.threadInbox(ctx, p, inbox, thread)
	if err != nil {
		return err
	}
	if err := s.cfg.Store.HideMessages(ctx, b, thread, nil); errors.Is(err, store.ErrNotFound) {
		return notFound("thread %s not found", thread)
	} else if err != nil {
		return err
	}
	return nil
}

// Sending.

// SendRequest is the SDK's SendMessageRequest (and, with ReplyAll, its
// ReplyToMessageRequest and ReplyAllMessageRequest), plus envelopd's
// force (send an invalid Envelopay message anyway, as the CLI's --force)
// and subject on replies (the Envelopay reference's thread replies).
type SendRequest struct {
	Labels      stringList        `json:"labels"`
	ReplyTo     stringList        `json:"reply_to"`
	To          stringList        `json:"to"`
	Cc          stringList        `json:"cc"`
	Bcc         stringList        `json:"bcc"`
	ReplyAll    bool              `json:"reply_all"`
	Subject     *string           `json:"subject"`
	Text        string            `json:"text"`
	HTML        string            `json:"html"`
	Attachments []SendAttachment  `json:"attachments"`
	Headers     map[string]string `json:"headers"`
	TrackOpens  bool              `json:"track_opens"`
	Force       bool              `json:"force"`
}

// SendAttachment is the SDK's SendAttachment (content base64; url is not
// fetched).
type SendAttachment struct {
	Filename           string `json:"filename"`
	ContentType        string `json:"content_type"`
	ContentDisposition string `json:"content_disposition"`
	ContentID          string `json:"content_id"`
	Content            string `json:"content"`
	URL                string `json:"url"`
}

// SendResult is the SDK's SendMessageResponse, plus envelopd's queue id
// and the Envelopay outcome of the stored copy.
type SendResult struct {
	MessageID string `json:"message_id"`
	ThreadID  string `json:"thread_id"`
	QueueID   int64  `json:"queue_id"`
	// Envelopay: type, status and problems of the sent copy.
	Envelopay *SentEnvelopay `json:"envelopay,omitempty"`
}

// SentEnvelopay is the verdict on a sent Envelopay message.
type SentEnvelopay struct {
	Type     string    `json:"type"`
	ID       string    `json:"id"`
	Status   string    `json:"status"`
	Errors   []Problem `json:"errors"`
	Warnings []Problem `json:"warnings"`
	Forced   bool      `json:"forced"`
}

func addrs(field string, l []string) ([]*mail.Address, error) {
	var out []*mail.Address
	for _, s := range l {
		a, err := mail.ParseAddress(s)
		if err != nil || !strings.Contains(a.Address, "@") {
			return nil, badField(field, "bad address %q", s)
		}
		out = append(out, a)
	}
	return out, nil
}

// envelopaySubject derives a subject from text holding an Envelopay JSON
// body with a known type: "TYPE" or "TYPE | note" (envelopay-v0.2.0
// "Protocol"). A first line written the Envelopay reference's way
// ("TYPE | note", then the JSON; parse.SubjectLine) is the subject as
// written. ok is false for other text.
func envelopaySubject(text string) (string, bool) {
	if ls, _, ok := parse.SubjectLine([]byte(text)); ok {
		if ls.Note == "" {
			return ls.Keyword, true
		}
		return ls.Keyword + " | " + strings.Join(strings.Fields(ls.Note), " "), true
	}
	j, err := parse.FindJSON([]byte(text))
	if err != nil || len(j) == 0 {
		return "", false
	}
	var b struct {
		Type string `json:"type"`
		Note string `json:"note"`
	}
	if json.Unmarshal(j, &b) != nil || !envelopay.IsType(strings.ToLower(b.Type)) {
		return "", false
	}
	s := strings.ToUpper(b.Type)
	if n := strings.Join(strings.Fields(b.Note), " "); n != "" {
		s += " | " + n
	}
	return s, true
}

// maxRecipients bounds one message's recipients.
const maxRecipients = 100

// compose builds the Mail of a request from inbox b.
func (s *Service) compose(b store.Inbox, req *SendRequest) (mailout.Mail, error) {
	from := &mail.Address{Name: b.DisplayName, Address: b.Address}
	m := mailout.Mail{From: from, Text: req.Text, HTML: req.HTML}
	var err error
	if m.To, err = addrs("to", req.To); err != nil {
		return m, err
	}
	if m.Cc, err = addrs("cc", req.Cc); err != nil {
		return m, err
	}
	if m.Bcc, err = addrs("bcc", req.Bcc); err != nil {
		return m, err
	}
	if m.ReplyTo, err = addrs("reply_to", req.ReplyTo); err != nil {
		return m, err
	}
	if len(m.To)+len(m.Cc)+len(m.Bcc) == 0 {
		return m, badField("to", "at least one recipient is required")
	}
	if len(m.To)+len(m.Cc)+len(m.Bcc) > maxRecipients {
		return m, badField("to", "at most %d recipients", maxRecipients)
	}
	if req.Subject != nil {
		m.Subject = *req.Subject
	}
	keys := make([]string, 0, len(req.Headers))
	for k := range req.Headers {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := req.Headers[k]
		switch strings.ToLower(k) {
		case "subject":
			if req.Subject == nil {
				m.Subject = v
			}
		case "in-reply-to":
			m.InReplyTo = v
		case "references":
			m.References = strings.Fields(v)
		default:
			if mailout.ReservedHeader(k) || !validHeaderName(k) || strings.ContainsAny(v, "\r\n") {
				return m, badField("headers", "header %q may not be set", k)
			}
			m.Headers = append(m.Headers, [2]string{k, v})
		}
	}
	for i, a := range req.Attachments {
		data, err := a.decode(i)
		if err != nil {
			return m, err
		}
		m.Attachments = append(m.Attachments, mailout.Attachment{Filename: a.Filename, ContentType: a.ContentType, Data: data})
	}
	return m, nil
}

// decode checks the i-th attachment of a send or a draft and returns its
// content.
func (a SendAttachment) decode(i int) ([]byte, error) {
	if a.URL != "" {
		return nil, badField(fmt.Sprintf("attachments[%d].url", i), "attachments by URL are not fetched; give content (base64)")
	}
	data, err := base64.StdEncoding.DecodeString(a.Content)
	if err != nil {
		return nil, badField(fmt.Sprintf("attachments[%d].content", i), "not base64")
	}
	if strings.ContainsAny(a.Filename+a.ContentType+a.ContentDisposition+a.ContentID, "\r\n") {
		return nil, badField(fmt.Sprintf("attachments[%d]", i), "bad filename, content_type, content_disposition or content_id")
	}
	return data, nil
}

func validHeaderName(k string) bool {
	if k == "" || len(k) > 76 {
		return false
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; c <= ' ' || c > '~' || c == ':' {
			return false
		}
	}
	return true
}

// Send sends a new message from inbox.
func (s *Service) Send(ctx context.Context, p *Principal, inbox string, req SendRequest) (SendResult, error) {
	s.sync(ctx)
	b, err := s.inbox(ctx, p, inbox)
	if err != nil {
		return SendResult{}, err
	}
	m, err := s.composeSubject(b, &req, func() string {
		subj, _ := envelopaySubject(req.Text)
		return subj
	})
	if err != nil {
		return SendResult{}, err
	}
	return s.queue(ctx, b, m, req, "send")
}

// composeSubject composes req from b (compose) and, when neither gives a
// subject, sets the one subject returns.
func (s *Service) composeSubject(b store.Inbox, req *SendRequest, subject func() string) (mailout.Mail, error) {
	m, err := s.compose(b, req)
	if err == nil && req.Subject == nil && m.Subject == "" {
		m.Subject = subject()
	}
	return m, err
}

// answered is the stored message ref of inbox that a reply or forward
// answers, and its inbox, which sends the answer.
func (s *Service) answered(ctx context.Context, p *Principal, inbox, ref string) (*store.InboxMessage, store.Inbox, error) {
	orig, err := s.message(ctx, p, inbox, ref)
	if err != nil {
		return nil, store.Inbox{}, err
	}
	b, err := s.inbox(ctx, p, orig.Inbox)
	return orig, b, err
}

// Reply answers a stored message: to its sender (Reply-To first), or with
// replyAll also to its other recipients; threaded by In-Reply-To and
// References (RFC 5322 §3.6.4). The subject is the request's, else one
// derived from an Envelopay body in text, else "Re: " and the original's.
func (s *Service) Reply(ctx context.Context, p *Principal, inbox, ref string, req SendRequest, replyAll bool) (SendResult, error) {
	orig, b, err := s.answered(ctx, p, inbox, ref)
	if err != nil {
		return SendResult{}, err
	}
	o, err := messageObject(orig, true)
	if err != nil {
		return SendResult{}, err
	}
	if len(req.To) == 0 {
		to := o.ReplyTo
		if len(to) == 0 {
			to = []string{o.From}
		}
		if orig.Direction == store.DirOut {
			to = o.To // replying to our own message goes to its recipients
		}
		req.To = to
		if replyAll || req.ReplyAll {
			for _, a := range append(slices.Clone(o.To), o.Cc...) {
				if !strings.EqualFold(a, b.Address) && !slices.Contains(req.To, a) {
					req.Cc = append(req.Cc, a)
				}
			}
		}
	}
	m, err := s.composeSubject(b, &req, func() string {
		if subj, ok := envelopaySubject(req.Text); ok {
			return subj
		}
		if strings.HasPrefix(strings.ToLower(o.Subject), "re:") {
			return o.Subject
		}
		return "Re: " + o.Subject
	})
	if err != nil {
		return SendResult{}, err
	}
	if m.InReplyTo == "" {
		m.InReplyTo = orig.MessageID
	}
	if len(m.References) == 0 && orig.MessageID != "" {
		m.References = append(slices.Clone(o.References), "<"+orig.MessageID+">")
	}
	return s.queue(ctx, b, m, req, "send")
}

// Forward sends a stored message on, attached whole (message/rfc822).
func (s *Service) Forward(ctx context.Context, p *Principal, inbox, ref string, req SendRequest) (SendResult, error) {
	orig, b, err := s.answered(ctx, p, inbox, ref)
	if err != nil {
		return SendResult{}, err
	}
	m, err := s.composeSubject(b, &req, func() string { return "Fwd: " + decodeSubject(orig.Subject) })
	if err != nil {
		return SendResult{}, err
	}
	m.Attachments = append(m.Attachments, mailout.Attachment{Filename: "forwarded.eml", ContentType: "message/rfc822", Data: orig.Raw})
	return s.queue(ctx, b, m, req, "send")
}

// queue signs m and queues it durably with its stored copy in its thread,
// the copy checked against the ingest rules with the thread's stored state
// in the same transaction (store.EnqueueChecked). An Envelopay message
// with errors is refused (400 naming the codes) unless req.Force.
func (s *Service) queue(ctx context.Context, b store.Inbox, m mailout.Mail, req SendRequest, kind string) (SendResult, error) {
	_, dom, _ := strings.Cut(b.Address, "@")
	if id := idemMessageIDFrom(ctx); id != "" {
		m.MessageID = id + "@" + dom // Idempotency-Key: the queue is unique per Message-ID
	}
	out, err := s.cfg.Mailer(dom).PrepareMail(m, kind)
	if err != nil {
		return SendResult{}, err
	}
	if err := s.checkSendLists(ctx, b.Address, out.Recipients); err != nil {
		s.logRejected(ctx, b.Address, out, err)
		return SendResult{}, err
	}
	res := SendResult{MessageID: "<" + out.MessageID + ">"}
	if out.Copy != nil && s.cfg.Relay {
		out.Copy.Mailbox = b.Address
	}
	q, err := s.cfg.Store.EnqueueChecked(ctx, out, req.Force)
	if refused, ok := errors.AsType[*store.RefusedError](err); ok {
		oc := refused.Outcome
		codes := []string{}
		for _, p := range oc.Errors {
			codes = append(codes, string(p.Code))
		}
		return SendResult{}, validation("invalid Envelopay message, not sent ("+strings.Join(codes, ", ")+
			"); fix it, or set force: true to send it anyway", problems(oc.Errors))
	}
	if err != nil {
		return SendResult{}, err
	}
	id := q.ID
	if out.Copy != nil {
		oc := q.Copy
		res.ThreadID = oc.ThreadID
		if out.Copy.Type != "" {
			res.Envelopay = &SentEnvelopay{Type: out.Copy.Type, ID: out.Copy.EnvelopayID, Status: oc.Status,
				Errors: problems(oc.Errors), Warnings: problems(oc.Warnings), Forced: len(oc.Errors) > 0}
		}
	}
	res.QueueID = id
	if s.cfg.Wake != nil {
		s.cfg.Wake()
	}
	if len(req.Labels) > 0 && out.Copy != nil {
		s.sync(ctx) // the copy must be in the index to be labelled; reads sync themselves
		if err := checkLabels(UpdateLabels{AddLabels: req.Labels}); err == nil {
			if im, err := s.cfg.Store.InboxMessageByRef(ctx, b.Address, out.MessageID); err == nil {
				_, _ = s.cfg.Store.SetInboxLabels(ctx, b.Address, im.ID, req.Labels, nil)
			}
		}
	}
	if s.cfg.Events != nil {
		s.cfg.Events.MessageSent(ctx, b.Address, id, res.MessageID, res.ThreadID)
	}
	s.cfg.Logger.Info("api: message queued", "inbox", b.Address, "queue_id", id, "message_id", out.MessageID)
	return res, nil
}

// stringList is a JSON string or array of strings (the SDK's Addresses
// and label unions).
type stringList []string

func (l *stringList) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*l = nil
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*l = stringList{s}
		return nil
	}
	var ss []string
	if err := json.Unmarshal(b, &ss); err != nil {
		return errors.New("want a string or an array of strings")
	}
	*l = ss
	return nil
}
