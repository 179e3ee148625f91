package api

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/envelopd/envelopd/internal/webhook"
	"github.com/envelopd/envelopd/runner"
	"github.com/envelopd/envelopd/store"
)

// Webhooks (the SDK's webhooks and inboxes.webhooks clients):
// {url, event_types, inbox_ids}, delivered from a durable hand-off log
// (api_webhook_deliveries: one row per event and webhook, made by the
// store in the event's own transaction), retried with exponential backoff
// and jitter, resumed after a restart, signed the Svix way
// (https://docs.svix.com/receiving/verifying-payloads/how-manual):
//
//	svix-id:        msg_<event id>_<webhook id> (the same on every retry)
//	svix-timestamp: Unix seconds
//	svix-signature: v1,BASE64(HMAC-SHA256(key, id + "." + timestamp + "." + body))
//
// where key is the base64-decoded part of the webhook's secret
// "whsec_<base64>". As AgentMail does, the secret is in every answer
// about a webhook (create, get, list, update) given to a key allowed to
// manage it (Principal.seesWebhook): receivers fetch it with
// webhooks.get to verify deliveries. A scoped key never sees a webhook
// that hears an inbox outside its scope.

// WebhookStore is what webhooks need of the store (store.DB: SQLite or Postgres).
type WebhookStore interface {
	CreateWebhook(ctx context.Context, w store.Webhook, l store.WebhookLimits) (store.Webhook, bool, error)
	WebhookByID(ctx context.Context, id string) (store.Webhook, error)
	Webhooks(ctx context.Context, cursorAt int64, cursorID string, limit int) ([]store.Webhook, error)
	UpdateWebhook(ctx context.Context, w store.Webhook, l store.WebhookLimits) error
	DeleteWebhook(ctx context.Context, id string) error
	ClaimWebhookDeliveries(ctx context.Context, now time.Time, lease time.Duration, limit, perOwner int, busy map[string]int) ([]store.WebhookDelivery, error)
	WebhookDeliveryDone(ctx context.Context, webhook string, event int64) error
	WebhookDeliveryRetry(ctx context.Context, webhook string, event int64, next time.Time, lastErr string) error
	WebhookDeliveryDrop(ctx context.Context, webhook string, event int64, lastErr string) error
}

// WebhookObject is the SDK's Webhook.
type WebhookObject struct {
	WebhookID  string   `json:"webhook_id"`
	URL        string   `json:"url"`
	EventTypes []string `json:"event_types,omitempty"`
	PodIDs     []string `json:"pod_ids,omitempty"`
	InboxIDs   []string `json:"inbox_ids,omitempty"`
	Secret     string   `json:"secret"` // to a key allowed to manage the webhook
	Enabled    bool     `json:"enabled"`
	// State is "enabled", "failing" (its endpoint backed off after
	// failures) or "disabled"; DisabledReason "key_revoked" or
	// "operator". KeyID is the API key that made it (its owner).
	State          string    `json:"state"`
	DisabledReason string    `json:"disabled_reason,omitempty"`
	KeyID          string    `json:"key_id,omitempty"`
	UpdatedAt      time.Time `json:"updated_at"`
	CreatedAt      time.Time `json:"created_at"`
	ClientID       string    `json:"client_id,omitempty"`
}

// ListWebhooks is {count, limit, next_page_token, webhooks}.
type ListWebhooks struct {
	Page
	Webhooks []WebhookObject `json:"webhooks"`
}

// CreateWebhookRequest is the SDK's CreateWebhookRequest.
type CreateWebhookRequest struct {
	URL        string            `json:"url"`
	EventTypes []string          `json:"event_types"`
	InboxIDs   []string          `json:"inbox_ids"`
	PodIDs     []string          `json:"pod_ids"`
	ClientID   string            `json:"client_id"`
	Headers    map[string]string `json:"headers"`
}

// UpdateWebhookRequest is the SDK's UpdateWebhookRequest.
type UpdateWebhookRequest struct {
	EventTypes     []string `json:"event_types"`
	AddInboxIDs    []string `json:"add_inbox_ids"`
	RemoveInboxIDs []string `json:"remove_inbox_ids"`
	AddPodIDs      []string `json:"add_pod_ids"`
	RemovePodIDs   []string `json:"remove_pod_ids"`
}

