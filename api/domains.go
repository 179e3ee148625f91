package api

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/envelopd/envelopd/domain"
	"github.com/envelopd/envelopd/store"
)

// The domains endpoints (the SDK's DomainsClient: list, get, create,
// delete, verify, getZoneFile) over package domain — the same code as
// `envelopd domain`, and the same under the one pod (pods.domains). A
// domain's id is its name. Updating the SDK's feedback/subdomain/
// tracking flags (envelopd has none of the three features) and Domain
// Connect setup links are not implemented (501). Only unscoped keys
// manage domains.

// DomainRecord is the SDK's VerificationRecord.
type DomainRecord struct {
	Type     string `json:"type"`
	Name     string `json:"name"`
	Value    string `json:"value"`
	Status   string `json:"status"` // VALID, MISSING, INVALID
	Priority int    `json:"priority,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// DomainObject is the SDK's Domain (DomainItem without records).
type DomainObject struct {
	DomainID          string         `json:"domain_id"`
	Domain            string         `json:"domain"`
	Status            string         `json:"status,omitempty"` // NOT_STARTED, PENDING, INVALID, VERIFIED
	Reason            string         `json:"reason,omitempty"`
	FeedbackEnabled   bool           `json:"feedback_enabled"`
	SubdomainsEnabled bool           `json:"subdomains_enabled"`
	TrackingEnabled   bool           `json:"tracking_enabled"`
	Records           []DomainRecord `json:"records,omitempty"`
	ClientID          string         `json:"client_id,omitempty"`
	UpdatedAt         time.Time      `json:"updated_at"`
	CreatedAt         time.Time      `json:"created_at"`
}

// domainObject renders d; item leaves out status and records (DomainItem).
func domainObject(d domain.Domain, item bool) DomainObject {
	o := DomainObject{DomainID: d.Name, Domain: d.Name, ClientID: d.ClientID, CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt}
	if item {
		return o
	}
	o.Records = []DomainRecord{}
	missing, invalid := false, false
	results := d.Records
	for i, r := range domain.Records(d.Name, d.Config) {
		rec := DomainRecord{Type: r.Type, Name: r.Name, Value: r.Value, Priority: r.Priority, Status: "MISSING"}
		state := domain.StateUnchecked
		var got string
		if i < len(results) && results[i].Name == r.Name && results[i].Kind == r.Kind {
			state, got = results[i].State, results[i].Got
		}
		switch state {
		case domain.StateOK:
			rec.Status = "VALID"
		case domain.StateDifferent:
			rec.Status, rec.Reason = "INVALID", "value_mismatch"
			if strings.Contains(results[i].Detail, "several") || strings.Contains(results[i].Detail, "too") {
				rec.Reason = "duplicate_records"
			}
		case domain.StatePropagating:
			rec.Reason = "propagating"
			if got != "" {
				rec.Status = "INVALID"
			}
		case domain.StateError:
			rec.Status, rec.Reason = "INVALID", "lookup_failed"
		}
		missing = missing || rec.Status == "MISSING"
		invalid = invalid || rec.Status == "INVALID"
		o.Records = append(o.Records, rec)
	}
	switch {
	case d.CheckedAt == nil:
		o.Status = "NOT_STARTED"
	case d.Status == store.DomainVerified:
		o.Status = "VERIFIED"
	case d.Status == store.DomainInvalid:
		o.Status = "INVALID"
	default:
		o.Status = "PENDING"
	}
	if o.Status != "VERIFIED" {
		switch {
		case invalid:
			o.Reason = "dns_records_invalid"
		case missing:
			o.Reason = "dns_records_missing"
		}
	}
	return o
}

// domainError maps package domain's errors to the API's.
func domainError(err error) error {
	var de *domain.Error
	if !errors.As(err, &de) {
		return err
	}
	switch {
	case errors.Is(err, domain.ErrNotFound):
		return notFound("%s", de.Error())
	case errors.Is(err, domain.ErrExists):
		return &Error{Status: http.StatusConflict, Name: "AlreadyExistsError", Message: de.Error()}
	}
	return validation(de.Error(), []Problem{{Code: de.Code(), Field: "domain", Message: de.Reason}})
}

// domains returns the domain service, or 501 when this server has none;
// scoped keys are refused.
func (h *Handler) domains(p *Principal) (*domain.Service, error) {
	if h.svc.cfg.DomainService == nil {
		return nil, &Error{Status: http.StatusNotImplemented, Name: "NotImplementedError", Message: "this server manages no domains"}
	}
	if p.Inboxes != nil {
		return nil, &Error{Status: http.StatusForbidden, Name: "ForbiddenError", Message: "a key scoped to inboxes cannot manage domains"}
	}
	return h.svc.cfg.DomainService, nil
}

func (h *Handler) domainRoutes(a func(string, authed)) {
	d := func(pattern string, f domainHandler) { a(pattern, h.withDomains(f)) }
	d("GET /v0/domains", h.listDomains)
	d("POST /v0/domains", h.createDomain)
	d("GET /v0/domains/{domain_id}", h.getDomain)
	d("DELETE /v0/domains/{domain_id}", h.deleteDomain)
	d("POST /v0/domains/{domain_id}/verify", h.verifyDomain)
	d("GET /v0/domains/{domain_id}/zone-file", h.domainZone)
	// The one pod holds the organisation's domains (pods.domains).
	p := func(pattern string, f domainHandler) { a(pattern, h.inPod(h.withDomains(f))) }
	p("GET /v0/pods/{pod_id}/domains", h.listDomains)
	p("POST /v0/pods/{pod_id}/domains", h.createDomain)
	p("GET /v0/pods/{pod_id}/domains/{domain_id}", h.getDomain)
	p("DELETE /v0/pods/{pod_id}/domains/{domain_id}", h.deleteDomain)
	p("POST /v0/pods/{pod_id}/domains/{domain_id}/verify", h.verifyDomain)
	p("GET /v0/pods/{pod_id}/domains/{domain_id}/zone-file", h.domainZone)
}

// domainHandler is a domain route: it runs with the domain service once
// the caller may manage domains (h.domains).
type domainHandler func(w http.ResponseWriter, r *http.Request, svc *domain.Service) (any, int, error)

func (h *Handler) withDomains(f domainHandler) authed {
	return func(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
		svc, err := h.domains(p)
		if err != nil {
			return nil, 0, err
		}
		return f(w, r, svc)
	}
}

// CreateDomainRequest is the SDK's CreateDomainRequest.
type CreateDomainRequest struct {
	Domain                   string `json:"domain"`
	AllowConflictingProvider bool   `json:"allow_conflicting_provider"`
	FeedbackEnabled          bool   `json:"feedback_enabled"`
	SubdomainsEnabled        bool   `json:"subdomains_enabled"`
	TrackingEnabled          bool   `json:"tracking_enabled"`
	ClientID                 string `json:"client_id"`
}

func (h *Handler) createDomain(w http.ResponseWriter, r *http.Request, svc *domain.Service) (any, int, error) {
	var req CreateDomainRequest
	if err := decode(r, &req); err != nil {
		return nil, 0, err
	}
	switch {
	case req.Domain == "":
		return nil, 0, badField("domain", "required")
	case req.SubdomainsEnabled:
		return nil, 0, badField("subdomains_enabled", "inboxes on subdomains are not supported by envelopd")
	case req.TrackingEnabled:
		return nil, 0, badField("tracking_enabled", "open tracking is not supported by envelopd")
	case req.FeedbackEnabled:
		return nil, 0, badField("feedback_enabled", "bounce and complaint mail to inboxes is not supported by envelopd (bounces are message.bounced events)")
	}
	d, err := svc.Add(r.Context(), req.Domain, domain.Config{}, req.ClientID)
	if err != nil {
		return nil, 0, domainError(err)
	}
	return domainObject(d, false), http.StatusOK, nil
}

func (h *Handler) getDomain(w http.ResponseWriter, r *http.Request, svc *domain.Service) (any, int, error) {
	d, err := svc.Get(r.Context(), r.PathValue("domain_id"))
	if err != nil {
		return nil, 0, domainError(err)
	}
	return domainObject(d, false), 0, nil
}

// ListDomainsResponse is the SDK's.
type ListDomainsResponse struct {
	Count   int            `json:"count"`
	Domains []DomainObject `json:"domains"`
}

func (h *Handler) listDomains(w http.ResponseWriter, r *http.Request, svc *domain.Service) (any, int, error) {
	ds, err := svc.List(r.Context())
	if err != nil {
		return nil, 0, err
	}
	out := ListDomainsResponse{Domains: []DomainObject{}}
	for _, d := range ds {
		out.Domains = append(out.Domains, domainObject(d, true))
	}
	out.Count = len(out.Domains)
	return out, 0, nil
}

func (h *Handler) deleteDomain(w http.ResponseWriter, r *http.Request, svc *domain.Service) (any, int, error) {
	return noContent(w, domainError(svc.Delete(r.Context(), r.PathValue("domain_id"))))
}

// verifyDomain checks the records now (the SDK's verify answers no
// body; get shows the outcome). The first check that finds every
// record right writes domain.verified.
func (h *Handler) verifyDomain(w http.ResponseWriter, r *http.Request, svc *domain.Service) (any, int, error) {
	if _, err := svc.Check(r.Context(), r.PathValue("domain_id")); err != nil {
		return nil, 0, domainError(err)
	}
	return noContent(w, nil)
}

func (h *Handler) domainZone(w http.ResponseWriter, r *http.Request, svc *domain.Service) (any, int, error) {
	d, err := svc.Get(r.Context(), r.PathValue("domain_id"))
	if err != nil {
		return nil, 0, domainError(err)
	}
	w.Header().Set("Content-Type", "text/dns; charset=utf-8") // RFC 4027
	w.Header().Set("Content-Disposition", `attachment; filename="`+d.Name+`.zone"`)
	w.Write([]byte(domain.Zone(d.Name, d.Config)))
	return nil, 0, nil
}

// domainEvent renders domain.verified (the SDK's DomainVerifiedEvent):
// the domain as it is now; a domain no longer managed is ErrNotFound
// (the event is skipped, as one of a deleted message is).
func (s *Service) domainEvent(ctx context.Context, o EventObject, e store.Event) (EventObject, error) {
	if s.cfg.DomainService == nil {
		return o, store.ErrNotFound
	}
	d, err := s.cfg.DomainService.Get(ctx, e.Detail)
	if errors.Is(err, domain.ErrNotFound) {
		return o, store.ErrNotFound
	}
	if err != nil {
		return o, err
	}
	do := domainObject(d, false)
	o.Domain = &do
	return o, nil
}
