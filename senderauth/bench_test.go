package senderauth_test

import (
	"context"
	"fmt"
	"net"
	"strings"
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
	s.TXT("loop.test", "v=spf1 include:loop2.test -all")
	s.TXT("loop2.test", "v=spf1 include:loop.test -all")
	for i := range 20 {
		s.TXT(fmt.Sprintf("c%d.test", i), fmt.Sprintf("v=spf1 include:c%d.test -all", i+1))
	}
	s.TXT("mx.test", "v=spf1 mx -all")
	for i := range 1000 {
		s.MX("mx.test", uint16(i), fmt.Sprintf("m%d.mx.test", i))
	}
	s.TXT("huge.test", "v=spf1 "+strings.Repeat("ip4:192.0.2.1 ", 4000)+"-all")
	s.TXT("plain.test", "v=spf1 ip4:198.51.100.0/24 -all")
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
