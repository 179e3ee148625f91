package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/envelopd/envelopd/store"
)

// runWatch streams new stored messages as JSON lines, like tail -f. Each
// line's "id" is the cursor: `--since ID` resumes after it. --once prints
// what is there and exits.
func runWatch(ctx context.Context, e *env) int {
	fs := newFlags(e, "watch")
	db := fs.String("db", defaultDB, "SQLite database file")
	since := fs.String("since", "", "cursor: print messages after this id (default: only new ones)")
	all := fs.Bool("all", false, "start from the first stored message")
	once := fs.Bool("once", false, "print what is there and exit")
	var f store.Filter
	fs.StringVar(&f.Mailbox, "mailbox", "", "only this mailbox (relay mode)")
	if err := fs.Parse(e.args); err != nil || fs.NArg() > 0 {
		return 2
	}
	st, ok := openStore(ctx, e, *db)
	if !ok {
		return 2
	}
	defer st.Close()
	switch {
	case *since != "":
		n, err := strconv.ParseInt(*since, 10, 64)
		if err != nil || n < 0 {
			fmt.Fprintf(e.stderr, "envelopd watch: --since wants a message id, got %q\n", *since)
			return 2
		}
		f.AfterID = n
	case !*all && !*once:
		last, err := st.Messages(ctx, store.Filter{Mailbox: f.Mailbox, Limit: 1, Newest: true})
		if err != nil {
			fmt.Fprintf(e.stderr, "envelopd watch: %v\n", err)
			return 2
		}
		if len(last) > 0 {
			f.AfterID = last[0].ID
		}
	}
	f.Limit = 500
	for {
		msgs, err := st.Messages(ctx, f)
		if err != nil {
			if ctx.Err() != nil {
				return 0
			}
			fmt.Fprintf(e.stderr, "envelopd watch: %v\n", err)
			return 2
		}
		if code := printJSONL(e, msgs); code != 0 {
			return code
		}
		if len(msgs) > 0 {
			f.AfterID = msgs[len(msgs)-1].ID
			continue
		}
		if *once {
			return 0
		}
		if err := st.WaitNew(ctx, f.AfterID); err != nil {
			return 0 // interrupted
		}
	}
}
