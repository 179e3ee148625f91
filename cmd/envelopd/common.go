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
	"slices"
	"strings"
	"text/tabwriter"

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
			return failed(e, cmd, err)
		}
	}
	return 0
}

// dbUsage is the help of the --db flag of every command that opens the
// store.
const dbUsage = "SQLite database file, or a postgres:// URL (several nodes on one database)"

// dbFlag registers --db, the store a command opens, on fs.
func dbFlag(fs *flag.FlagSet) *string { return fs.String("db", defaultDB, dbUsage) }

// verbFlags starts a command whose first argument is its verb (`apikey
// create`, `mailbox list`): with no verb it prints usage and ok is false;
// otherwise fs is the verb's flag set, with --db registered.
func verbFlags(e *env, cmd, usage string) (verb string, fs *flag.FlagSet, db *string, ok bool) {
	if len(e.args) == 0 {
		fmt.Fprintln(e.stderr, usage)
		return "", nil, nil, false
	}
	verb = e.args[0]
	fs = newFlags(e, cmd+" "+verb)
	return verb, fs, dbFlag(fs), true
}

// failed reports err as `envelopd CMD: err` on stderr and returns exit
// status 2 (usage or I/O).
func failed(e *env, cmd string, err error) int {
	fmt.Fprintf(e.stderr, "envelopd %s: %v\n", cmd, err)
	return 2
}

// usageError prints usage on stderr and returns exit status 2.
func usageError(e *env, usage string) int {
	fmt.Fprintln(e.stderr, usage)
	return 2
}

// writeTable prints items as a table for people: the header line, then
// the line row writes for each item, columns separated by two spaces.
func writeTable[T any](w io.Writer, header string, items []T, row func(w io.Writer, it T)) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, it := range items {
		row(tw, it)
	}
	tw.Flush()
}

// writeList prints the result of a list command: JSON lines with --json
// (writeJSONLines), a table otherwise (writeTable). It returns the exit
// status.
func writeList[T any](e *env, cmd string, asJSON bool, items []T, header string, row func(w io.Writer, it T)) int {
	if asJSON {
		return writeJSONLines(e, cmd, items)
	}
	writeTable(e.stdout, header, items, row)
	return 0
}

// checkListFlags checks a list command's --state and --limit: state
// (lower-cased in place; nil when the command has none) is empty or one of
// states, or "all" when withAll; limit is not negative. What is wrong is
// reported on stderr (false).
func checkListFlags(e *env, cmd string, state *string, states []string, withAll bool, limit int) bool {
	if state != nil {
		*state = strings.ToLower(*state)
		if *state != "" && !(withAll && *state == "all") && !slices.Contains(states, *state) {
			all := ""
			if withAll {
				all = ", all"
			}
			fmt.Fprintf(e.stderr, "envelopd %s: --state %q: want one of %s%s\n", cmd, *state, strings.Join(states, ", "), all)
			return false
		}
	}
	if limit < 0 {
		fmt.Fprintf(e.stderr, "envelopd %s: --limit must not be negative\n", cmd)
		return false
	}
	return true
}
