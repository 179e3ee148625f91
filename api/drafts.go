package api

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/envelopd/envelopd/runner"
	"github.com/envelopd/envelopd/store"
)

// Drafts (the SDK's drafts and inboxes.drafts clients): a draft is the
// fields of a send kept in the store (store.Draft) until it is sent — by
// drafts.send, or at its send_at by whichever node claims it first
// (store.ClaimDueDrafts; Service.Run sends the due ones). Either way the
// send is the API's own (Service.Send, or Service.Reply for a draft with
// in_reply_to), with Envelopay validation at send time and the same
// force rule, and a Message-ID fixed by the draft id: a send repeated
// after a crash finds the queue's entry and sends nothing twice. A
// scheduled send the rules refuse leaves the draft with send_status
// "failed" and the reason in its error.

// draftLease is how long a node holds a due draft it is sending; a node
// killed meanwhile leaves it to another after this.
const draftLease = 30 * time.Second

// DraftRequest is the SDK's CreateDraftRequest and UpdateDraftRequest
// (update: the fields given replace the draft's).
type DraftRequest struct {
	Labels      *stringList      `json:"labels"`
	ReplyTo     *stringList      `json:"reply_to"`
	To          *stringList      `json:"to"`
	Cc          *stringList      `json:"cc"`
	Bcc         *stringList      `json:"bcc"`
	Subject     *string          `json:"subject"`
	Text        *string          `json:"text"`
	HTML        *string          `json:"html"`
	Attachments []SendAttachment `json:"attachments"`
	InReplyTo   *string          `json:"in_reply_to"`
	SendAt      *draftTime       `json:"send_at"`
	ClientID    string           `json:"client_id"`
	Force       *bool            `json:"force"`
}

// StringList is a JSON string or array of strings (the SDK's Addresses
// and label unions), for front ends that build requests.
type StringList = stringList

// NewDraftTime is a send_at of t.
func NewDraftTime(t time.Time) *draftTime { return &draftTime{t.UTC()} }

// draftTime is send_at: RFC 3339, or an ISO 8601 date-time without a
// zone (Python's naive datetime), read as UTC.
type draftTime struct{ time.Time }

func (t *draftTime) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errors.New("want an RFC 3339 date-time string")
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999"} {
		if v, err := time.Parse(layout, s); err == nil {
			t.Time = v.UTC()
			return nil
		}
	}
	return errors.New("want an RFC 3339 date-time, e.g. 2026-01-05T10:00:00Z")
}

// draftDoc is the JSON document a draft keeps in the store.
type draftDoc struct {
	Labels      []string         `json:"labels,omitempty"`
	ReplyTo     []string         `json:"reply_to,omitempty"`
	To          []string         `json:"to,omitempty"`
	Cc          []string         `json:"cc,omitempty"`
	Bcc         []string         `json:"bcc,omitempty"`
	Subject     *string          `json:"subject,omitempty"`
	Text        string           `json:"text,omitempty"`
	HTML        string           `json:"html,omitempty"`
	Attachments []SendAttachment `json:"attachments,omitempty"`
	InReplyTo   string           `json:"in_reply_to,omitempty"`
	Force       bool             `json:"force,omitempty"`
}

// DraftAttachment is the SDK's Attachment of a draft: an Attachment
// without the download fields (drafts.get_attachment gives those).
type DraftAttachment = Attachment

