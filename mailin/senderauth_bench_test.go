package mailin

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/envelopd/envelopd/authdns"
	"github.com/envelopd/envelopd/authdns/dnstest"
	"github.com/envelopd/envelopd/dkim"
	"github.com/envelopd/envelopd/senderauth"
	"github.com/envelopd/envelopd/store"
)

// BenchmarkIngestSenderAuth measures what SPF, DMARC and ARC add to an
// inbound mail's ingest on a warm DNS cache, in the same run as without
// them: the same DKIM-signed PAY (ed25519, key from a static table in
// both cases), an SPF record with an include, a DMARC record, answers
// served once by an in-process DNS server and then from the resolver's
// cache. "prepare" is the stateless stages alone (Pipeline.Prepare, and
// the SMTP front end's SPF check when on); "ingest" adds the durable
// SQLite ingest. Figures in docs/performance.md.
//
//	go test -run '^$' -bench IngestSenderAuth -count 5 ./mailin
func BenchmarkIngestSenderAuth(b *testing.B) {
	pb := newPayerBench(b)
	res, mail, kit := pb.res, pb.mail, pb.kit
	ip := net.ParseIP("127.0.0.1")
	ctx := context.Background()
	checker := &senderauth.Checker{Resolver: res}
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "spf+dmarc+arc"
		}
		newPipeline := func() *Pipeline {
			p := &Pipeline{Verifier: kit.v, AuthServID: "mx.test"}
			if on {
				p.Sender = checker
			}
			return p
		}
		meta := func(p *Pipeline) Meta {
			m := Meta{Source: "smtp", MailFrom: "bounce@payer.test", Rcpts: []string{"shop@shop.test"}}
			if p.Sender != nil {
				spf := senderauth.CheckSPF(ctx, res, ip, "mx.payer.test", m.MailFrom)
				m.SPF = &spf
			}
			return m
		}
		b.Run("prepare/"+name, func(b *testing.B) {
			p := newPipeline()
			m := mail(0)
			p.Prepare(ctx, m, meta(p)) // warm the cache
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				a, _ := p.Prepare(ctx, m, meta(p))
				if on && a.Sender.AuthenticatedAs != "payer.test" {
					b.Fatalf("verdict %+v", a.Sender)
				}
			}
		})
		b.Run("ingest/"+name, func(b *testing.B) {
			st, err := store.OpenSQLite(ctx, filepath.Join(b.TempDir(), "b.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			p := newPipeline()
			p.Store = st
			p.Prepare(ctx, mail(0), meta(p))
			mails := make([][]byte, 0, 1024)
			for i := range cap(mails) {
				mails = append(mails, mail(i+1))
			}
			b.ReportAllocs()
			b.ResetTimer()
			i := 0
			for b.Loop() {
				if i == len(mails) {
					b.StopTimer()
					for j := range mails {
						mails[j] = mail(i + j + 1)
					}
					b.StartTimer()
				}
				if _, err := p.Ingest(ctx, mails[i%len(mails)], meta(p)); err != nil {
					b.Fatal(err)
				}
				i++
				if i > len(mails) {
					i = 1
				}
			}
		})
	}
}

// BenchmarkSenderAuthOverhead is BenchmarkIngestSenderAuth's prepare pair
// interleaved, for a shared, noisy machine: blocks of 50 messages without
// and with SPF+DMARC+ARC alternate, and the medians of the blocks' time
// per message are reported (off_us, on_us) with their ratio.
//
//	go test -run '^$' -bench SenderAuthOverhead -benchtime 100x ./mailin
func BenchmarkSenderAuthOverhead(b *testing.B) {
	pb := newPayerBench(b)
	res, kit, m := pb.res, pb.kit, pb.mail(0)
	ctx := context.Background()
	ip := net.ParseIP("127.0.0.1")
	off := &Pipeline{Verifier: kit.v, AuthServID: "mx.test"}
	on := &Pipeline{Verifier: kit.v, AuthServID: "mx.test", Sender: &senderauth.Checker{Resolver: res}}
	runOn := func() {
		spf := senderauth.CheckSPF(ctx, res, ip, "mx.payer.test", "bounce@payer.test")
		on.Prepare(ctx, m, Meta{Source: "smtp", MailFrom: "bounce@payer.test", SPF: &spf})
	}
	runOff := func() { off.Prepare(ctx, m, Meta{Source: "smtp", MailFrom: "bounce@payer.test"}) }
	runOn() // warm the cache
	const block = 50
	var offs, ons []float64
	for b.Loop() {
		for _, v := range []struct {
			run func()
			out *[]float64
		}{{runOff, &offs}, {runOn, &ons}} {
			start := time.Now()
			for range block {
				v.run()
			}
			*v.out = append(*v.out, float64(time.Since(start).Microseconds())/block)
		}
	}
	reportPair(b, offs, ons, "us")
}

