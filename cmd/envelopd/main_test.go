package main

import (
	"os"
	"testing"

	"github.com/envelopd/envelopd/internal/pgtest"
)

// TestMain stops the throwaway Postgres pgtest may start (ENVELOPD_INTEROP=1).
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
