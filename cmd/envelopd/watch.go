package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/envelopd/envelopd/store"
)

// runWatch streams new stored messages as JSON lines, like tail -f. Each
// line's "id" is the cursor: `--since ID` resumes after it. --once prints
// what is there and exits. --type, --status, --direction and --mailbox
// filter as for inbox.
func runWatch(ctx context.Context, e *env) int {
	fs := newFlags(e, "watch")
	db := fs.String("db", defaultDB, "SQLite database file, or a postgres:// URL (several nodes on one database)")
	since := fs.String("since", "", "cursor: print messages after this id (default: only new ones)")
	all := fs.Bool("all", false, "start from the first stored message")
	once := fs.Bool("once", false, "print what is there and exit")
	var ff filterFlags
	ff.register(fs)
	pos, err := parseArgs(fs, e.args)
	if err != nil || !noArgs(e, "watch", pos) || !ff.check(e, "watch") {
		return 2
	}
	f := ff.f
	st, ok := openExistingStore(ctx, e, "watch", *db)
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
		// The cursor starts after the newest message of any kind: the
		// filters select what is printed, not where "new" begins.
		top, err := newestID(ctx, st)
		if err != nil {
			fmt.Fprintf(e.stderr, "envelopd watch: %v\n", err)
			return 2
		}
		f.AfterID = top
	}
	f.Limit = 500
	for {
		// The newest id before the filtered query: every message up to it
		// is committed, so once the query has answered, the cursor may
		// skip past the ones the filters left out (else WaitNew would
		// wake at once, again and again, for a message never printed).
		top, err := newestID(ctx, st)
		var msgs []store.Message
		if err == nil {
			msgs, err = st.Messages(ctx, f)
		}
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
		}
		if len(msgs) == f.Limit {
			continue
		}
		f.AfterID = max(f.AfterID, top)
		if *once {
			return 0
		}
		if err := st.WaitNew(ctx, f.AfterID); err != nil {
			return 0 // interrupted
		}
	}
}

// newestID is the id of the newest stored message, or 0.
func newestID(ctx context.Context, st store.Store) (int64, error) {
	last, err := st.Messages(ctx, store.Filter{Limit: 1, Newest: true})
	if err != nil || len(last) == 0 {
		return 0, err
	}
	return last[0].ID, nil
}
