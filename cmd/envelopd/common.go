package main

import (
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

	"github.com/envelopd/envelopd/internal/conflines"
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
	sc := conflines.New(bytes.NewReader(b))
	for sc.Scan() {
		n, line := sc.Line()
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

// storeCmd is what every command over the store starts from: its flag set
// with --db, the arguments it parses and the name its messages carry
// ("inbox", "apikey list").
type storeCmd struct {
	e    *env
	name string
	args []string // after the command's name (and its verb)
	fs   *flag.FlagSet
	db   *string
	// usage is a verb command's synopsis of all its verbs (verbCmd).
	usage string
}

// newStoreCmd starts the command name over the store: its flag set, with
// --db registered.
func newStoreCmd(e *env, name string) *storeCmd {
	fs := newFlags(e, name)
	return &storeCmd{e: e, name: name, args: e.args, fs: fs, db: dbFlag(fs)}
}

// verbCommand is the run of the command cmd made of verbs (verbCmd):
// with no verb it prints usage, the synopsis of every verb (exit status
// 2), otherwise run runs the verb with its storeCmd.
func verbCommand(cmd, usage string, run func(ctx context.Context, e *env, verb string, c *storeCmd) int) func(context.Context, *env) int {
	return func(ctx context.Context, e *env) int {
		verb, c, ok := verbCmd(e, cmd, usage)
		if !ok {
			return 2
		}
		return run(ctx, e, verb, c)
	}
}

// verbCmd starts a command whose first argument is its verb (`apikey
// create`, `mailbox list`): with no verb it prints usage and ok is false;
// otherwise c is the verb's, named "CMD VERB", parsing what follows the
// verb.
func verbCmd(e *env, cmd, usage string) (verb string, c *storeCmd, ok bool) {
	if len(e.args) == 0 {
		fmt.Fprintln(e.stderr, usage)
		return "", nil, false
	}
	verb = e.args[0]
	c = newStoreCmd(e, cmd+" "+verb)
	c.args, c.usage = e.args[1:], usage
	return verb, c, true
}

// jsonFlag registers --json (usage: what it prints).
func (c *storeCmd) jsonFlag(usage string) *bool { return c.fs.Bool("json", false, usage) }

// parse parses the command's flags, before or after its positional
// arguments (parseArgs), and returns the positional ones; ok is false
// when a flag is wrong (the flag package said why on stderr).
func (c *storeCmd) parse() (pos []string, ok bool) {
	pos, err := parseArgs(c.fs, c.args)
	return pos, err == nil
}

// parseVerb is parse for a verb command whose verbs each take a fixed
// number of positional arguments (arity): an unknown verb or another
// count is a usage error, its usage printed on stderr (ok false).
func (c *storeCmd) parseVerb(verb string, arity map[string]int) (args []string, ok bool) {
	if args, ok = c.parse(); !ok {
		return nil, false
	}
	if n, known := arity[verb]; !known || len(args) != n {
		usageError(c.e, c.usage)
		return nil, false
	}
	return args, true
}

// parseNone is parse for a command that takes flags only: a positional
// argument is a usage error too (noArgs).
func (c *storeCmd) parseNone() bool {
	pos, ok := c.parse()
	return ok && noArgs(c.e, c.name, pos)
}

// withStore runs fn with the store --db names, which must exist
// (openExistingStore), and closes it after. The exit status is fn's, or 2
// when the store does not open.
func (c *storeCmd) withStore(ctx context.Context, fn func(st store.DB) int) int {
	st, ok := openExistingStore(ctx, c.e, c.name, *c.db)
	return closeAfter(st, ok, fn)
}

// withNewStore is withStore for a command that writes: a missing SQLite
// file is created (openStore).
func (c *storeCmd) withNewStore(ctx context.Context, fn func(st store.DB) int) int {
	st, ok := openStore(ctx, c.e, *c.db)
	return closeAfter(st, ok, fn)
}

func closeAfter(st store.DB, ok bool, fn func(st store.DB) int) int {
	if !ok {
		return 2
	}
	defer st.Close()
	return fn(st)
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
