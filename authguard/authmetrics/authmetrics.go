// Package authmetrics counts authentication failures and refusals of
// package authguard in Prometheus: envelopd_auth_failures_total{service,
// mechanism} and envelopd_auth_refused_total{service,reason}.
package authmetrics

import "github.com/prometheus/client_golang/prometheus"

// Metrics implements authguard.Metrics.
type Metrics struct {
	Failures *prometheus.CounterVec // by service, mechanism
	Refusals *prometheus.CounterVec // by service, reason (locked_out, busy)
}

// New creates the metrics and registers them with reg.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "envelopd_auth_failures_total", Help: "Failed authentications by service and mechanism.",
		}, []string{"service", "mechanism"}),
		Refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "envelopd_auth_refused_total", Help: "Authentications refused before any check, by service and reason (locked_out, busy).",
		}, []string{"service", "reason"}),
	}
	reg.MustRegister(m.Failures, m.Refusals)
	return m
}

// Failed counts a failed authentication.
func (m *Metrics) Failed(service, mechanism string) {
	m.Failures.WithLabelValues(service, mechanism).Inc()
}

// Refused counts an attempt refused before any check.
func (m *Metrics) Refused(service, reason string) {
	m.Refusals.WithLabelValues(service, reason).Inc()
}
