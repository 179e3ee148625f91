package store_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/envelopd/envelopd/store"
)

// TestDatabaseFilesPrivate: the database holds relay DKIM
// private keys and mailbox password hashes, so it and its WAL and SHM
// files are created 0600 whatever the umask (it was 0644).
func TestDatabaseFilesPrivate(t *testing.T) {
	old := syscall.Umask(0o002) // a permissive umask, as in many shells
	defer syscall.Umask(old)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "p.db")
	s, err := store.OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// A write makes sure the WAL and the shared-memory index exist.
	if err := s.PutKey(ctx, "aicp", "alice", "k"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if m := fi.Mode().Perm(); m != 0o600 {
			t.Errorf("%s: mode %04o, want 0600", filepath.Base(p), m)
		}
	}
}

// TestConcurrentMigrations: several processes opening a
// fresh database at once (two `serve`, or `serve` and `send`) all
// succeed; before, the losers failed with "migration 1: table messages
// already exists". Each goroutine opens its own store, with its own
// connections, as a separate process would.
func TestConcurrentMigrations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for round := range 5 {
		path := filepath.Join(t.TempDir(), fmt.Sprintf("fresh-%d.db", round))
		const n = 6
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make([]error, n)
		stores := make([]*store.SQLite, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				stores[i], errs[i] = store.OpenSQLite(ctx, path)
			}()
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("round %d, opener %d: %v", round, i, err)
				continue
			}
			if v, err := stores[i].Pragma(ctx, "user_version"); err != nil || v != fmt.Sprint(store.SchemaVersion) {
				t.Errorf("round %d, opener %d: user_version %s %v", round, i, v, err)
			}
			stores[i].Close()
		}
	}
}

// TestCheckWritable: a writable database passes; a read-only one fails
// (as root file modes do not apply: TestInteropReadOnlyDB in
// cmd/envelopd-load runs serve as nobody for that case).
func TestCheckWritable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "w.db")
	s, err := store.OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CheckWritable(ctx); err != nil {
		t.Errorf("writable database: %v", err)
	}
	s.Close()
	if os.Geteuid() == 0 {
		t.Log("root ignores file modes: the read-only case is TestInteropReadOnlyDB")
		return
	}
	if err := os.Chmod(path, 0o444); err != nil {
		t.Fatal(err)
	}
	s, err = store.OpenSQLite(ctx, path)
	if err != nil {
		t.Fatalf("a read-only database at the current schema must still open: %v", err)
	}
	defer s.Close()
	if err := s.CheckWritable(ctx); err == nil {
		t.Errorf("read-only database: CheckWritable passed")
	}
}
