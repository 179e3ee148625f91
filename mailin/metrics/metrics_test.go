package metrics

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/envelopd/envelopd/dkim"
	"github.com/envelopd/envelopd/mailin"
	"github.com/envelopd/envelopd/message"
	"github.com/envelopd/envelopd/parse"
	"github.com/envelopd/envelopd/senderauth"
	"github.com/envelopd/envelopd/store"
)

func TestMetricsCountStatusTypeAndCodes(t *testing.T) {
	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, filepath.Join(t.TempDir(), "envelopd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	p := &mailin.Pipeline{Store: st, Metrics: m}
	deliver := func(path string) {
		t.Helper()
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		meta := mailin.Meta{Source: "smtp", MailFrom: "sender@client.test", Rcpts: []string{"rcpt@server.test"}}
		if _, err := p.Ingest(ctx, raw, meta); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	deliver("../../testdata/flows/replay/01-pay.eml")
	deliver("../../testdata/flows/replay/01-pay.eml")
	deliver("../../testdata/flows/replay/02-pay-same-proof.eml")
	deliver("../../testdata/flows/exchange/01-offer.eml")
	deliver("../../testdata/flows/exchange/02-accept-short.eml")
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

// TestMetricsOOPSSuppressedAndBusy: an outcome whose OOPS was owed but not
// sent counts under its reason, a sent one does not; each in-flight
// refusal counts once.
func TestMetricsOOPSSuppressedAndBusy(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	var _ mailin.BusyObserver = m
	a := &message.Analysis{Result: &parse.Result{Type: "pay"}}
	for _, out := range []store.Outcome{
		{Status: store.StatusQuarantined, OOPS: &store.OOPSRecord{Reason: store.OOPSSenderUnverified}},
		{Status: store.StatusQuarantined, OOPS: &store.OOPSRecord{Reason: store.OOPSSenderUnverified}},
		{Status: store.StatusQuarantined, OOPS: &store.OOPSRecord{Sent: true}},
		{Status: store.StatusAccepted},
	} {
		m.Observe(&store.Incoming{}, a, out, 0)
	}
	m.ObserveInFlightBusy()
	if got := testutil.ToFloat64(m.OOPSSuppressed.WithLabelValues(store.OOPSSenderUnverified)); got != 2 {
		t.Errorf("oops_suppressed{sender_unverified} = %v, want 2", got)
	}
	if got := testutil.CollectAndCount(m.OOPSSuppressed); got != 1 {
		t.Errorf("%d oops_suppressed series, want 1", got)
	}
	if got := testutil.ToFloat64(m.InFlightBusy); got != 1 {
		t.Errorf("in_flight_busy = %v, want 1", got)
	}
}

// TestMetricsSenderAuth: the sender checks of each stored message are
// counted by check and result.
func TestMetricsSenderAuth(t *testing.T) {
	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, filepath.Join(t.TempDir(), "envelopd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	m := NewMetrics(prometheus.NewRegistry())
	table := dkim.NewStaticResolver()
	table.Add("_dmarc.client.test", "v=DMARC1; p=reject")
	p := &mailin.Pipeline{Store: st, Metrics: m, Sender: &senderauth.Checker{Resolver: senderauth.TXTTable{Table: table}}}
	raw := []byte("From: a@client.test\r\nTo: b@server.test\r\nSubject: hi\r\nMessage-ID: <m1@client.test>\r\n\r\nhi\r\n")
	spf := &senderauth.SPF{Result: "pass", Domain: "client.test"}
	if _, err := p.Ingest(ctx, raw, mailin.Meta{Source: "smtp", MailFrom: "a@client.test", SPF: spf}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ check, result string }{{"spf", "pass"}, {"dmarc", "pass"}, {"arc", "none"}, {"authenticated", "yes"}} {
		if got := testutil.ToFloat64(m.SenderAuth.WithLabelValues(c.check, c.result)); got != 1 {
			t.Errorf("%s=%s counted %v, want 1", c.check, c.result, got)
		}
	}
}
