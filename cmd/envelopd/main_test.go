package main

import (
	"os"
	"testing"

	"github.com/envelopd/envelopd/authdns/dnstest"
	"github.com/envelopd/envelopd/internal/pgtest"
)

// TestMain stops the throwaway Postgres pgtest may start (ENVELOPD_INTEROP=1).
// serve and poll check SPF, DMARC and ARC through DNS: unless the caller
// names a server, the tests point them (ENVELOPD_DNS, --dns's default) at
// an in-process one with an empty zone, so that no test asks the
// machine's resolver.
func TestMain(m *testing.M) {
	if os.Getenv("ENVELOPD_DNS") == "" {
		s, err := dnstest.Start()
		if err != nil {
			panic(err)
		}
		os.Setenv("ENVELOPD_DNS", s.Addr())
	}
	os.Exit(pgtest.Main(m))
}

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
