package store_test

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/envelopd/envelopd/store"
)

// benchMessage is a realistic 2 KB incoming PAY: unique Message-ID, id and
// proof, a parse result, a hand-off target.
func benchMessage(n int64) *store.Incoming {
	mid := fmt.Sprintf("bench%d@alice.test", n)
	head := "Message-ID: <" + mid + ">\r\nFrom: alice@alice.test\r\nTo: shop@shop.test\r\nSubject: PAY | 5 USDC\r\n" +
		"DKIM-Signature: v=1; a=ed25519-sha256; d=alice.test; s=ed1; b=" + strings.Repeat("A", 86) + "\r\n\r\n"
	body := fmt.Sprintf(`{"v":"0.2.0","type":"pay","id":"pay_%d","amount":"5000000","token":"USDC","chain":"base","proof":{"tx":"0x%064x"}}`, n, n)
	raw := []byte(head + body + "\r\n" + strings.Repeat("x", 2048-len(head)-len(body)-4) + "\r\n")
	return &store.Incoming{
		Direction: store.DirIn, Raw: raw, MessageID: mid, Sender: "alice@alice.test",
		Recipients: []string{"shop@shop.test"}, Subject: "PAY | 5 USDC", ReceivedAt: time.Now(),
		Type: "pay", EnvelopayID: fmt.Sprintf("pay_%d", n), Refs: map[string]string{"invoice_ref": "inv_1"},
		ProofFingerprint: fmt.Sprintf("%064x", n), Status: store.StatusAccepted,
		Proof:  &store.ProofFacts{Chain: "base", Tx: fmt.Sprintf("0x%064x", n), Token: "USDC", Amount: "5000000", Check: true, Authenticated: true},
		Result: []byte(`{"type":"pay","valid":true,"errors":[],"body":` + body + `}`),
		DKIM:   []byte(`[{"domain":"alice.test","result":"pass"}]`), Handoff: []string{"exec"},
	}
}

func openBench(b *testing.B) *store.SQLite {
	s, err := store.OpenSQLite(context.Background(), filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// BenchmarkIngestSerial: one session, each message its own commit. Besides
// msg/s it reports the process CPU per message (cpu-µs/msg), the figure
// a store change should move: throughput on this machine varies ±15 %.
func BenchmarkIngestSerial(b *testing.B) {
	s := openBench(b)
	ctx := context.Background()
	c0 := cpuNow()
	b.ResetTimer()
	for i := range b.N {
		if _, err := s.Ingest(ctx, benchMessage(int64(i))); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msg/s")
	b.ReportMetric(float64((cpuNow()-c0).Microseconds())/float64(b.N), "cpu-µs/msg")
	st := s.Stats()
	b.ReportMetric(float64(st.Writes)/float64(max(1, st.Commits)), "msg/commit")
}

// BenchmarkIngestParallel: 10 concurrent sessions; group commit shares one
// transaction (one fsync) among whatever is waiting.
func BenchmarkIngestParallel(b *testing.B) {
	s := openBench(b)
	ctx := context.Background()
	var n atomic.Int64
	b.SetParallelism(max(1, 10/runtime.GOMAXPROCS(0)))
	c0 := cpuNow()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Ingest(ctx, benchMessage(n.Add(1))); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msg/s")
	b.ReportMetric(float64((cpuNow()-c0).Microseconds())/float64(b.N), "cpu-µs/msg")
	st := s.Stats()
	b.ReportMetric(float64(st.Writes)/float64(max(1, st.Commits)), "msg/commit")
}
