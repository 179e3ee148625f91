package store_test

import (
	"context"
	"os"
	"testing"

	"github.com/envelopd/envelopd/internal/pgtest"
	"github.com/envelopd/envelopd/store"
	"github.com/envelopd/envelopd/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// openPostgres opens a Postgres store over a schema named after t, so
// that a second open with the same t (restart tests) finds the same data.
func openPostgres(t *testing.T) store.Store {
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
