package senderauth_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/envelopd/envelopd/authdns"
	"github.com/envelopd/envelopd/authdns/dnstest"
	"github.com/envelopd/envelopd/senderauth"
)

// BenchmarkSPFHostile measures one SPF check against each hostile zone
// shape with no cache (every lookup goes to the in-process server): time
// and memory per check stay bounded by the RFC 7208 §4.6.4 limits and
// authdns's answer bounds. Figures in docs/performance.md.
//
//	go test -run '^$' -bench SPFHostile -benchmem ./senderauth
func BenchmarkSPFHostile(b *testing.B) {
	s, err := dnstest.Start()
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	hostileZone(s)
	r, err := authdns.New(authdns.Config{Server: s.Addr(), Timeout: time.Second, MaxEntries: -1})
	if err != nil {
		b.Fatal(err)
	}
	ip := net.ParseIP("198.51.100.7")
	for _, d := range []string{"plain.test", "loop.test", "c0.test", "mx.test", "huge.test"} {
		b.Run(d, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				senderauth.CheckSPF(context.Background(), r, ip, "", "x@"+d)
			}
		})
	}
}