func webhookObject(w store.Webhook) WebhookObject {
	return WebhookObject{WebhookID: w.ID, URL: w.URL, EventTypes: w.EventTypes, InboxIDs: w.InboxIDs, Secret: w.Secret,
		Enabled: w.Enabled, State: w.State(), DisabledReason: w.DisabledReason, KeyID: w.KeyID,
		UpdatedAt: w.UpdatedAt, CreatedAt: w.CreatedAt, ClientID: w.ClientID}
}

func (s *Service) webhooks() (WebhookStore, error) {
	if ws, ok := s.cfg.Store.(WebhookStore); ok {
		return ws, nil
	}
	return nil, &Error{Status: http.StatusNotImplemented, Name: "NotImplementedError", Message: "this store keeps no webhooks"}
}

// visible reports whether p may see w: an unscoped key sees every
// webhook, a scoped one those of its inboxes only (inbox is the path's
// inbox of the inbox-scoped routes, "" otherwise).
func (p *Principal) seesWebhook(w store.Webhook, inbox string) bool {
	if inbox != "" && !slices.Contains(w.InboxIDs, inbox) {
		return false
	}
	return p.allowsAll(w.InboxIDs)
}

func checkWebhookURL(u string) error {
	pu, err := url.Parse(u)
	if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
		return badField("url", "want an absolute http or https URL")
	}
	return nil
}

// webhookLimits are the effective limits (the configured ones, the
// store's defaults for zero fields).
func (s *Service) webhookLimits() store.WebhookLimits { return s.cfg.WebhookLimits.WithDefaults() }

// checkWebhookLists bounds a webhook's lists before anything is looked
// up (the store checks again, with the counts, in its transaction):
// event types (each at most EventTypeLen bytes, duplicates removed by
// checkSubscription) and inbox ids.
func (s *Service) checkWebhookLists(types, inboxes []string) error {
	l := s.webhookLimits()
	if len(types) > l.EventTypes {
		return badField("event_types", "at most %d event types per webhook", l.EventTypes)
	}
	for _, t := range types {
		if len(t) > l.EventTypeLen {
			return badField("event_types", "an event type is at most %d bytes", l.EventTypeLen)
		}
	}
	if len(inboxes) > l.Inboxes {
		return badField("inbox_ids", "at most %d inbox_ids per webhook", l.Inboxes)
	}
	return nil
}

// NewWebhookSecret returns a Svix-style secret: whsec_ and the base64 of
// 24 random bytes (the signing key).
func NewWebhookSecret() (string, error) {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(b[:]), nil
}

// checkInboxIDs normalises ids and checks p may see each (404 otherwise,
// as for any inbox it may not see).
func (s *Service) checkInboxIDs(ctx context.Context, p *Principal, ids []string) ([]string, error) {
	out := []string{}
	for _, b := range ids {
		b = strings.ToLower(strings.TrimSpace(b))
		if _, err := s.inbox(ctx, p, b); err != nil {
			return nil, err
		}
		if !slices.Contains(out, b) {
			out = append(out, b)
		}
	}
	return out, nil
}

