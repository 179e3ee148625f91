package store_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/envelopd/envelopd/internal/pgtest"
	"github.com/envelopd/envelopd/store"
)

// BenchmarkPostgresIngest: 10 concurrent sessions spread over 1, 2 and 3
// store instances ("nodes", each with its own pool) on one Postgres
// database (ENVELOPD_PG_DSN; quote figures only from a server with fsync
// on). cpu-µs/msg is this process's CPU — the nodes' share, not the
// database server's.
func BenchmarkPostgresIngest(b *testing.B) {
	for _, nodes := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			dsn := pgtest.Schema(b)
			ss := make([]store.Store, nodes)
			for i := range ss {
				s, err := store.OpenPostgres(context.Background(), dsn)
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				ss[i] = s
			}
			ctx := context.Background()
			var n, g atomic.Int64
			b.SetParallelism(max(1, 10/runtime.GOMAXPROCS(0)))
			c0 := cpuNow()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				s := ss[int(g.Add(1))%nodes]
				for pb.Next() {
					if _, err := s.Ingest(ctx, benchMessage(n.Add(1))); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msg/s")
			b.ReportMetric(float64((cpuNow()-c0).Microseconds())/float64(b.N), "cpu-µs/msg")
		})
	}
}
