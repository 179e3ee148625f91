package main

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/envelopd/envelopd/store"
)

// TestInteropTwoServesFreshDatabase: two `envelopd serve`
// processes started at once on a fresh database both come up; before,
// the second died with "migration 1: table messages already exists".
// Several rounds, each on a new file, to meet the race.
func TestInteropTwoServesFreshDatabase(t *testing.T) {
	interop(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "envelopd")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for round := range 5 {
		db := filepath.Join(dir, fmt.Sprintf("fresh-%d.db", round))
		var wg sync.WaitGroup
		start := make(chan struct{})
		results := make([]string, 2)
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				results[i] = serveOnce(bin, db)
			}()
		}
		close(start)
		wg.Wait()
		for i, r := range results {
			if r != "" {
				t.Errorf("round %d, serve %d: %s", round, i, r)
			}
		}
		st, err := store.OpenSQLite(context.Background(), db)
		if err != nil {
			t.Fatal(err)
		}
		if v, err := st.Pragma(context.Background(), "user_version"); err != nil || v != fmt.Sprint(store.SchemaVersion) {
			t.Errorf("round %d: user_version %s %v", round, v, err)
		}
		st.Close()
	}
}

// serveOnce runs `envelopd serve` on db until it logs that it is serving,
// then stops it with SIGTERM; it returns "" or what went wrong.
func serveOnce(bin, db string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "--smtp", "127.0.0.1:0", "--db", db, "--dkim-txt", "/dev/null")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err.Error()
	}
	if err := cmd.Start(); err != nil {
		return err.Error()
	}
	var log strings.Builder
	serving := false
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "envelopd serving") {
			serving = true
			cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	err = cmd.Wait()
	switch {
	case !serving:
		return fmt.Sprintf("never served (%v): %s", err, log.String())
	case err != nil:
		return fmt.Sprintf("exit %v: %s", err, log.String())
	}
	return ""
}
