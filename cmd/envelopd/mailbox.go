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
func runMailbox(ctx context.Context, e *env, verb string, c *storeCmd) int {
	pwFile := c.fs.String("password-file", "", "file whose first line is the mailbox password (add)")
	asJSON := c.jsonFlag("print JSON lines (list)")
	args, ok := c.parseVerb(verb, map[string]int{"add": 1, "list": 0})
	if !ok {
		return 2
	}
	if verb == "list" {
		return c.withStore(ctx, func(st store.DB) int {
			mbs, err := st.ListMailboxes(ctx)
			if err != nil {
				return failed(e, "mailbox", err)
			}
			return writeList(e, "mailbox list", *asJSON, mbs, "ADDRESS\tPASSWORD\tMESSAGES\tCREATED", func(w io.Writer, m store.Mailbox) {
				fmt.Fprintf(w, "%s\t%v\t%d\t%s\n", termSafe(m.Address), m.HasPassword, m.Messages, m.CreatedAt.Format(time.RFC3339))
			})
		})
	}
	if *pwFile == "" {
		return usageError(e, c.usage)
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
	return c.withNewStore(ctx, func(st store.DB) int {
		if err := st.SetMailboxPassword(ctx, strings.ToLower(a.Address), h); err != nil {
			return failed(e, "mailbox", err)
		}
		return 0
	})
}

// readPasswordFile is readSecretLine: the group or others may not read
// the file.
func readPasswordFile(path string) (string, error) {
	return readSecretLine(path)
}