// CreateWebhook creates a webhook (idempotent per client_id); inbox is
// the path's inbox of /v0/inboxes/{inbox_id}/webhooks, else "". The
// answer carries the secret, shown only here.
func (s *Service) CreateWebhook(ctx context.Context, p *Principal, inbox string, req CreateWebhookRequest) (WebhookObject, error) {
	ws, err := s.webhooks()
	if err != nil {
		return WebhookObject{}, err
	}
	if err := checkWebhookURL(req.URL); err != nil {
		return WebhookObject{}, err
	}
	if err := checkHeadersGiven(req.Headers); err != nil {
		return WebhookObject{}, err
	}
	if len(req.PodIDs) > 0 && !(len(req.PodIDs) == 1 && req.PodIDs[0] == podID) {
		return WebhookObject{}, badField("pod_ids", "the only pod is %q", podID)
	}
	sub := Subscription{EventTypes: slices.Clone(req.EventTypes), InboxIDs: req.InboxIDs}
	if inbox != "" {
		sub.InboxIDs = []string{inbox}
	}
	if err := checkSubscription(&sub); err != nil {
		return WebhookObject{}, err
	}
	if err := p.mayFollow(sub.EventTypes); err != nil {
		return WebhookObject{}, err
	}
	if err := s.checkWebhookLists(sub.EventTypes, sub.InboxIDs); err != nil {
		return WebhookObject{}, err
	}
	if sub.InboxIDs, err = s.checkInboxIDs(ctx, p, sub.InboxIDs); err != nil {
		return WebhookObject{}, err
	}
	if len(sub.InboxIDs) == 0 && p.Inboxes != nil {
		sub.InboxIDs = slices.Clone(p.Inboxes) // a scoped key's webhook hears its inboxes only
	}
	secret, err := NewWebhookSecret()
	if err != nil {
		return WebhookObject{}, err
	}
	var idb [8]byte
	if _, err := rand.Read(idb[:]); err != nil {
		return WebhookObject{}, err
	}
	now := s.cfg.Now().UTC()
	w := store.Webhook{ID: "wh_" + hex.EncodeToString(idb[:]), URL: req.URL, EventTypes: sub.EventTypes, InboxIDs: sub.InboxIDs,
		Secret: secret, Enabled: true, ClientID: req.ClientID, KeyID: p.KeyID, CreatedAt: now, UpdatedAt: now, Headers: req.Headers}
	got, created, err := ws.CreateWebhook(ctx, w, s.cfg.WebhookLimits)
	if err != nil {
		return WebhookObject{}, headerError(err)
	}
	if !created && !p.seesWebhook(got, inbox) {
		// Answered as for any webhook p may not see (no existence leak).
		return WebhookObject{}, notFound("client_id %q not found", req.ClientID)
	}
	return webhookObject(got), nil
}

func (s *Service) webhook(ctx context.Context, p *Principal, inbox, id string) (WebhookStore, store.Webhook, error) {
	ws, err := s.webhooks()
	if err != nil {
		return nil, store.Webhook{}, err
	}
	if inbox, err = s.pathInbox(ctx, p, inbox); err != nil {
		return nil, store.Webhook{}, err
	}
	w, err := ws.WebhookByID(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !p.seesWebhook(w, inbox)) {
		return nil, store.Webhook{}, notFound("webhook %s not found", id)
	}
	return ws, w, err
}

// GetWebhook returns a webhook with its signing secret (p may manage it:
// s.webhook answers 404 for one it may not see).
func (s *Service) GetWebhook(ctx context.Context, p *Principal, inbox, id string) (WebhookObject, error) {
	_, w, err := s.webhook(ctx, p, inbox, id)
	if err != nil {
		return WebhookObject{}, err
	}
	return webhookObject(w), nil
}

// ListWebhooks lists the webhooks p may see, newest first.
func (s *Service) ListWebhooks(ctx context.Context, p *Principal, inbox string, lp ListParams) (ListWebhooks, error) {
	ws, err := s.webhooks()
	if err != nil {
		return ListWebhooks{}, err
	}
	if inbox, err = s.pathInbox(ctx, p, inbox); err != nil {
		return ListWebhooks{}, err
	}
	// Few webhooks exist; the keyset is (created_at, id), newest first.
	hooks, next, err := newestFirst(lp, func(at int64, id string, n int) ([]store.Webhook, error) {
		return ws.Webhooks(ctx, at, id, n)
	}, func(w store.Webhook) (time.Time, string) { return w.CreatedAt, w.ID },
		func(w store.Webhook) bool { return p.seesWebhook(w, inbox) },
		func(w store.Webhook) (WebhookObject, error) { return webhookObject(w), nil })
	if err != nil {
		return ListWebhooks{}, err
	}
	return ListWebhooks{Page: Page{Count: len(hooks), Limit: lp.Limit, NextPageToken: next}, Webhooks: hooks}, nil
}

