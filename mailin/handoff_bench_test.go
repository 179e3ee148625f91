package mailin

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/envelopd/envelopd/parse"
	"github.com/envelopd/envelopd/store"
)

// BenchmarkHandoff: the hand-off of stored 2.5 KB messages to an agent
// that takes each at once: claim, read, the message's JSON, done; the
// process CPU per message (cpu-µs/op). Figures in docs/performance.md.
func BenchmarkHandoff(b *testing.B) {
	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, filepath.Join(b.TempDir(), "h.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	text := strings.Repeat("Line of an ordinary invoice, total 42.00 EUR, thanks.\r\n", 42)
	for i := range b.N {
		raw := []byte(fmt.Sprintf("From: a%d@x.test\r\nTo: agent@here.test\r\nSubject: Invoice %d\r\nMessage-ID: <h%d@x.test>\r\n\r\n%s", i%50, i, i, text))
		r := parse.Parse(raw, parse.Options{})
		js, err := r.MarshalJSON()
		if err != nil {
			b.Fatal(err)
		}
		in := &store.Incoming{Direction: store.DirIn, Raw: raw, MessageID: r.MessageID, Sender: r.From[0], Recipients: r.To,
			Subject: r.Subject, Status: store.StatusAccepted, Result: js, Handoff: []string{"agent"}, ReceivedAt: time.Now()}
		if _, err := st.Ingest(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
	got := 0
	h := &Handoff{Store: st, Target: "agent", Deliver: func(_ context.Context, _ Event, payload []byte) error {
		if len(payload) == 0 {
			return fmt.Errorf("empty payload")
		}
		got++
		return nil
	}}
	cpu0 := cpuTime()
	b.ResetTimer()
	for got < b.N {
		n, err := h.RunOnce(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if n == 0 {
			b.Fatalf("%d of %d handed off, then nothing due", got, b.N)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
}
