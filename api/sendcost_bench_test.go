package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/envelopd/envelopd/api"
)

// BenchmarkSendCost: the send path alone, one message at a time through
// the service (no HTTP): the process CPU per message (cpu-µs/op, user +
// system from getrusage) and the bytes the process writes per send
// (wbytes/op: /proc/self/io wchar, SQLite's WAL frames and checkpoints),
// for a short plain message, a 2.5 KB one and an Envelopay ORDER.
// Figures in docs/performance.md.
func BenchmarkSendCost(b *testing.B) {
	long := strings.Repeat("Line of an ordinary invoice, total 42.00 EUR, thanks.\n", 45)
	cases := []struct {
		name string
		req  func(i int) string
	}{
		{"plain", func(i int) string {
			return fmt.Sprintf(`{"to":"c%d@buyer.test","subject":"Invoice %d","text":"total 42.00"}`, i%100, i)
		}},
		{"2.5KB", func(i int) string {
			t, _ := json.Marshal(long)
			return fmt.Sprintf(`{"to":"c%d@buyer.test","subject":"Invoice %d","text":%s}`, i%100, i, t)
		}},
		{"order", func(i int) string {
			return fmt.Sprintf(`{"to":"c%d@buyer.test","subject":"ORDER | job %d","text":"{\"v\":\"0.2.0\",\"type\":\"order\",\"id\":\"ord_%d\",\"task\":{\"description\":\"translate the file\"}}"}`, i%100, i, i)
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			e := newEnv(b, false)
			e.createInbox("shop", "shop.test")
			ctx := context.Background()
			p := &api.Principal{}
			send := func(i int) {
				var req api.SendRequest
				if err := json.Unmarshal([]byte(c.req(i)), &req); err != nil {
					b.Fatal(err)
				}
				res, err := e.svc.Send(ctx, p, "shop@shop.test", req)
				if err != nil {
					b.Fatalf("send: %v", err)
				}
				if res.Envelopay != nil && len(res.Envelopay.Errors) > 0 {
					b.Fatalf("send: %+v", res.Envelopay.Errors)
				}
			}
			send(-1) // warm: the inbox index, prepared statements
			w0, cpu0 := wchar(b), cpuTime()
			b.ResetTimer()
			for i := range b.N {
				send(i)
			}
			b.StopTimer()
			w1, cpu1 := wchar(b), cpuTime()
			b.ReportMetric(float64(cpu1-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
			b.ReportMetric(float64(w1-w0)/float64(b.N), "wbytes/op")
		})
	}
}

// wchar is the bytes this process has written (/proc/self/io); 0 where
// there is no such file.
func wchar(b *testing.B) int64 {
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0
	}
	for _, line := range bytes.Split(data, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("wchar: ")); ok {
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	return 0
}

// cpuTime is the process's user + system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