// DraftObject is the SDK's Draft (and, in lists, DraftItem).
type DraftObject struct {
	InboxID     string            `json:"inbox_id"`
	DraftID     string            `json:"draft_id"`
	ClientID    string            `json:"client_id,omitempty"`
	Labels      []string          `json:"labels"`
	ReplyTo     []string          `json:"reply_to,omitempty"`
	To          []string          `json:"to,omitempty"`
	Cc          []string          `json:"cc,omitempty"`
	Bcc         []string          `json:"bcc,omitempty"`
	Subject     *string           `json:"subject,omitempty"`
	Preview     string            `json:"preview,omitempty"`
	Text        string            `json:"text,omitempty"`
	HTML        string            `json:"html,omitempty"`
	Attachments []DraftAttachment `json:"attachments,omitempty"`
	InReplyTo   string            `json:"in_reply_to,omitempty"`
	SendStatus  string            `json:"send_status,omitempty"`
	SendAt      *time.Time        `json:"send_at,omitempty"`
	// Error is why a scheduled send failed (send_status "failed").
	Error     string    `json:"error,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
	CreatedAt time.Time `json:"created_at"`
}

// ListDrafts is the SDK's ListDraftsResponse.
type ListDrafts struct {
	Page
	Drafts []DraftObject `json:"drafts"`
}

func draftObject(d store.Draft) (DraftObject, error) {
	var doc draftDoc
	if err := json.Unmarshal(d.Request, &doc); err != nil {
		return DraftObject{}, err
	}
	o := DraftObject{InboxID: d.Inbox, DraftID: d.ID, ClientID: d.ClientID, Labels: append([]string{"draft"}, doc.Labels...),
		ReplyTo: doc.ReplyTo, To: doc.To, Cc: doc.Cc, Bcc: doc.Bcc, Subject: doc.Subject, Text: doc.Text, HTML: doc.HTML,
		InReplyTo: doc.InReplyTo, SendStatus: d.Status, Error: d.LastError, UpdatedAt: d.UpdatedAt, CreatedAt: d.CreatedAt}
	o.Preview = preview(doc.Text)
	if !d.SendAt.IsZero() {
		t := d.SendAt
		o.SendAt = &t
	}
	for i, a := range doc.Attachments {
		o.Attachments = append(o.Attachments, DraftAttachment{AttachmentID: draftAttachmentID(i), Filename: a.Filename,
			Size: decodedLen(a.Content), ContentType: a.ContentType, ContentDisposition: a.ContentDisposition, ContentID: a.ContentID})
	}
	return o, nil
}

// draftAttachmentID is the id of a draft's i-th attachment (from 0).
func draftAttachmentID(i int) string { return "att_" + strconv.Itoa(i+1) }

// decodedLen is the length of the bytes canonical (padded, unbroken)
// base64 encodes.
func decodedLen(b64 string) int {
	return len(b64)/4*3 - (len(b64) - len(strings.TrimRight(b64, "=")))
}

func (s *Service) drafts() (store.DraftStore, error) {
	if ds, ok := s.cfg.Store.(store.DraftStore); ok {
		return ds, nil
	}
	return nil, &Error{Status: http.StatusNotImplemented, Name: "NotImplementedError", Message: "this store keeps no drafts"}
}

// apply puts the fields of req given into doc and checks them.
func (s *Service) applyDraft(doc *draftDoc, req DraftRequest) error {
	set := func(dst *[]string, src *stringList, field string) error {
		if src == nil {
			return nil
		}
		if _, err := addrs(field, *src); err != nil {
			return err
		}
		*dst = slices.Clone(*src)
		return nil
	}
	for _, f := range []struct {
		dst   *[]string
		src   *stringList
		field string
	}{{&doc.To, req.To, "to"}, {&doc.Cc, req.Cc, "cc"}, {&doc.Bcc, req.Bcc, "bcc"}, {&doc.ReplyTo, req.ReplyTo, "reply_to"}} {
		if err := set(f.dst, f.src, f.field); err != nil {
			return err
		}
	}
	if len(doc.To)+len(doc.Cc)+len(doc.Bcc) > maxRecipients {
		return badField("to", "at most %d recipients", maxRecipients)
	}
	if req.Labels != nil {
		if err := checkLabels(UpdateLabels{AddLabels: *req.Labels}); err != nil {
			return err
		}
		doc.Labels = slices.Clone(*req.Labels)
	}
	if req.Subject != nil {
		if strings.ContainsAny(*req.Subject, "\r\n") {
			return badField("subject", "no CR or LF in a subject")
		}
		doc.Subject = req.Subject
	}
	if req.Text != nil {
		doc.Text = *req.Text
	}
	if req.HTML != nil {
		doc.HTML = *req.HTML
	}
	if req.Attachments != nil {
		// Checked now, kept in canonical base64 (the size listed is
		// then exact): a draft holds only attachments a send takes.
		atts := make([]SendAttachment, len(req.Attachments))
		for i, a := range req.Attachments {
			data, err := a.decode(i)
			if err != nil {
				return err
			}
			a.Content = base64.StdEncoding.EncodeToString(data)
			atts[i] = a
		}
		doc.Attachments = atts
	}
	if req.InReplyTo != nil {
		doc.InReplyTo = *req.InReplyTo
	}
	if req.Force != nil {
		doc.Force = *req.Force
	}
	return nil
}

// schedule sets d's send time from req: in the future, or 400.
func (s *Service) schedule(d *store.Draft, req DraftRequest) error {
	if req.SendAt == nil {
		return nil
	}
	if req.SendAt.IsZero() {
		d.SendAt, d.Status, d.LastError = time.Time{}, "", ""
		return nil
	}
	if !req.SendAt.After(s.cfg.Now()) {
		return badField("send_at", "%s is in the past; a scheduled draft is sent in the future", req.SendAt.Format(time.RFC3339))
	}
	d.SendAt, d.Status, d.LastError = req.SendAt.Time, store.DraftScheduled, ""
	return nil
}

func encodeDraft(doc draftDoc) ([]byte, error) {
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	if len(b) > store.MaxDraftBytes {
		return nil, &Error{Status: http.StatusRequestEntityTooLarge, Name: "PayloadTooLargeError",
			Message: "a draft is at most " + strconv.Itoa(store.MaxDraftBytes) + " bytes; this one is " + strconv.Itoa(len(b))}
	}
	return b, nil
}

// CreateDraft stores a new draft in inbox (idempotent per client_id).
func (s *Service) CreateDraft(ctx context.Context, p *Principal, inbox string, req DraftRequest) (DraftObject, error) {
	ds, err := s.drafts()
	if err != nil {
		return DraftObject{}, err
	}
	b, err := s.inbox(ctx, p, inbox)
	if err != nil {
		return DraftObject{}, err
	}
	var doc draftDoc
	if err := s.applyDraft(&doc, req); err != nil {
		return DraftObject{}, err
	}
	var idb [8]byte
	if _, err := rand.Read(idb[:]); err != nil {
		return DraftObject{}, err
	}
	now := s.cfg.Now().UTC()
	d := store.Draft{ID: "drf_" + hex.EncodeToString(idb[:]), Inbox: b.Address, ClientID: req.ClientID, CreatedAt: now, UpdatedAt: now}
	if err := s.schedule(&d, req); err != nil {
		return DraftObject{}, err
	}
	if d.Request, err = encodeDraft(doc); err != nil {
		return DraftObject{}, err
	}
	got, _, err := ds.CreateDraft(ctx, d)
	if err != nil {
		return DraftObject{}, err
	}
	if got.Inbox != b.Address {
		return DraftObject{}, notFound("client_id %q not found", req.ClientID) // another inbox's
	}
	return draftObject(got)
}

// draft returns a draft p may see (in inbox when not "").
func (s *Service) draft(ctx context.Context, p *Principal, inbox, id string) (store.DraftStore, store.Draft, error) {
	ds, err := s.drafts()
	if err != nil {
		return nil, store.Draft{}, err
	}
	if inbox, err = s.pathInbox(ctx, p, inbox); err != nil {
		return nil, store.Draft{}, err
	}
	d, err := ds.DraftByID(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && (!p.Allowed(d.Inbox) || inbox != "" && d.Inbox != inbox)) {
		return nil, store.Draft{}, notFound("draft %s not found", id)
	}
	return ds, d, err
}

// GetDraft returns a draft.
func (s *Service) GetDraft(ctx context.Context, p *Principal, inbox, id string) (DraftObject, error) {
	_, d, err := s.draft(ctx, p, inbox, id)
	if err != nil {
		return DraftObject{}, err
	}
	return draftObject(d)
}

// ListDrafts lists the drafts of inbox ("": of every inbox p may see),
// newest first.
func (s *Service) ListDrafts(ctx context.Context, p *Principal, inbox string, lp ListParams) (ListDrafts, error) {
	ds, err := s.drafts()
	if err != nil {
		return ListDrafts{}, err
	}
	if inbox, err = s.pathInbox(ctx, p, inbox); err != nil {
		return ListDrafts{}, err
	}
	drafts, next, err := newestFirst(lp, func(at int64, id string, n int) ([]store.Draft, error) {
		return ds.Drafts(ctx, inbox, at, id, n)
	}, func(d store.Draft) (time.Time, string) { return d.CreatedAt, d.ID },
		func(d store.Draft) bool { return p.Allowed(d.Inbox) },
		func(d store.Draft) (DraftObject, error) {
			o, err := draftObject(d)
			o.Text, o.HTML, o.ReplyTo = "", "", nil // DraftItem
			return o, err
		})
	if err != nil {
		return ListDrafts{}, err
	}
	return ListDrafts{Page: Page{Count: len(drafts), Limit: lp.Limit, NextPageToken: next}, Drafts: drafts}, nil
}

// UpdateDraft replaces the fields given (send_at: reschedules; null
// with the key present is not distinguished from absent).
func (s *Service) UpdateDraft(ctx context.Context, p *Principal, inbox, id string, req DraftRequest) (DraftObject, error) {
	ds, d, err := s.draft(ctx, p, inbox, id)
	if err != nil {
		return DraftObject{}, err
	}
	var doc draftDoc
	if err := json.Unmarshal(d.Request, &doc); err != nil {
		return DraftObject{}, err
	}
	if err := s.applyDraft(&doc, req); err != nil {
		return DraftObject{}, err
	}
	if err := s.schedule(&d, req); err != nil {
		return DraftObject{}, err
	}
	if d.Request, err = encodeDraft(doc); err != nil {
		return DraftObject{}, err
	}
	d.UpdatedAt = s.cfg.Now().UTC()
	if err := ds.UpdateDraft(ctx, d); err != nil {
		return DraftObject{}, err
	}
	return draftObject(d)
}

// DeleteDraft deletes a draft (a scheduled one is not sent).
func (s *Service) DeleteDraft(ctx context.Context, p *Principal, inbox, id string) error {
	ds, d, err := s.draft(ctx, p, inbox, id)
	if err != nil {
		return err
	}
	return ds.DeleteDraft(ctx, d.ID)
}

// SendDraft sends a draft now and deletes it; labels are added to and
// removed from the draft's for the sent copy.
func (s *Service) SendDraft(ctx context.Context, p *Principal, inbox, id string, u UpdateLabels, force bool) (SendResult, error) {
	ds, d, err := s.draft(ctx, p, inbox, id)
	if err != nil {
		return SendResult{}, err
	}
	if err := checkLabels(u); err != nil {
		return SendResult{}, err
	}
	res, err := s.sendDraft(ctx, p, d, u, force)
	if err != nil {
		return SendResult{}, err
	}
	if err := ds.DeleteDraft(ctx, d.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
		return SendResult{}, err
	}
	return res, nil
}

func (s *Service) sendDraft(ctx context.Context, p *Principal, d store.Draft, u UpdateLabels, force bool) (SendResult, error) {
	var doc draftDoc
	if err := json.Unmarshal(d.Request, &doc); err != nil {
		return SendResult{}, err
	}
	labels := slices.DeleteFunc(append(slices.Clone(doc.Labels), u.AddLabels...), func(l string) bool { return slices.Contains(u.RemoveLabels, l) })
	req := SendRequest{Labels: labels, ReplyTo: doc.ReplyTo, To: doc.To, Cc: doc.Cc, Bcc: doc.Bcc, Subject: doc.Subject,
		Text: doc.Text, HTML: doc.HTML, Attachments: doc.Attachments, Force: doc.Force || force}
	// The Message-ID is the draft's: a send repeated after a crash is the
	// queue's entry already made (store.Enqueue is idempotent by it).
	ctx = withIdemMessageID(ctx, "draft."+strings.TrimPrefix(d.ID, "drf_"))
	if doc.InReplyTo != "" {
		return s.Reply(ctx, p, d.Inbox, doc.InReplyTo, req, false)
	}
	if len(req.To)+len(req.Cc)+len(req.Bcc) == 0 {
		return SendResult{}, badField("to", "the draft has no recipients")
	}
	return s.Send(ctx, p, d.Inbox, req)
}

// GetDraftAttachment returns an attachment of a draft (drafts.
// get_attachment) with a download URL made for p's key, like a
// message's; the URL stops working when the draft is sent or deleted.
func (s *Service) GetDraftAttachment(ctx context.Context, p *Principal, inbox, id, attID string) (Attachment, error) {
	_, d, err := s.draft(ctx, p, inbox, id)
	if err != nil {
		return Attachment{}, err
	}
	a, n, err := draftAttachment(d, attID)
	if err != nil {
		return Attachment{}, err
	}
	exp := s.cfg.Now().Add(downloadTTL).Truncate(time.Second).UTC()
	tok := signDownload(s.dlKey, download{Kind: "drf", Draft: strings.TrimPrefix(d.ID, "drf_"), Part: n, Expires: exp, Key: p.KeyID})
	return Attachment{AttachmentID: attID, Filename: a.Filename, Size: decodedLen(a.Content), ContentType: a.ContentType,
		ContentDisposition: a.ContentDisposition, ContentID: a.ContentID, DownloadURL: "/v0/download/" + tok, ExpiresAt: &exp}, nil
}

// draftAttachment returns the attachment attID of d and its index.
func draftAttachment(d store.Draft, attID string) (SendAttachment, int, error) {
	var doc draftDoc
	if err := json.Unmarshal(d.Request, &doc); err != nil {
		return SendAttachment{}, 0, err
	}
	for i, a := range doc.Attachments {
		if draftAttachmentID(i) == attID {
			return a, i, nil
		}
	}
	return SendAttachment{}, 0, notFound("attachment %s of draft %s not found", attID, d.ID)
}

// draftDownload is the content of a draft's attachment for a download
// token.
func (s *Service) draftDownload(ctx context.Context, d download) ([]byte, string, string, error) {
	ds, err := s.drafts()
	if err != nil {
		return nil, "", "", err
	}
	dr, err := ds.DraftByID(ctx, "drf_"+d.Draft)
	if errors.Is(err, store.ErrNotFound) {
		return nil, "", "", notFound("download link not found or expired")
	}
	if err != nil {
		return nil, "", "", err
	}
	a, n, err := draftAttachment(dr, draftAttachmentID(d.Part))
	if err != nil {
		return nil, "", "", notFound("download link not found or expired")
	}
	data, err := a.decode(n) // checked when given, unless kept from before the check
	if err != nil {
		return nil, "", "", err
	}
	ct := a.ContentType
	if ct == "" {
		ct = "application/octet-stream"
	}
	return data, ct, a.Filename, nil
}

// SendDueDrafts sends the scheduled drafts due now that this node
// claims (one runner.Loop pass); a send the rules refuse marks the draft
// failed, any other error leaves it to be claimed again after its lease.
// It returns how many were sent.
func (s *Service) SendDueDrafts(ctx context.Context) (int, error) {
	ds, ok := s.cfg.Store.(store.DraftStore)
	if !ok {
		return 0, nil
	}
	j := &draftJobs{s: s, ds: ds}
	l := &runner.Loop[store.Draft]{Name: "drafts", Worker: j, Batch: 16, Parallel: 1, Now: s.cfg.Now, Logger: s.cfg.Logger}
	_, _, err := l.Once(ctx)
	return j.sent, err
}

// draftJobs is the scheduled drafts as a runner.Worker.
type draftJobs struct {
	s    *Service
	ds   store.DraftStore
	sent int // one attempt at a time (Parallel 1)
}

func (j *draftJobs) Claim(ctx context.Context, now time.Time, limit int) ([]store.Draft, error) {
	return j.ds.ClaimDueDrafts(ctx, now, draftLease, limit)
}

// Attempt sends one claimed draft: Succeeded (the draft deleted),
// Dropped (refused: marked failed) or Retried (after its lease).
func (j *draftJobs) Attempt(ctx context.Context, d store.Draft) (runner.Outcome, error) {
	s, ds := j.s, j.ds
	system := &Principal{} // every inbox: the draft was checked against its creator's scope when made
	res, err := s.sendDraft(ctx, system, d, UpdateLabels{}, false)
	var ae *Error
	switch {
	case err == nil:
		if err := ds.DeleteDraft(ctx, d.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
			s.cfg.Logger.Warn("api: scheduled draft sent, delete failed", "draft", d.ID, "err", err)
		}
		j.sent++
		s.cfg.Logger.Info("api: scheduled draft sent", "draft", d.ID, "inbox", d.Inbox, "message_id", res.MessageID)
		return runner.Succeeded, nil
	case errors.As(err, &ae) && ae.Status >= 400 && ae.Status < 500:
		d.Status, d.LastError, d.SendAt, d.UpdatedAt = store.DraftFailed, ae.Message, time.Time{}, s.cfg.Now().UTC()
		if err := ds.UpdateDraft(ctx, d); err != nil && !errors.Is(err, store.ErrNotFound) {
			s.cfg.Logger.Warn("api: scheduled draft failed, update failed", "draft", d.ID, "err", err)
		}
		s.cfg.Logger.Warn("api: scheduled draft refused", "draft", d.ID, "err", ae.Message)
		return runner.Dropped, nil
	default:
		s.cfg.Logger.Warn("api: scheduled draft not sent; retried after its lease", "draft", d.ID, "err", err)
		return runner.Retried, nil
	}
}

// Handlers.

func (h *Handler) draftRoutes(a func(string, authed)) {
	in := "/v0/inboxes/{inbox_id}/drafts"
	a("GET "+in, h.listDrafts)
	a("POST "+in, h.createDraft)
	a("GET "+in+"/{draft_id}", h.getDraft)
	a("PATCH "+in+"/{draft_id}", h.updateDraft)
	a("DELETE "+in+"/{draft_id}", h.deleteDraft)
	a("POST "+in+"/{draft_id}/send", h.sendDraft)
	a("GET /v0/drafts", h.listDrafts)
	a("GET /v0/drafts/{draft_id}", h.getDraft)
	a("GET /v0/pods/{pod_id}/drafts", h.inPod(h.listDrafts))
	a("GET /v0/pods/{pod_id}/drafts/{draft_id}", h.inPod(h.getDraft))
	a("GET "+in+"/{draft_id}/attachments/{attachment_id}", h.getDraftAttachment)
	a("GET /v0/drafts/{draft_id}/attachments/{attachment_id}", h.getDraftAttachment)
	a("GET /v0/pods/{pod_id}/drafts/{draft_id}/attachments/{attachment_id}", h.inPod(h.getDraftAttachment))
}

func (h *Handler) listDrafts(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
	return answer(r, h.listParams, func(lp ListParams) (any, error) {
		return h.svc.ListDrafts(r.Context(), p, r.PathValue("inbox_id"), lp)
	})
}

func decodeDraft(r *http.Request) (DraftRequest, error) {
	var req DraftRequest
	if err := decode(r, &req); err != nil {
		return req, err
	}
	if r.URL.Query().Get("force") != "" {
		var force bool
		if err := boolParam(r.URL.Query(), "force", &force); err != nil {
			return req, err
		}
		req.Force = &force
	}
	return req, nil
}

func (h *Handler) createDraft(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
	return answer(r, decodeDraft, func(req DraftRequest) (any, error) {
		return h.svc.CreateDraft(r.Context(), p, r.PathValue("inbox_id"), req)
	})
}

func (h *Handler) getDraft(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
	return respond(h.svc.GetDraft(r.Context(), p, r.PathValue("inbox_id"), r.PathValue("draft_id")))
}

func (h *Handler) getDraftAttachment(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
	v, err := h.svc.GetDraftAttachment(r.Context(), p, r.PathValue("inbox_id"), r.PathValue("draft_id"), r.PathValue("attachment_id"))
	if err != nil {
		return nil, 0, err
	}
	v.DownloadURL = absURL(r, v.DownloadURL)
	return v, 0, nil
}

func (h *Handler) updateDraft(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
	return answer(r, decodeDraft, func(req DraftRequest) (any, error) {
		return h.svc.UpdateDraft(r.Context(), p, r.PathValue("inbox_id"), r.PathValue("draft_id"), req)
	})
}

func (h *Handler) deleteDraft(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
	return noContent(w, h.svc.DeleteDraft(r.Context(), p, r.PathValue("inbox_id"), r.PathValue("draft_id")))
}

func (h *Handler) sendDraft(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
	var u UpdateLabels
	if err := decode(r, &u); err != nil {
		return nil, 0, err
	}
	force := false
	if err := boolParam(r.URL.Query(), "force", &force); err != nil {
		return nil, 0, err
	}
	return respond(h.svc.SendDraft(r.Context(), p, r.PathValue("inbox_id"), r.PathValue("draft_id"), u, force))
}
