package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/envelopd/envelopd/store"
	"github.com/envelopd/envelopd/store/storetest"
)

// openPerTest opens a SQLite store whose file is named after t, so that a
// second open with the same t (restart tests) finds the same data.
func openPerTest(dir string) func(t *testing.T) store.DB {
	return func(t *testing.T) store.DB {
		name := strings.NewReplacer("/", "_", " ", "_", "'", "_").Replace(t.Name())
		s, err := store.OpenSQLite(context.Background(), filepath.Join(dir, name+".db"))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
}

func TestSQLiteConformance(t *testing.T) {
	storetest.Run(t, openPerTest(t.TempDir()))
}

func TestPragmas(t *testing.T) {
	ctx := context.Background()
	s, err := store.OpenSQLite(ctx, filepath.Join(t.TempDir(), "p.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, c := range []struct{ name, want string }{
		{"journal_mode", "wal"},
		{"synchronous", "2"}, // FULL
		{"foreign_keys", "1"},
		{"busy_timeout", "5000"},
		{"user_version", fmt.Sprint(store.SchemaVersion)},
		{"integrity_check", "ok"},
		{"foreign_key_check", ""},
	} {
		got, err := s.Pragma(ctx, c.name)
		if c.name == "foreign_key_check" {
			// No rows means no violation.
			if !errors.Is(err, sql.ErrNoRows) {
				t.Errorf("foreign_key_check: %q %v, want no rows", got, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("PRAGMA %s = %q (%v), want %q", c.name, got, err, c.want)
		}
	}
	if _, err := s.Pragma(ctx, "user_version = 0"); err == nil {
		t.Errorf("Pragma accepted an assignment")
	}
}

// TestMigrate opens a database left at each older schema version, with a
// message in it, and checks that opening migrates it and keeps the data.
func TestMigrate(t *testing.T) {
	ctx := context.Background()
	for v := 1; v < store.SchemaVersion; v++ {
		t.Run(fmt.Sprintf("from v%d", v), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "old.db")
			if err := store.MigrateTo(ctx, path, v); err != nil {
				t.Fatal(err)
			}
			db, err := sql.Open("sqlite", "file:"+path)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec(`INSERT INTO messages (mailbox, direction, message_id, content_hash, sender,
				recipients, subject, type, envelopay_id, status, thread_id, received_at, errors, warnings,
				auth_results, size) VALUES ('', 'in', 'old@x.test', x'00', 'a@x.test', '[]', 'WHICH | old', 'which',
				'wch_1', 'accepted', 't_old', 0, '[]', '[]', '', 0)`); err != nil {
				t.Fatal(err)
			}
			// A chain link of the old global layout (migration 6 gives it a scope).
			chainLink := `INSERT INTO chain_links (chain, seq, prev, hash, message_id)
				SELECT 'a>b', 1, '00', 'abcd', id FROM messages`
			if v >= 6 {
				chainLink = `INSERT INTO chain_links (scope, chain, seq, prev, hash, message_id)
				SELECT 'in' || char(10), 'a>b', 1, '00', 'abcd', id FROM messages`
			}
			if _, err := db.Exec(chainLink); err != nil {
				t.Fatal(err)
			}
			// A failed hand-off (migration 2 adds the delivery log, 10 rebuilds it).
			if v < 2 {
				db.Close()
				if err := store.MigrateTo(ctx, path, 2); err != nil {
					t.Fatal(err)
				}
				if db, err = sql.Open("sqlite", "file:"+path); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := db.Exec(`INSERT INTO deliveries (id, message_id, target, state, attempts, next_attempt_at, last_error)
				SELECT 5, id, 'exec', 'pending', 3, 0, 'exit status 1' FROM messages`); err != nil {
				t.Fatal(err)
			}
			db.Close()
			s, err := store.OpenSQLite(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if got, _ := s.Pragma(ctx, "user_version"); got != fmt.Sprint(store.SchemaVersion) {
				t.Errorf("user_version %s, want %d", got, store.SchemaVersion)
			}
			th, err := s.Thread(ctx, "wch_1")
			if err != nil || len(th) != 1 || th[0].MessageID != "old@x.test" {
				t.Fatalf("old message after migration: %+v %v", th, err)
			}
			if seq, hash, err := s.ChainTip(ctx, "a>b"); err != nil || seq != 1 || hash != "abcd" {
				t.Errorf("old chain link after migration: %d %q %v", seq, hash, err)
			}
			// The hand-off keeps its id, attempts and error, and can be dropped.
			hs, err := s.Handoffs(ctx, store.HandoffFilter{State: "all"})
			if err != nil || len(hs) != 1 || hs[0].ID != 5 || hs[0].Attempts != 3 || !hs[0].Failed || hs[0].LastError != "exit status 1" {
				t.Errorf("old hand-off after migration: %+v %v", hs, err)
			}
			if err := s.HandoffDrop(ctx, 5); err != nil {
				t.Errorf("drop the old hand-off: %v", err)
			}
			// Tables of the later steps work.
			if err := s.PutKey(ctx, "aicp", "alice", "k"); err != nil {
				t.Error(err)
			}
			if _, err := s.Enqueue(ctx, &store.Outgoing{Recipients: []string{"a@x.test"}, Raw: []byte("x")}); err != nil {
				t.Error(err)
			}
			out, err := s.Ingest(ctx, &store.Incoming{MessageID: "new@x.test", InReplyTo: []string{"old@x.test"}, Raw: []byte("y")})
			if err != nil || out.ThreadID != "t_old" {
				t.Errorf("new reply: %+v %v, want thread t_old", out, err)
			}
		})
	}
}

func TestSchemaTooNew(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "new.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(fmt.Sprintf("PRAGMA user_version = %d", store.SchemaVersion+1)); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := store.OpenSQLite(ctx, path); !errors.Is(err, store.ErrSchemaTooNew) {
		t.Errorf("open: %v, want ErrSchemaTooNew", err)
	}
}

// TestWaitNewOtherProcess: a second store on the same file (as `envelopd
// watch` next to `envelopd serve`) sees new rows through the fallback poll.
func TestWaitNewOtherProcess(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "shared.db")
	serve, err := store.OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer serve.Close()
	watch, err := store.OpenSQLiteOptions(ctx, path, store.Options{PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close()
	woke := make(chan error, 1)
	go func() {
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		woke <- watch.WaitNew(c, 0)
	}()
	out, err := serve.Ingest(ctx, &store.Incoming{MessageID: "x@x.test", Raw: []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-woke; err != nil {
		t.Fatalf("WaitNew in the other store: %v", err)
	}
	ms, err := watch.Messages(ctx, store.Filter{})
	if err != nil || len(ms) != 1 || ms[0].ID != out.ID {
		t.Errorf("other store reads %+v %v", ms, err)
	}
	// Both write: one writer each, serialised by SQLite's lock.
	if _, err := watch.Enqueue(ctx, &store.Outgoing{Recipients: []string{"a@x.test"}, Raw: []byte("y")}); err != nil {
		t.Errorf("second writer: %v", err)
	}
}

// TestCloseWhileIngesting: writers racing Close either succeed (and their
// message is in the store after reopening) or get ErrClosed; none hangs.
func TestCloseWhileIngesting(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "close.db")
	s, err := store.OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	const n = 50
	type res struct {
		id  int64
		err error
	}
	results := make(chan res, n)
	for i := range n {
		go func() {
			out, err := s.Ingest(ctx, &store.Incoming{MessageID: fmt.Sprintf("c%d@x.test", i), Raw: []byte(fmt.Sprint(i))})
			results <- res{out.ID, err}
		}()
	}
	time.Sleep(time.Millisecond)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var ok []int64
	for range n {
		select {
		case r := <-results:
			switch {
			case r.err == nil:
				ok = append(ok, r.id)
			case !errors.Is(r.err, store.ErrClosed):
				t.Errorf("Ingest during Close: %v, want nil or ErrClosed", r.err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("an Ingest hangs after Close")
		}
	}
	s, err = store.OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, id := range ok {
		if _, err := s.Message(ctx, id); err != nil {
			t.Errorf("acknowledged message %d lost: %v", id, err)
		}
	}
	t.Logf("%d of %d acknowledged before Close", len(ok), n)
}
