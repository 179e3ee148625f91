package mailin

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestMetricsCountStatusTypeAndCodes(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	ts := startServer(t, SMTPConfig{}, func(p *Pipeline) { p.Metrics = m })
	ts.deliver(t, "../testdata/flows/replay/01-pay.eml")
	ts.deliver(t, "../testdata/flows/replay/01-pay.eml")
	ts.deliver(t, "../testdata/flows/replay/02-pay-same-proof.eml")
	ts.deliver(t, "../testdata/flows/exchange/01-offer.eml")
	ts.deliver(t, "../testdata/flows/exchange/02-accept-short.eml")
	for _, c := range []struct {
		got  float64
		want float64
		what string
	}{
		{testutil.ToFloat64(m.Messages.WithLabelValues("accepted", "pay")), 1, "accepted pay"},
		{testutil.ToFloat64(m.Messages.WithLabelValues("duplicate", "pay")), 1, "duplicate pay"},
		{testutil.ToFloat64(m.Messages.WithLabelValues("accepted", "offer")), 1, "accepted offer"},
		{testutil.ToFloat64(m.Messages.WithLabelValues("quarantined", "accept")), 1, "quarantined accept"},
		{testutil.ToFloat64(m.Errors.WithLabelValues("duplicate_proof")), 1, "duplicate_proof"},
		{testutil.ToFloat64(m.Errors.WithLabelValues("amount_mismatch")), 1, "amount_mismatch"},
		{testutil.ToFloat64(m.Redeliver), 1, "redeliveries"},
		{float64(testutil.CollectAndCount(m.Latency)), 1, "latency histogram series"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.what, c.got, c.want)
		}
	}
}
