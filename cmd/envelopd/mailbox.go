package main

import (
	"context"
	"fmt"
	"net/mail"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/envelopd/envelopd/mailin"
)

// runMailbox manages relay-mode mailboxes:
//
//	envelopd mailbox add ADDR --password-file F [--db FILE]
//	envelopd mailbox list [--json] [--db FILE]
//
// add declares the mailbox and sets its password (stored as a salted
// PBKDF2-SHA256 hash, never the password); a password file holds the
// password on its first line. list prints every mailbox: a table, or with
// --json one object per line (address, has_password, created_at, messages).
func runMailbox(ctx context.Context, e *env) int {
	const usage = "usage: envelopd mailbox add ADDR --password-file F | envelopd mailbox list [--json]"
	if len(e.args) == 0 {
		fmt.Fprintln(e.stderr, usage)
		return 2
	}
	verb := e.args[0]
	fs := newFlags(e, "mailbox "+verb)
	db := fs.String("db", defaultDB, "SQLite database file, or a postgres:// URL (several nodes on one database)")
	pwFile := fs.String("password-file", "", "file whose first line is the mailbox password (add)")
	asJSON := fs.Bool("json", false, "print JSON lines (list)")
	args, err := parseArgs(fs, e.args[1:])
	if err != nil {
		return 2
	}
	switch verb {
	case "add":
		if len(args) != 1 || *pwFile == "" {
			fmt.Fprintln(e.stderr, usage)
			return 2
		}
		a, err := mail.ParseAddress(args[0])
		if err != nil || a.Name != "" || !strings.Contains(a.Address, "@") {
			fmt.Fprintf(e.stderr, "envelopd mailbox: %q is not a bare address\n", args[0])
			return 2
		}
		pw, err := readPasswordFile(*pwFile)
		if err != nil {
			fmt.Fprintf(e.stderr, "envelopd mailbox: %v\n", err)
			return 2
		}
		h, err := mailin.HashPassword(pw, 0)
		if err != nil {
			fmt.Fprintf(e.stderr, "envelopd mailbox: %v\n", err)
			return 2
		}
		st, ok := openStore(ctx, e, *db)
		if !ok {
			return 2
		}
		defer st.Close()
		if err := st.SetMailboxPassword(ctx, strings.ToLower(a.Address), h); err != nil {
			fmt.Fprintf(e.stderr, "envelopd mailbox: %v\n", err)
			return 2
		}
		return 0
	case "list":
		if len(args) != 0 {
			fmt.Fprintln(e.stderr, usage)
			return 2
		}
		st, ok := openExistingStore(ctx, e, "mailbox list", *db)
		if !ok {
			return 2
		}
		defer st.Close()
		mbs, err := st.ListMailboxes(ctx)
		if err != nil {
			fmt.Fprintf(e.stderr, "envelopd mailbox: %v\n", err)
			return 2
		}
		if *asJSON {
			return writeJSONLines(e, "mailbox list", mbs)
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ADDRESS\tPASSWORD\tMESSAGES\tCREATED")
		for _, m := range mbs {
			fmt.Fprintf(tw, "%s\t%v\t%d\t%s\n", termSafe(m.Address), m.HasPassword, m.Messages, m.CreatedAt.Format(time.RFC3339))
		}
		tw.Flush()
		return 0
	}
	fmt.Fprintln(e.stderr, usage)
	return 2
}

// readPasswordFile is readSecretLine: the group or others may not read
// the file.
func readPasswordFile(path string) (string, error) {
	return readSecretLine(path)
}
