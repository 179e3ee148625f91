// Package metrics records the ingest pipeline's outcomes as Prometheus
// metrics: a *Metrics is a mailin.Metrics (set Pipeline.Metrics to it).
//
// It is a package of its own so that mailin, and mailin/relaytest which an
// agent's tests import, do not pull the Prometheus client (and its
// protobuf, procfs, ... dependencies) into a user's module graph; only
// cmd/envelopd imports it.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/envelopd/envelopd/mailin"
	"github.com/envelopd/envelopd/message"
	"github.com/envelopd/envelopd/store"
)

var _ mailin.Metrics = (*Metrics)(nil)

// Metrics are the ingest pipeline's Prometheus metrics. A nil *Metrics
// records nothing.
type Metrics struct {
	Messages  *prometheus.CounterVec // by status, type
	DKIM      *prometheus.CounterVec // by result
	Errors    *prometheus.CounterVec // by code
	Latency   prometheus.Histogram   // ingest latency, seconds
	Redeliver prometheus.Counter
	// OOPSSuppressed counts courtesy OOPS owed but not sent, by reason
	// (store.OOPSSenderUnverified, …).
	OOPSSuppressed *prometheus.CounterVec
	// InFlightBusy counts DATA refused 451 4.3.2 by the in-flight budget.
	InFlightBusy prometheus.Counter
	// SenderAuth counts stored messages' sender checks by check (spf,
	// dmarc, arc, authenticated) and result word ("yes"/"no" for
	// authenticated).
	SenderAuth *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "envelopd_messages_total", Help: "Stored messages by status and Envelopay type.",
		}, []string{"status", "type"}),
		DKIM: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "envelopd_dkim_results_total", Help: "DKIM signature results.",
		}, []string{"result"}),
		Errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "envelopd_errors_total", Help: "Message errors by code.",
		}, []string{"code"}),
		Latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "envelopd_ingest_seconds",
			Help:    "Time from raw bytes to durable commit.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
		Redeliver: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "envelopd_redeliveries_total", Help: "Exact redeliveries of stored messages.",
		}),
	}
	m.OOPSSuppressed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "envelopd_oops_suppressed_total", Help: "Courtesy OOPS owed but not sent, by reason.",
	}, []string{"reason"})
	reg.MustRegister(m.Messages, m.DKIM, m.Errors, m.Latency, m.Redeliver, m.OOPSSuppressed)
	m.InFlightBusy = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "envelopd_smtp_in_flight_busy_total", Help: "DATA refused with 451 4.3.2: the in-flight byte budget stayed full.",
	})
	reg.MustRegister(m.InFlightBusy)
	m.SenderAuth = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "envelopd_sender_auth_total", Help: "Sender checks of stored messages by check (spf, dmarc, arc, authenticated) and result.",
	}, []string{"check", "result"})
	reg.MustRegister(m.SenderAuth)
	return m
}

// Observe records one stored message (mailin.Metrics).
func (m *Metrics) Observe(in *store.Incoming, a *message.Analysis, out store.Outcome, d time.Duration) {
	if m == nil {
		return
	}
	m.Latency.Observe(d.Seconds())
	if out.Redelivery {
		m.Redeliver.Inc()
		return
	}
	typ := in.Type
	if typ == "" {
		typ = "none"
	}
	m.Messages.WithLabelValues(out.Status, typ).Inc()
	for _, r := range a.DKIM {
		m.DKIM.WithLabelValues(r.Result).Inc()
	}
	for _, e := range out.Errors {
		m.Errors.WithLabelValues(string(e.Code)).Inc()
	}
	if v := a.Sender; v != nil && m.SenderAuth != nil {
		m.SenderAuth.WithLabelValues("spf", v.SPF.Result).Inc()
		m.SenderAuth.WithLabelValues("dmarc", v.DMARC.Result).Inc()
		m.SenderAuth.WithLabelValues("arc", v.ARC.Result).Inc()
		auth := "no"
		if v.AuthenticatedAs != "" {
			auth = "yes"
		}
		m.SenderAuth.WithLabelValues("authenticated", auth).Inc()
	}
	if out.OOPS != nil && !out.OOPS.Sent && !out.OOPS.Pending {
		m.OOPSSuppressed.WithLabelValues(out.OOPS.Reason).Inc()
	}
}

// ObserveInFlightBusy counts a DATA refused 451 4.3.2 by the in-flight
// budget (mailin.BusyObserver).
func (m *Metrics) ObserveInFlightBusy() {
	if m != nil && m.InFlightBusy != nil {
		m.InFlightBusy.Inc()
	}
}