// UpdateWebhook replaces the event types (when given) and adds/removes
// inboxes.
func (s *Service) UpdateWebhook(ctx context.Context, p *Principal, inbox, id string, req UpdateWebhookRequest) (WebhookObject, error) {
	ws, w, err := s.webhook(ctx, p, inbox, id)
	if err != nil {
		return WebhookObject{}, err
	}
	if inbox != "" && (len(req.AddInboxIDs) > 0 || len(req.RemoveInboxIDs) > 0) {
		return WebhookObject{}, badField("add_inbox_ids", "an inbox webhook is fixed to its inbox")
	}
	if len(req.AddPodIDs)+len(req.RemovePodIDs) > 0 {
		return WebhookObject{}, badField("add_pod_ids", "pods cannot be changed: the only pod is %q", podID)
	}
	sub := Subscription{EventTypes: slices.Clone(req.EventTypes)}
	if err := checkSubscription(&sub); err != nil {
		return WebhookObject{}, err
	}
	if err := p.mayFollow(sub.EventTypes); len(sub.EventTypes) > 0 && err != nil {
		return WebhookObject{}, err
	}
	if err := s.checkWebhookLists(sub.EventTypes, req.AddInboxIDs); err != nil {
		return WebhookObject{}, err
	}
	if len(sub.EventTypes) > 0 {
		w.EventTypes = sub.EventTypes
	}
	add, err := s.checkInboxIDs(ctx, p, req.AddInboxIDs)
	if err != nil {
		return WebhookObject{}, err
	}
	for _, b := range add {
		if !slices.Contains(w.InboxIDs, b) {
			w.InboxIDs = append(w.InboxIDs, b)
		}
	}
	for _, b := range req.RemoveInboxIDs {
		b = strings.ToLower(strings.TrimSpace(b))
		w.InboxIDs = slices.DeleteFunc(w.InboxIDs, func(x string) bool { return x == b })
	}
	if l := s.webhookLimits(); len(w.InboxIDs) > l.Inboxes {
		return WebhookObject{}, badField("add_inbox_ids", "at most %d inbox_ids per webhook", l.Inboxes)
	}
	if p.Inboxes != nil && len(w.InboxIDs) == 0 {
		return WebhookObject{}, badField("remove_inbox_ids", "a scoped key's webhook keeps at least one inbox")
	}
	w.UpdatedAt = s.cfg.Now().UTC()
	if err := ws.UpdateWebhook(ctx, w, s.cfg.WebhookLimits); err != nil {
		return WebhookObject{}, err
	}
	return webhookObject(w), nil
}

// DeleteWebhook deletes a webhook and its pending deliveries.
func (s *Service) DeleteWebhook(ctx context.Context, p *Principal, inbox, id string) error {
	ws, w, err := s.webhook(ctx, p, inbox, id)
	if err != nil {
		return err
	}
	return ws.DeleteWebhook(ctx, w.ID)
}

// Handlers.

func (h *Handler) webhookRoutes(a func(string, authed)) {
	for _, pre := range []string{"/v0", "/v0/inboxes/{inbox_id}"} {
		a("GET "+pre+"/webhooks", h.listWebhooks)
		a("POST "+pre+"/webhooks", h.createWebhook)
		a("GET "+pre+"/webhooks/{webhook_id}", h.getWebhook)
		a("PATCH "+pre+"/webhooks/{webhook_id}", h.updateWebhook)
		a("DELETE "+pre+"/webhooks/{webhook_id}", h.deleteWebhook)
	}
	// The one pod holds every inbox: its webhooks are the organisation's.
	pre := "/v0/pods/{pod_id}"
	a("GET "+pre+"/webhooks", h.inPod(h.listWebhooks))
	a("POST "+pre+"/webhooks", h.inPod(h.createWebhook))
	a("GET "+pre+"/webhooks/{webhook_id}", h.inPod(h.getWebhook))
	a("PATCH "+pre+"/webhooks/{webhook_id}", h.inPod(h.updateWebhook))
	a("DELETE "+pre+"/webhooks/{webhook_id}", h.inPod(h.deleteWebhook))
}

func (h *Handler) listWebhooks(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
	return answer(r, h.listParams, func(lp ListParams) (any, error) {
		return h.svc.ListWebhooks(r.Context(), p, r.PathValue("inbox_id"), lp)
	})
}

