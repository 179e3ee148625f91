package main

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/envelopd/envelopd/mailin"
	"github.com/envelopd/envelopd/store"
)

// BenchmarkIngestSMTP is envelopd's SMTP ingest in one process, for
// profiling (go test -bench IngestSMTP -cpuprofile cpu.out): the real
// front end, pipeline (DKIM against the run's static keys, parse,
// tunnelled validators) and SQLite store, driven by this tool's client
// over loopback with 10 sessions kept open. It reports msg/s.
func BenchmarkIngestSMTP(b *testing.B) {
	c, err := Generate(GenOptions{Messages: b.N, Keys: testKeys()})
	if err != nil {
		b.Fatal(err)
	}
	v, err := staticVerifier(c)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, filepath.Join(b.TempDir(), "envelopd.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	p := &mailin.Pipeline{Store: st, Verifier: v, AuthServID: "localhost"}
	srv, err := mailin.NewSMTPServer(mailin.SMTPConfig{Addr: "127.0.0.1:0"}, p)
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve()
	defer srv.Close()
	b.ResetTimer()
	r := Drive(ctx, c.Mails, DriveOptions{Addr: srv.Addr().String(), Sessions: 10, KeepOpen: true})
	b.StopTimer()
	if r.Accepted != b.N {
		b.Fatalf("%d of %d accepted: %s", r.Accepted, b.N, r.FirstError)
	}
	b.ReportMetric(r.MsgPerSec, "msg/s")
	b.ReportMetric(r.P99ms, "p99_ms")
}
