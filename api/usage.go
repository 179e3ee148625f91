package api

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/envelopd/envelopd/store"
)

// Usage (the SDK's metrics.queryUsage and the inbox and pod ones,
// …/metrics/usage): {usage_type: [{timestamp, value}]}, the cumulative
// value of each type at the end of each period, from the inbox index's
// usage counters (store.UsageStore): storage_bytes, message_count and
// thread_count at every scope; inbox_count and domain_count at the
// pod's and the organisation's; pod_count at the organisation's.

// UsagePoint is the SDK's UsagePoint.
type UsagePoint struct {
	Timestamp time.Time `json:"timestamp"`
	Value     int64     `json:"value"`
}

// usageTypes are the SDK's UsageType values, in the order of the scopes
// that carry them: an inbox the first three, the pod two more, the
// organisation all.
var usageTypes = []string{"storage_bytes", "message_count", "thread_count", "inbox_count", "domain_count", "pod_count"}

// UsageQuery is a metrics.queryUsage.
type UsageQuery struct {
	Types []string // nil: every type of the scope
	MetricsQuery
}

// ParseUsageQuery reads the query string: usage_types (repeated or one
// JSON array, as the SDKs send lists) and the metrics query's start,
// end, period, limit and descending.
func ParseUsageQuery(q url.Values, now time.Time) (UsageQuery, error) {
	var u UsageQuery
	var err error
	if u.Types, err = enumParam(q, "usage_types", usageTypes); err != nil {
		return u, err
	}
	rest := url.Values{}
	for k, v := range q {
		if k != "usage_types" {
			rest[k] = v
		}
	}
	u.MetricsQuery, err = ParseMetricsQuery(rest, now)
	return u, err
}

// QueryUsage answers a usage query at a scope: inbox (its address), the
// pod (pod true) or the organisation. A key scoped to inboxes counts its
// inboxes and gets no domain_count values (it may not manage domains).
func (s *Service) QueryUsage(ctx context.Context, p *Principal, inbox string, pod bool, u UsageQuery) (map[string][]UsagePoint, error) {
	us, ok := s.cfg.Store.(store.UsageStore)
	if !ok {
		return nil, &Error{Status: http.StatusNotImplemented, Name: "NotImplementedError", Message: "this store keeps no usage counters"}
	}
	scope := usageTypes // the organisation
	inboxes := p.Inboxes
	switch {
	case inbox != "":
		b, err := s.inbox(ctx, p, inbox)
		if err != nil {
			return nil, err
		}
		scope, inboxes = usageTypes[:3], []string{b.Address}
	case pod:
		scope = usageTypes[:5]
	}
	types := u.Types
	if types == nil {
		types = scope
	}
	for _, t := range types {
		if !slices.Contains(scope, t) {
			return nil, badField("usage_types", "%s is not counted at this scope (an inbox has storage_bytes, message_count and thread_count; the pod adds inbox_count and domain_count; the organisation pod_count)", t)
		}
	}
	if _, err := store.UsagePoints(u.Start, u.End, u.Period); err != nil {
		return nil, badField("period", "at most %d periods between start and end", store.MaxUsagePoints)
	}
	if inboxes == nil && p.Inboxes != nil {
		inboxes = []string{}
	}
	at, got, err := us.Usage(ctx, inboxes, u.Start, u.End, u.Period)
	if err != nil {
		return nil, err
	}
	var domains []time.Time // creation times of the managed domains
	if slices.Contains(types, "domain_count") && p.Inboxes == nil && s.cfg.DomainService != nil {
		ds, err := s.cfg.DomainService.List(ctx)
		if err != nil {
			return nil, err
		}
		for _, d := range ds {
			domains = append(domains, d.CreatedAt)
		}
	}
	since, err := s.since(ctx, p)
	if err != nil {
		return nil, err
	}
	out := map[string][]UsagePoint{}
	for _, t := range types {
		ps := []UsagePoint{}
		for i, ti := range at {
			var v int64
			switch t {
			case "storage_bytes":
				v = got[i].Bytes
			case "message_count":
				v = got[i].Messages
			case "thread_count":
				v = got[i].Threads
			case "inbox_count":
				v = got[i].Inboxes
			case "domain_count":
				if p.Inboxes != nil || s.cfg.DomainService == nil {
					continue // not known to this key: no values
				}
				for _, c := range domains {
					if c.Before(ti) {
						v++
					}
				}
			case "pod_count":
				if since.Before(ti) {
					v = 1
				}
			}
			ps = append(ps, UsagePoint{Timestamp: ti, Value: v})
		}
		out[t] = order(u.MetricsQuery, ps)
	}
	return out, nil
}

func (h *Handler) usageRoutes(a func(string, authed)) {
	f := func(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
		var v map[string][]UsagePoint
		u, err := ParseUsageQuery(r.URL.Query(), h.svc.cfg.Now())
		if err == nil {
			// The pod's route names pod_id (inPod checked it).
			v, err = h.svc.QueryUsage(r.Context(), p, r.PathValue("inbox_id"), r.PathValue("pod_id") != "", u)
		}
		return v, 0, err
	}
	a("GET /v0/metrics/usage", f)
	a("GET /v0/inboxes/{inbox_id}/metrics/usage", f)
	a("GET /v0/pods/{pod_id}/metrics/usage", h.inPod(f))
}
