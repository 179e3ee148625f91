package main

import (
	"os"
	"testing"

	"github.com/envelopd/envelopd/internal/pgtest"
)

// TestMain stops the throwaway Postgres pgtest may start (ENVELOPD_INTEROP=1).
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// TestDBNames: a Postgres URL is logged with its password masked and
// handed to exec agents without it; a file path is unchanged.
func TestDBNames(t *testing.T) {
	for _, c := range []struct{ db, logged, agent string }{
		{"postgres://u:s3cret@h:5432/d?sslmode=disable", "postgres://u:xxxxx@h:5432/d?sslmode=disable", "postgres://u@h:5432/d?sslmode=disable"},
		{"postgresql://u@h/d", "postgresql://u@h/d", "postgresql://u@h/d"},
		{"envelopd.db", "envelopd.db", ""},
	} {
		if got := dbName(c.db); got != c.logged {
			t.Errorf("dbName(%q) = %q, want %q", c.db, got, c.logged)
		}
		if c.agent != "" {
			if got := dsnWithoutPassword(c.db); got != c.agent {
				t.Errorf("dsnWithoutPassword(%q) = %q, want %q", c.db, got, c.agent)
			}
		}
	}
}