// BenchmarkSenderAuthIngestOverhead interleaves whole ingests (analysis
// and the durable SQLite write, one store each) without and with
// SPF+DMARC+ARC, in blocks of 50 distinct mails, and reports the medians
// of the process CPU time per message (getrusage: the store's fsync waits
// do not count, its CPU does) and their ratio.
//
//	go test -run '^$' -bench SenderAuthIngestOverhead -benchtime 40x ./mailin
func BenchmarkSenderAuthIngestOverhead(b *testing.B) {
	pb := newPayerBench(b)
	res, kit := pb.res, pb.kit
	n := 0
	mail := func() []byte {
		n++
		return pb.mail(n)
	}
	ctx := context.Background()
	ip := net.ParseIP("127.0.0.1")
	open := func(name string) *store.SQLite {
		st, err := store.OpenSQLite(ctx, filepath.Join(b.TempDir(), name))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
		return st
	}
	off := &Pipeline{Store: open("off.db"), Verifier: kit.v, AuthServID: "mx.test"}
	on := &Pipeline{Store: open("on.db"), Verifier: kit.v, AuthServID: "mx.test", Sender: &senderauth.Checker{Resolver: res}}
	ingest := func(p *Pipeline, m []byte) {
		meta := Meta{Source: "smtp", MailFrom: "bounce@payer.test"}
		if p.Sender != nil {
			spf := senderauth.CheckSPF(ctx, res, ip, "mx.payer.test", meta.MailFrom)
			meta.SPF = &spf
		}
		if _, err := p.Ingest(ctx, m, meta); err != nil {
			b.Fatal(err)
		}
	}
	ingest(on, mail()) // warm the cache
	ingest(off, mail())
	const block = 50
	var offs, ons []float64
	for b.Loop() {
		for _, v := range []struct {
			p   *Pipeline
			out *[]float64
		}{{off, &offs}, {on, &ons}} {
			b.StopTimer()
			ms := make([][]byte, block)
			for i := range ms {
				ms[i] = mail()
			}
			b.StartTimer()
			start := cpuTime()
			for _, m := range ms {
				ingest(v.p, m)
			}
			*v.out = append(*v.out, float64((cpuTime()-start).Microseconds())/block)
		}
	}
	reportPair(b, offs, ons, "cpu_us")
}

// reportPair reports the medians of the off and on blocks (off_UNIT,
// on_UNIT) and their ratio.
func reportPair(b *testing.B, offs, ons []float64, unit string) {
	med := func(x []float64) float64 {
		slices.Sort(x)
		return x[len(x)/2]
	}
	mo, mn := med(offs), med(ons)
	b.ReportMetric(mo, "off_"+unit)
	b.ReportMetric(mn, "on_"+unit)
	b.ReportMetric(mn/mo, "on/off")
}

// payerBench is the benchmarks' sender: payer.test's zone (SPF with an
// include, DMARC p=reject, the HELO name's SPF) on an in-process DNS
// server, a resolver over it, and distinct DKIM-signed PAY mails.
type payerBench struct {
	kit  *dkimKit
	res  *authdns.Client
	mail func(i int) []byte // the i-th mail: its own Message-ID and Envelopay id
}

func newPayerBench(b *testing.B) *payerBench {
	kit := newDKIMKitB(b)
	s, err := dnstest.Start()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.Close)
	s.TXT("payer.test", "v=spf1 include:_spf.payer.test -all")
	s.TXT("_spf.payer.test", "v=spf1 ip4:192.0.2.0/24 ip4:127.0.0.0/8 -all")
	s.TXT("_dmarc.payer.test", "v=DMARC1; p=reject; rua=mailto:d@payer.test")
	s.TXT("mx.payer.test", "v=spf1 a -all")
	s.A("mx.payer.test", "127.0.0.1")
	res, err := authdns.New(authdns.Config{Server: s.Addr()})
	if err != nil {
		b.Fatal(err)
	}
	raw, err := os.ReadFile("../testdata/eml/pay-plain.eml")
	if err != nil {
		b.Fatal(err)
	}
	raw = bytes.ReplaceAll(bytes.ReplaceAll(raw, []byte("\r\n"), []byte("\n")), []byte("\n"), []byte("\r\n"))
	raw = bytes.Replace(raw, []byte("<alice@example.com>"), []byte("<alice@payer.test>"), 1)
	return &payerBench{kit: kit, res: res, mail: func(i int) []byte {
		m := bytes.Replace(raw, []byte("Message-ID: <"), []byte(fmt.Sprintf("Message-ID: <b%d.", i)), 1)
		m = bytes.Replace(m, []byte(`"id":"`), []byte(fmt.Sprintf(`"id":"b%d-`, i)), 1)
		out, err := dkim.Sign(m, dkim.Signer{Domain: "payer.test", Selector: "t", Key: kit.key})
		if err != nil {
			b.Fatal(err)
		}
		return out
	}}
}

func newDKIMKitB(b *testing.B) *dkimKit {
	k, err := dkim.GenerateKey("ed25519")
	if err != nil {
		b.Fatal(err)
	}
	r := dkim.NewStaticResolver()
	line, err := dkim.TXTRecord("payer.test", "t", k.Public())
	if err != nil {
		b.Fatal(err)
	}
	name, txt, _ := bytes.Cut([]byte(line), []byte(" "))
	r.Add(string(name), string(txt))
	return &dkimKit{key: k, res: r, v: &dkim.Verifier{Resolver: r}}
}
