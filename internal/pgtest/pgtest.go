// Package pgtest gives tests a Postgres database: the server
// ENVELOPD_PG_DSN names, or, under ENVELOPD_INTEROP=1 without it, a
// throwaway server it starts itself (initdb and pg_ctl as the postgres
// user, trust auth on a temp dir, a free loopback port, fsync off; the
// recipe of shared/interop/README.md "Postgres 15"). Without either the
// tests that need Postgres skip; under ENVELOPD_INTEROP=1 a Postgres that
// cannot be had is a failure.
//
// Every test binary (one per package) gets a database of its own: on
// ENVELOPD_PG_DSN's server it creates one named envelopd_test_PID (the
// DSN's role needs CREATEDB) and drops it after the tests, and a throwaway
// server is its own. Within a package, Schema gives each test a schema of
// its own.
//
// A server is still shared by the databases on it in one way: the store's
// listings stop below the server's oldest running writing transaction
// (store's dialect "visible": transaction ids are server-wide), so one
// package's writes delay what another package's test reads back at once.
// So on ENVELOPD_PG_DSN's server the test binaries take turns: the first
// call to Server takes a session advisory lock that Main releases, and
// `go test ./store/ ./api/ ./cmd/envelopd/` passes with go test's default
// parallel packages (their tests that do not use Postgres still overlap).
//
// A package whose tests use it calls Main from TestMain, which drops the
// database or stops the throwaway server after the tests.
package pgtest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/envelopd/envelopd/internal/freeport"
)

var (
	once      sync.Once
	baseDSN   string
	startErr  error
	dataDir   string
	pgCtlPath string
	dropDB    func() // drops the database made on ENVELOPD_PG_DSN's server
	turn      *pgx.Conn
)

// turnLock is the advisory lock key the test binaries sharing one
// ENVELOPD_PG_DSN server take turns by ("envelopd-pgtest").
const turnLock = 0x656e76656c6f7064

// Main runs the tests and stops a throwaway server started for them.
func Main(m *testing.M) int {
	code := m.Run()
	stop()
	return code
}

// Server returns the DSN of a Postgres server's database, or skips t
// (fails it under ENVELOPD_INTEROP=1) when there is none.
func Server(t testing.TB) string {
	t.Helper()
	if dsn := os.Getenv("ENVELOPD_PG_DSN"); dsn != "" {
		once.Do(func() { baseDSN, startErr = ownDatabase(dsn) })
		if startErr != nil {
			t.Fatalf("ENVELOPD_PG_DSN: %v", startErr)
		}
		return baseDSN
	}
	if os.Getenv("ENVELOPD_INTEROP") != "1" {
		t.Skip("no Postgres: set ENVELOPD_PG_DSN, or ENVELOPD_INTEROP=1 to start a throwaway server")
	}
	once.Do(func() { baseDSN, startErr = start() })
	if startErr != nil {
		t.Fatalf("ENVELOPD_INTEROP=1 and no Postgres: %v", startErr)
	}
	return baseDSN
}