func (h *Handler) createWebhook(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
	return answer(r, decodeAs[CreateWebhookRequest], func(req CreateWebhookRequest) (any, error) {
		return h.svc.CreateWebhook(r.Context(), p, r.PathValue("inbox_id"), req)
	})
}

func (h *Handler) getWebhook(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
	return respond(h.svc.GetWebhook(r.Context(), p, r.PathValue("inbox_id"), r.PathValue("webhook_id")))
}

func (h *Handler) updateWebhook(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
	return answer(r, decodeAs[UpdateWebhookRequest], func(req UpdateWebhookRequest) (any, error) {
		return h.svc.UpdateWebhook(r.Context(), p, r.PathValue("inbox_id"), r.PathValue("webhook_id"), req)
	})
}

func (h *Handler) deleteWebhook(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
	return noContent(w, h.svc.DeleteWebhook(r.Context(), p, r.PathValue("inbox_id"), r.PathValue("webhook_id")))
}

// Delivery.

// Webhook delivery timeouts: an endpoint that does not answer is given
// up on quickly (and then backed off as a whole), so that it holds a
// delivery slot for seconds, not for the 30 s of an ordinary client.
const (
	webhookDialTimeout   = 3 * time.Second
	webhookHeaderTimeout = 5 * time.Second  // from the request written to the answer's header
	webhookTimeout       = 10 * time.Second // the whole exchange
)

// defaultWebhookClient posts within webhookTimeout and never connects to
// link-local (169.254/16, fe80::/10: cloud metadata services), multicast
// or unspecified addresses, whatever name the URL gives. Loopback and
// private addresses are allowed: a self-hosted agent lives there.
var defaultWebhookClient = &http.Client{Timeout: webhookTimeout, Transport: &http.Transport{
	Proxy: nil,
	DialContext: (&net.Dialer{Timeout: webhookDialTimeout, Control: func(network, address string, _ syscall.RawConn) error {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			return err
		}
		ip := net.ParseIP(host)
		if ip == nil || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsMulticast() || ip.IsUnspecified() {
			return fmt.Errorf("webhook: refusing to connect to %s", host)
		}
		return nil
	}}).DialContext,
	TLSHandshakeTimeout:   webhookDialTimeout,
	ResponseHeaderTimeout: webhookHeaderTimeout,
	MaxIdleConnsPerHost:   2,
	IdleConnTimeout:       90 * time.Second,
}}

// SvixSignature is "v1," and the base64 of HMAC-SHA256(key, id + "." +
// timestamp + "." + body), key being the base64-decoded part of a
// whsec_ secret.
func SvixSignature(secret, id, timestamp string, body []byte) (string, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return "", fmt.Errorf("api: webhook secret: %w", err)
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte("."))
	m.Write([]byte(timestamp))
	m.Write([]byte("."))
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil)), nil
}

// WebhookSender delivers webhook events from the durable log. Endpoints
// are isolated from each other: each webhook has at most one delivery
// in flight (on every node: the store leases the webhook), one tenant's
// webhooks at most PerOwner (on this node), deliveries
// are claimed one per webhook, oldest event first (a webhook with a
// backlog does not pass before the others), an endpoint that fails is
// backed off as a whole (its circuit open: none of its deliveries is
// claimed before its backoff ends, so it holds no slot meanwhile), and
// the sender claims again as soon as any delivery ends, never waiting
// for a batch: a slow endpoint delays nothing but its own deliveries.
type WebhookSender struct {
	Service *Service
	Client  *http.Client // default: webhookTimeout, short connect and header timeouts
	// Poll is how often due deliveries are looked for (default 1 s; an
	// event committed by this process wakes the sender at once).
	Poll time.Duration
	// MinBackoff and MaxBackoff bound an endpoint's backoff after
	// consecutive failures (defaults 1 s, 1 h); GiveUp is how long an
	// event is retried before its delivery is dropped (default 72 h; the
	// event stays in the log).
	MinBackoff, MaxBackoff, GiveUp time.Duration
	// Slots bounds the deliveries in flight at once (default 64);
	// PerOwner those of the webhooks of one API key (one tenant; default
	// 8), so that a tenant's many slow endpoints leave the others slots.
	Slots, PerOwner int
	// Metrics, when set, counts claims and outcomes as "webhooks".
	Metrics *runner.Metrics
}

