package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"strings"

	"github.com/envelopd/envelopd/internal/secretfile"
	"github.com/envelopd/envelopd/store"
)

// multiFlag is a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// newFlags returns a FlagSet that reports to e.stderr and does not exit.
func newFlags(e *env, name string) *flag.FlagSet {
	fs := flag.NewFlagSet("envelopd "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() { printUsage(fs, name) }
	return fs
}

// newLogger logs text to a terminal and JSON otherwise.
func newLogger(w io.Writer, debug bool) *slog.Logger {
	level := slog.LevelInfo
	if debug {
		level = slog.LevelDebug
	}
	opts := &slog.HandlerOptions{Level: level}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			return slog.New(slog.NewTextHandler(w, opts))
		}
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// openStore opens the store --db names: a SQLite file path, or a
// postgres:// URL (store.Open).
func openStore(ctx context.Context, e *env, path string) (store.DB, bool) {
	st, err := store.Open(ctx, path)
	if err != nil {
		fmt.Fprintf(e.stderr, "envelopd: open %s: %v\n", dbName(path), err)
		return nil, false
	}
	return st, true
}

// openExistingStore opens the store at path for a command that only
// reads (or changes what is there): a missing SQLite file is an error
// naming the path, never a new empty database. (A Postgres database must
// exist already; its tables are created by whichever node opens it first.)
func openExistingStore(ctx context.Context, e *env, cmd, path string) (store.DB, bool) {
	if store.IsPostgresDSN(path) {
		return openStore(ctx, e, path)
	}
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintf(e.stderr, "envelopd %s: database %s does not exist (give --db with the path serve or poll write to)\n", cmd, path)
		} else {
			fmt.Fprintf(e.stderr, "envelopd %s: database %s: %v\n", cmd, path, err)
		}
		return nil, false
	}
	return openStore(ctx, e, path)
}

// readUsers reads a password file: one "user:password" per line, #
// comments. A file the group or others can read is refused (secretfile).
func readUsers(path string) (map[string]string, error) {
	b, err := secretfile.Read(path)
	if err != nil {
		return nil, err
	}
	users := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		u, p, ok := strings.Cut(line, ":")
		if !ok || u == "" {
			return nil, fmt.Errorf("%s:%d: want user:password", path, n)
		}
		users[u] = p
	}
	return users, sc.Err()
}

// readSecretLine returns the first line of a password or secret file,
// refusing an empty one and one the group or others can read.
func readSecretLine(path string) (string, error) {
	s, err := secretfile.FirstLine(path)
	if err != nil {
		return "", err
	}
	if s == "" {
		return "", fmt.Errorf("%s: first line is empty", path)
	}
	return s, nil
}

// readInput reads the named file, or standard input for "" and "-".
func readInput(e *env, name string) ([]byte, error) {
	if name == "" || name == "-" {
		return io.ReadAll(e.stdin)
	}
	return os.ReadFile(name)
}

// dbName is --db as it may be logged: a Postgres URL without its password.
func dbName(db string) string {
	if !store.IsPostgresDSN(db) {
		return db
	}
	u, err := url.Parse(db)
	if err != nil {
		return "postgres://…"
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

// dsnWithoutPassword is a Postgres URL with its password removed.
func dsnWithoutPassword(db string) string {
	u, err := url.Parse(db)
	if err != nil {
		return ""
	}
	if u.User != nil {
		u.User = url.User(u.User.Username())
	}
	return u.String()
}

// writeJSONLines prints items as JSON lines (the --json form of a list
// command); a write error is exit 2.
func writeJSONLines[T any](e *env, cmd string, items []T) int {
	enc := json.NewEncoder(e.stdout)
	for _, it := range items {
		if err := enc.Encode(it); err != nil {
			fmt.Fprintf(e.stderr, "envelopd %s: %v\n", cmd, err)
			return 2
		}
	}
	return 0
}