// Schema returns a DSN whose tables live in a fresh, empty schema of
// their own for t; calls with the same t return the same schema, so that
// a test can open a store again over the same data (a restart) or open
// several (nodes). The schema is dropped when t ends.
func Schema(t testing.TB) string {
	t.Helper()
	dsn := Server(t)
	schemas.Lock()
	defer schemas.Unlock()
	if d, ok := schemas.m[t]; ok {
		return d
	}
	schemas.n++
	schema := fmt.Sprintf("t_%d_%d", os.Getpid(), schemas.n)
	admin := func(sql string) error { return adminExec(dsn, sql) }
	if err := admin("DROP SCHEMA IF EXISTS " + schema + " CASCADE; CREATE SCHEMA " + schema); err != nil {
		t.Fatalf("postgres: create schema: %v", err)
	}
	t.Cleanup(func() {
		schemas.Lock()
		delete(schemas.m, t)
		schemas.Unlock()
		admin("DROP SCHEMA IF EXISTS " + schema + " CASCADE")
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("ENVELOPD_PG_DSN: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	schemas.m[t] = u.String()
	return u.String()
}

var schemas = struct {
	sync.Mutex
	n int
	m map[testing.TB]string
}{m: map[testing.TB]string{}}

// adminExec runs sql on a connection of its own to dsn.
func adminExec(dsn, sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// ownDatabase creates the database envelopd_test_PID on dsn's server and
// returns dsn pointing at it.
func ownDatabase(dsn string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", err
	}
	name := fmt.Sprintf("envelopd_test_%d", os.Getpid())
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		return "", err
	}
	// Wait for the other test binaries on this server (no timeout: go
	// test's own -timeout bounds the wait).
	if _, err := conn.Exec(context.Background(), "SELECT pg_advisory_lock($1)", int64(turnLock)); err != nil {
		conn.Close(context.Background())
		return "", fmt.Errorf("wait for the other test binaries: %w", err)
	}
	turn = conn
	admin := func(sql string) error { return adminExec(dsn, sql) }
	ident := pgx.Identifier{name}.Sanitize()
	if err := admin("DROP DATABASE IF EXISTS " + ident); err != nil {
		return "", fmt.Errorf("drop a stale %s: %w", name, err)
	}
	if err := admin("CREATE DATABASE " + ident); err != nil {
		return "", fmt.Errorf("create database %s (each test binary gets its own: the role needs CREATEDB): %w", name, err)
	}
	dropDB = func() { admin("DROP DATABASE IF EXISTS " + ident + " WITH (FORCE)") }
	u.Path = "/" + name
	return u.String(), nil
}

// start runs a throwaway server and returns the DSN of its database
// "envelopd".
func start() (string, error) {
	initdb, err := exec.LookPath("initdb")
	if err != nil {
		// Debian's postgresql package keeps them off PATH.
		found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
		if len(found) == 0 {
			return "", fmt.Errorf("initdb not on PATH nor in /usr/lib/postgresql/*/bin (Debian: postgresql): %w", err)
		}
		initdb = found[len(found)-1]
	}
	pgCtl := filepath.Join(filepath.Dir(initdb), "pg_ctl")
	dir, err := os.MkdirTemp("", "envelopd-pg-")
	if err != nil {
		return "", err
	}
	run := func(args ...string) error {
		cmd := exec.Command(args[0], args[1:]...)
		if os.Geteuid() == 0 {
			// initdb refuses root: run it as the postgres user.
			cmd = exec.Command("runuser", append([]string{"-u", "postgres", "--"}, args...)...)
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if os.Geteuid() == 0 {
		if err := exec.Command("chown", "postgres", dir).Run(); err != nil {
			return "", fmt.Errorf("chown postgres %s: %w", dir, err)
		}
	}
	data := filepath.Join(dir, "data")
	if err := run(initdb, "-D", data, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8", "--locale=C.UTF-8"); err != nil {
		return "", err
	}
	port, err := freeport.Loopback()
	if err != nil {
		return "", err
	}
	if err := run(pgCtl, "-D", data, "-l", filepath.Join(dir, "pg.log"), "-w", "-o",
		fmt.Sprintf("-k %s -c listen_addresses=127.0.0.1 -p %d -F -c max_connections=300", dir, port), "start"); err != nil {
		return "", err
	}
	dataDir, pgCtlPath = data, pgCtl
	admin := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		stop()
		return "", err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE envelopd"); err != nil {
		stop()
		return "", err
	}
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/envelopd?sslmode=disable", port), nil
}

// stop drops the database made on ENVELOPD_PG_DSN's server, or shuts a
// throwaway server down (fast shutdown) and removes it.
func stop() {
	if dropDB != nil {
		dropDB()
		dropDB = nil
	}
	if turn != nil {
		turn.Close(context.Background()) // releases the advisory lock
		turn = nil
	}
	if dataDir == "" {
		return
	}
	args := []string{pgCtlPath, "-D", dataDir, "-m", "fast", "-w", "stop"}
	cmd := exec.Command(args[0], args[1:]...)
	if os.Geteuid() == 0 {
		cmd = exec.Command("runuser", append([]string{"-u", "postgres", "--"}, args...)...)
	}
	cmd.Run()
	os.RemoveAll(filepath.Dir(dataDir))
	dataDir = ""
}