// webhookLease is how long a claimed delivery (and its webhook) stays
// taken: past it, another sender retries (at-least-once).
const webhookLease = 2 * time.Minute

// Run delivers until ctx ends.
func (ws *WebhookSender) Run(ctx context.Context) error {
	st, err := ws.Service.webhooks()
	if err != nil {
		// A store without webhooks: nothing to deliver (the endpoints
		// answer 501); serving goes on.
		ws.Service.cfg.Logger.Warn("api: webhooks disabled", "err", err)
		<-ctx.Done()
		return ctx.Err()
	}
	poll := ws.Poll
	if poll <= 0 {
		poll = time.Second
	}
	slots := ws.Slots
	if slots <= 0 {
		slots = 64
	}
	wake := make(chan struct{}, 1)
	if log, _ := ws.Service.eventLog(); log != nil {
		go func() {
			last, _ := log.LastEventID(ctx)
			for ctx.Err() == nil {
				if err := log.WaitEvents(ctx, last); err != nil {
					return
				}
				n, err := log.LastEventID(ctx)
				if err != nil || n == last {
					// Nothing new to read (a failing store): wait a poll.
					select {
					case <-ctx.Done():
					case <-time.After(poll):
					}
					continue
				}
				last = n
				select {
				case wake <- struct{}{}:
				default:
				}
			}
		}()
	}
	perOwner := ws.PerOwner
	if perOwner <= 0 {
		perOwner = 8
	}
	// Every slot free is claimed (Batch = Parallel = slots), and a
	// delivery ending claims again at once.
	l := ws.loop(st, slots, perOwner)
	l.Interval, l.Wake = poll, func() <-chan struct{} { return wake }
	return l.Run(ctx)
}

// loop is the runner over st's webhook deliveries, slots at once, at
// most perOwner of one owner's (0: no bound).
func (ws *WebhookSender) loop(st WebhookStore, slots, perOwner int) *runner.Loop[store.WebhookDelivery] {
	return &runner.Loop[store.WebhookDelivery]{Name: "webhooks", Worker: &webhookJobs{ws: ws, st: st, client: ws.client(),
		perOwner: perOwner, busy: map[string]int{}}, Batch: slots, Parallel: slots, Metrics: ws.Metrics, Logger: ws.Service.cfg.Logger}
}

func (ws *WebhookSender) client() *http.Client {
	if ws.Client != nil {
		return ws.Client
	}
	return defaultWebhookClient
}

// RunOnce delivers the deliveries due now (one per webhook, all at
// once) and returns how many it tried.
func (ws *WebhookSender) RunOnce(ctx context.Context, st WebhookStore) (int, error) {
	_, n, err := ws.loop(st, 64, 0).Once(ctx)
	return n, err
}

// webhookJobs is the webhook deliveries as a runner.Worker. busy counts
// the deliveries in flight per owner (API key), for the per-owner bound.
type webhookJobs struct {
	ws       *WebhookSender
	st       WebhookStore
	client   *http.Client
	perOwner int
	mu       sync.Mutex
	busy     map[string]int
}

// Claim takes up to limit due deliveries, one per webhook, leaving each
// owner at most perOwner in flight.
func (j *webhookJobs) Claim(ctx context.Context, now time.Time, limit int) ([]store.WebhookDelivery, error) {
	var busy map[string]int
	j.mu.Lock()
	if j.perOwner > 0 {
		busy = maps.Clone(j.busy)
	}
	j.mu.Unlock()
	ds, err := j.st.ClaimWebhookDeliveries(ctx, now, webhookLease, limit, j.perOwner, busy)
	j.mu.Lock()
	for _, d := range ds {
		j.busy[d.Webhook.KeyID]++
	}
	j.mu.Unlock()
	return ds, err
}

