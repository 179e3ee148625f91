package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/envelopd/envelopd/store"
)

// Metrics (the SDK's metrics, inboxes.metrics and pods.metrics query):
// counts of the event log's events per type in periods, {event_type:
// [{timestamp, count}]}: message.received (with its blocked and
// unauthenticated variants), .sent, .delivered, .bounced, .rejected from
// the log; the SDK's other metric types (message.delayed, .complained)
// are accepted and always empty, as envelopd records no such events.

// MetricsStore is what metrics need of the store: the event log's
// counts.
type MetricsStore = store.EventMetrics

// MetricBucket is the SDK's MetricBucket.
type MetricBucket struct {
	Timestamp time.Time `json:"timestamp"`
	Count     int64     `json:"count"`
}

// metricTypes are the SDK's MetricEventType values.
var metricTypes = []string{"message.sent", "message.delivered", "message.bounced", "message.delayed", "message.rejected", "message.complained", "message.received"}

// MetricsQuery is a metrics.query.
type MetricsQuery struct {
	EventTypes []string
	Start, End time.Time
	Period     time.Duration
	Limit      int // buckets per type (0: all)
	Descending bool
}

var periodRE = regexp.MustCompile(`^([0-9]{1,6})([smhd])$`)

// ParseMetricsQuery reads the query string: event_types (repeated),
// start and end (RFC 3339; default the last 24 hours), period (N
// followed by s, m, h or d, or a number of seconds; default 1h), limit,
// descending.
func ParseMetricsQuery(q url.Values, now time.Time) (MetricsQuery, error) {
	m := MetricsQuery{End: now.UTC(), Period: time.Hour}
	var err error
	if m.EventTypes, err = enumParam(q, "event_types", metricTypes); err != nil {
		return m, err
	}
	if err := timeParams(q, []string{"start", "end"}, &m.Start, &m.End); err != nil {
		return m, err
	}
	m.Start, m.End = m.Start.UTC(), m.End.UTC()
	if m.Start.IsZero() {
		m.Start = m.End.Add(-24 * time.Hour)
	}
	if v := q.Get("period"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			m.Period = time.Duration(n) * time.Second
		} else if sm := periodRE.FindStringSubmatch(v); sm != nil && sm[1] != "0" {
			n, _ := strconv.Atoi(sm[1])
			unit := map[string]time.Duration{"s": time.Second, "m": time.Minute, "h": time.Hour, "d": 24 * time.Hour}[sm[2]]
			m.Period = time.Duration(n) * unit
		} else {
			return m, badField("period", "want a period such as 60s, 15m, 1h or 1d")
		}
	}
	if !m.End.After(m.Start) {
		return m, badField("start", "start must be before end")
	}
	if m.End.Sub(m.Start)/m.Period > store.MaxBuckets {
		return m, badField("period", "at most %d periods between start and end", store.MaxBuckets)
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return m, badField("limit", "want a positive integer")
		}
		m.Limit = n
	}
	if err := boolParam(q, "descending", &m.Descending); err != nil {
		return m, err
	}
	return m, nil
}

// QueryMetrics answers a metrics query over inbox ("": every inbox p
// may see).
func (s *Service) QueryMetrics(ctx context.Context, p *Principal, inbox string, m MetricsQuery) (map[string][]MetricBucket, error) {
	ms, ok := s.cfg.Store.(MetricsStore)
	if !ok {
		return nil, &Error{Status: http.StatusNotImplemented, Name: "NotImplementedError", Message: "this store keeps no event counts"}
	}
	inboxes := p.Inboxes
	if inbox != "" {
		b, err := s.inbox(ctx, p, inbox)
		if err != nil {
			return nil, err
		}
		inboxes = []string{b.Address}
	}
	if inboxes == nil && p.Inboxes != nil {
		inboxes = []string{}
	}
	counts, err := ms.EventCounts(ctx, inboxes, m.EventTypes, m.Start, m.End, m.Period)
	if err != nil {
		return nil, err
	}
	out := map[string][]MetricBucket{}
	types := m.EventTypes
	if len(types) == 0 {
		types = metricTypes
	}
	for _, t := range types {
		bs := []MetricBucket{}
		for _, b := range counts[t] {
			bs = append(bs, MetricBucket{Timestamp: b.Start, Count: b.Count})
		}
		out[t] = order(m, bs)
	}
	return out, nil
}

func (h *Handler) metricsRoutes(a func(string, authed)) {
	f := func(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
		m, err := ParseMetricsQuery(r.URL.Query(), h.svc.cfg.Now())
		if err != nil {
			return nil, 0, err
		}
		v, err := h.svc.QueryMetrics(r.Context(), p, r.PathValue("inbox_id"), m)
		return v, 0, err
	}
	// …/metrics/events is the TypeScript SDK's metrics.queryEvents: the
	// same query and answer.
	for _, suffix := range []string{"", "/events"} {
		a("GET /v0/metrics"+suffix, f)
		a("GET /v0/inboxes/{inbox_id}/metrics"+suffix, f)
		a("GET /v0/pods/{pod_id}/metrics"+suffix, h.inPod(f))
	}
}

// order puts a series in the query's order (descending: newest first)
// and keeps its first Limit items.
func order[T any](m MetricsQuery, s []T) []T {
	if m.Descending {
		slices.Reverse(s)
	}
	if m.Limit > 0 && len(s) > m.Limit {
		s = s[:m.Limit]
	}
	return s
}

// enumParam reads a list parameter: repeated, or one JSON array (the
// Python SDK sends a list so); each value one of allowed, a repeated one
// kept once.
func enumParam(q url.Values, name string, allowed []string) ([]string, error) {
	var out []string
	for _, v := range q[name] {
		vs := []string{v}
		if strings.HasPrefix(strings.TrimSpace(v), "[") {
			if err := json.Unmarshal([]byte(v), &vs); err != nil {
				return nil, badField(name, "want values, repeated or as a JSON array")
			}
		}
		for _, x := range vs {
			if !slices.Contains(allowed, x) {
				return nil, badField(name, "unknown value %q (want one of %s)", x, strings.Join(allowed, ", "))
			}
			if !slices.Contains(out, x) {
				out = append(out, x)
			}
		}
	}
	return out, nil
}
