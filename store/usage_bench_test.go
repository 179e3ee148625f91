package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/envelopd/envelopd/store"
)

// BenchmarkSyncInboxes: the inbox index taking new messages (the usage
// counters are written in its transaction), in steps of 2,000, a new
// thread every fourth message; cpu-µs/msg is the figure to compare.
func BenchmarkSyncInboxes(b *testing.B) {
	s := openBench(b)
	ctx := context.Background()
	const step = 2000
	var n int64
	var cpu time.Duration
	for range b.N {
		b.StopTimer()
		for range step {
			m := benchMessage(n)
			if n%4 != 0 {
				m.InReplyTo = []string{benchMessage(n - n%4).MessageID}
			}
			if _, err := s.Ingest(ctx, m); err != nil {
				b.Fatal(err)
			}
			n++
		}
		b.StartTimer()
		c0 := cpuNow()
		if got, err := s.SyncInboxes(ctx, 0); err != nil || got != step {
			b.Fatalf("synced %d, %v", got, err)
		}
		cpu += cpuNow() - c0
	}
	b.ReportMetric(float64(cpu.Microseconds())/float64(n), "cpu-µs/msg")
}

// BenchmarkUsageYear: a year of usage in daily points, for one inbox and
// the organisation, when every hour of the year had mail (the counters'
// worst case: one row per inbox and hour, 8,760; the number of messages
// does not matter beyond that).
func BenchmarkUsageYear(b *testing.B) {
	s := openBench(b)
	ctx := context.Background()
	end := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	start := end.AddDate(-1, 0, 0)
	for h := int64(0); h < 8760; h++ {
		m := benchMessage(h)
		m.ReceivedAt = start.Add(time.Duration(h) * time.Hour)
		if _, err := s.Ingest(ctx, m); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := s.SyncInboxes(ctx, 0); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		for _, inboxes := range [][]string{{"shop@shop.test"}, nil} {
			_, u, err := s.Usage(ctx, inboxes, start, end, 24*time.Hour)
			if err != nil || u[len(u)-1].Messages != 8760 {
				b.Fatalf("%+v %v", u[len(u)-1], err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(2*b.N), "µs/query")
	_ = store.MaxUsagePoints
}
