package store

import (
	"context"
	"errors"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestBatchFailureUndoesOnlyItself: writes that share one transaction
// (group commit) run without savepoints; one that fails or panics is
// undone by running the batch once more without it (the others under
// savepoints). The others commit, in that one batch, each failing write
// gets its own error, and a write run twice leaves its effect once.
func TestBatchFailureUndoesOnlyItself(t *testing.T) {
	ctx := context.Background()
	s, err := OpenSQLite(ctx, filepath.Join(t.TempDir(), "w.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	set := func(key string) func(*wtx) error {
		return func(tx *wtx) error {
			_, err := tx.Exec(`INSERT INTO settings (key, value, updated_at) VALUES (?, 'v', 0)
				ON CONFLICT (key) DO UPDATE SET value = value || 'v'`, key)
			return err
		}
	}
	// Hold the writer in a first write so that the next ones queue up
	// and are taken as one batch.
	started, release := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- s.write(ctx, func(tx *wtx) error {
			close(started)
			<-release
			return set("a")(tx)
		})
	}()
	<-started
	before := s.Stats().Commits
	errBoom := errors.New("boom")
	writes := []struct {
		key  string
		fn   func(*wtx) error
		want string // "" success, else a substring of the error
	}{
		{"b", set("b"), ""},
		{"c", func(tx *wtx) error { set("c")(tx); return errBoom }, "boom"},
		{"d", func(tx *wtx) error { set("d")(tx); panic("bad") }, "write panicked: bad"},
		{"e", set("e"), ""},
		{"f", func(tx *wtx) error { // a broken UNIQUE key is ErrConflict
			if err := set("f")(tx); err != nil {
				return err
			}
			_, err := tx.Exec(`INSERT INTO settings (key, value, updated_at) VALUES ('f', 'x', 0)`)
			return err
		}, "store: conflict"},
		{"g", set("g"), ""},
	}
	results := make([]chan error, len(writes))
	for i, w := range writes {
		results[i] = make(chan error, 1)
		go func() { results[i] <- s.write(ctx, w.fn) }()
	}
	for len(s.ops) < len(writes) { // every write queued behind the first
		runtime.Gosched()
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for i, w := range writes {
		err := <-results[i]
		switch {
		case w.want == "" && err != nil:
			t.Errorf("write %s: %v", w.key, err)
		case w.want != "" && (err == nil || !strings.Contains(err.Error(), w.want)):
			t.Errorf("write %s: %v, want an error with %q", w.key, err, w.want)
		}
		v, _, err := s.Setting(ctx, w.key)
		switch {
		case w.want == "" && v != "v":
			t.Errorf("setting %s = %q %v, want v (written once)", w.key, v, err)
		case w.want != "" && (v != "" || err != nil):
			t.Errorf("setting %s = %q %v, want none", w.key, v, err)
		}
	}
	if n := s.Stats().Commits - before; n != 2 { // the first write's, then the batch's
		t.Errorf("%d commits, want 2", n)
	}
}
