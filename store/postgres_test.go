package store_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/envelopd/envelopd/internal/pgtest"
	"github.com/envelopd/envelopd/store"
	"github.com/envelopd/envelopd/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// openPostgres opens a Postgres store over a schema named after t, so
// that a second open with the same t (restart tests) finds the same data.
func openPostgres(t *testing.T) store.DB {
	s, err := store.OpenPostgres(context.Background(), pgtest.Schema(t))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestPostgresConformance runs the suite SQLite passes against Postgres
// (ENVELOPD_PG_DSN, or a throwaway server under ENVELOPD_INTEROP=1).
func TestPostgresConformance(t *testing.T) {
	pgtest.Server(t)
	storetest.Run(t, openPostgres)
}

// TestPostgresNotify: a message stored or mail queued through one store
// instance wakes the waiters of another at once (LISTEN/NOTIFY): the
// channels are closed only by notifications, never by a timer.
func TestPostgresNotify(t *testing.T) {
	dsn := pgtest.Schema(t)
	ctx := context.Background()
	a, err := store.OpenPostgres(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := store.OpenPostgres(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	msgs, queue := b.MessagesChanged(), b.QueueChanged()
	select {
	case <-msgs:
		t.Fatal("woken before anything was stored")
	case <-queue:
		t.Fatal("woken before anything was queued")
	default:
	}
	if _, err := a.Ingest(ctx, benchMessage(1)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-msgs:
	case <-time.After(10 * time.Second):
		t.Fatal("no notification of the stored message")
	}
	if _, err := a.Enqueue(ctx, &store.Outgoing{From: "a@x.test", Recipients: []string{"b@y.test"}, Raw: []byte("x"), MessageID: "n@x.test"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-queue:
	case <-time.After(10 * time.Second):
		t.Fatal("no notification of the queued mail")
	}
}

// TestPostgresPoolSize: pool_max_conns in the URL sizes the node's pool
// (it is not sent to the server, which would refuse it).
func TestPostgresPoolSize(t *testing.T) {
	dsn := pgtest.Schema(t)
	s, err := store.OpenPostgres(context.Background(), dsn+"&pool_max_conns=2")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n := s.MaxConns(); n != 2 {
		t.Errorf("pool of %d, want 2", n)
	}
	if _, err := s.Ingest(context.Background(), benchMessage(7)); err != nil {
		t.Fatal(err)
	}
	if _, err := store.OpenPostgres(context.Background(), dsn+"&pool_max_conns=none"); err == nil {
		t.Error("pool_max_conns=none accepted")
	}
}