// Attempt posts one delivery and settles it.
func (j *webhookJobs) Attempt(ctx context.Context, d store.WebhookDelivery) (runner.Outcome, error) {
	defer func() {
		j.mu.Lock()
		if j.busy[d.Webhook.KeyID]--; j.busy[d.Webhook.KeyID] <= 0 {
			delete(j.busy, d.Webhook.KeyID)
		}
		j.mu.Unlock()
	}()
	return j.ws.deliverOne(ctx, j.st, j.client, d), nil
}

func (ws *WebhookSender) deliverOne(ctx context.Context, st WebhookStore, client *http.Client, d store.WebhookDelivery) runner.Outcome {
	lg := ws.Service.cfg.Logger
	giveUp := ws.GiveUp
	if giveUp <= 0 {
		giveUp = 72 * time.Hour
	}
	// An event too old is dropped before it is posted: a backlog that
	// waited behind an endpoint's backoff drains at once, without
	// hitting the endpoint again.
	if time.Since(d.Event.CreatedAt) > giveUp {
		lg.Warn("api: webhook delivery given up", "webhook", d.Webhook.ID, "event", d.Event.ID, "attempts", d.Attempts)
		_ = st.WebhookDeliveryDrop(ctx, d.Webhook.ID, d.Event.ID, "given up: older than "+giveUp.String())
		return runner.Dropped
	}
	err := ws.post(ctx, client, d)
	if err == nil {
		if err := st.WebhookDeliveryDone(ctx, d.Webhook.ID, d.Event.ID); err != nil {
			lg.Warn("api: webhook delivered, not recorded (it will be sent again)", "webhook", d.Webhook.ID, "event", d.Event.ID, "err", err)
		}
		return runner.Succeeded
	}
	if ctx.Err() != nil {
		// Shutting down: not the endpoint's failure; the delivery is
		// left to its lease (tried again when it ends).
		return runner.Released
	}
	// The endpoint's consecutive failures set the backoff of all its
	// deliveries (WebhookDeliveryRetry backs the webhook off).
	next := time.Now().Add(ws.backoff(d.Webhook.Failures + 1))
	lg.Info("api: webhook delivery failed, endpoint backed off", "webhook", d.Webhook.ID, "event", d.Event.ID, "attempts", d.Attempts,
		"failures", d.Webhook.Failures+1, "next", next, "err", err)
	if err := st.WebhookDeliveryRetry(ctx, d.Webhook.ID, d.Event.ID, next, err.Error()); err != nil {
		lg.Warn("api: webhook retry not recorded (retried after the lease)", "err", err)
	}
	return runner.Retried
}

// backoff is an endpoint's wait after its attempts-th failure in a row:
// MinBackoff (default 1 s) doubled per failure up to MaxBackoff (default
// 1 h), the upper half drawn at random.
func (ws *WebhookSender) backoff(attempts int) time.Duration {
	b := runner.Backoff{Initial: ws.MinBackoff, Max: ws.MaxBackoff, Jitter: 0.5}
	return b.Or(time.Second, time.Hour).Delay(attempts)
}

func (ws *WebhookSender) post(ctx context.Context, client *http.Client, d store.WebhookDelivery) error {
	o, err := ws.Service.EventObject(ctx, d.Event)
	if err != nil {
		return fmt.Errorf("render event: %w", err)
	}
	body, err := json.Marshal(o)
	if err != nil {
		return err
	}
	id := "msg_" + strconv.FormatInt(d.Event.ID, 10) + "_" + d.Webhook.ID
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	sig, err := SvixSignature(d.Webhook.Secret, id, ts, body)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, webhookTimeout)
	defer cancel()
	// The webhook's custom headers first: the delivery's own come after
	// and win (the store refuses those names anyway).
	header := make(map[string]string, len(d.Webhook.Headers)+3)
	for k, v := range d.Webhook.Headers {
		header[http.CanonicalHeaderKey(k)] = v
	}
	header["Svix-Id"], header["Svix-Timestamp"], header["Svix-Signature"] = id, ts, sig
	code, err := webhook.Post(ctx, client, d.Webhook.URL, body, header)
	if err != nil {
		return err
	}
	if code/100 != 2 {
		return fmt.Errorf("HTTP %d", code)
	}
	return nil
}
