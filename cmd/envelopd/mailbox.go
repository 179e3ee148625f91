package main

import (
	"context"
	"fmt"
	"io"
	"net/mail"
	"strings"
	"time"

	"github.com/envelopd/envelopd/mailin"
	"github.com/envelopd/envelopd/store"
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
	verb, fs, db, ok := verbFlags(e, "mailbox", usage)
	if !ok {
		return 2
	}
	pwFile := fs.String("password-file", "", "file whose first line is the mailbox password (add)")
	asJSON := fs.Bool("json", false, "print JSON lines (list)")
	args, err := parseArgs(fs, e.args[1:])
	if err != nil {
		return 2
	}
	switch verb {
	case "add":
		if len(args) != 1 || *pwFile == "" {
			return usageError(e, usage)
		}
		a, err := mail.ParseAddress(args[0])
		if err != nil || a.Name != "" || !strings.Contains(a.Address, "@") {
			fmt.Fprintf(e.stderr, "envelopd mailbox: %q is not a bare address\n", args[0])
			return 2
		}
		pw, err := readPasswordFile(*pwFile)
		if err != nil {
			return failed(e, "mailbox", err)
		}
		h, err := mailin.HashPassword(pw, 0)
		if err != nil {
			return failed(e, "mailbox", err)
		}
		st, ok := openStore(ctx, e, *db)
		if !ok {
			return 2
		}
		defer st.Close()
		if err := st.SetMailboxPassword(ctx, strings.ToLower(a.Address), h); err != nil {
			return failed(e, "mailbox", err)
		}
		return 0
	case "list":
		if len(args) != 0 {
			return usageError(e, usage)
		}
		st, ok := openExistingStore(ctx, e, "mailbox list", *db)
		if !ok {
			return 2
		}
		defer st.Close()
		mbs, err := st.ListMailboxes(ctx)
		if err != nil {
			return failed(e, "mailbox", err)
		}
		return writeList(e, "mailbox list", *asJSON, mbs, "ADDRESS\tPASSWORD\tMESSAGES\tCREATED", func(w io.Writer, m store.Mailbox) {
			fmt.Fprintf(w, "%s\t%v\t%d\t%s\n", termSafe(m.Address), m.HasPassword, m.Messages, m.CreatedAt.Format(time.RFC3339))
		})
	}
	return usageError(e, usage)
}

// readPasswordFile is readSecretLine: the group or others may not read
// the file.
func readPasswordFile(path string) (string, error) {
	return readSecretLine(path)
}
