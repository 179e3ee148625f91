package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/envelopd/envelopd/store"
)

// runQueue: envelopd queue [--json] [--state S] lists the outbound queue
// with each recipient's state and last error; `queue retry ID` makes an
// entry's unsent recipients due now; `queue drop ID` gives them up.
func runQueue(ctx context.Context, e *env) int {
	fs := newFlags(e, "queue")
	db := fs.String("db", defaultDB, "SQLite database file")
	asJSON := fs.Bool("json", false, "print one JSON object per queue entry")
	state := fs.String("state", "", "only entries with a recipient in this state (pending, sent, failed, dropped)")
	pos, err := parseArgs(fs, e.args)
	if err != nil {
		return 2
	}
	if len(pos) > 0 && pos[0] != "retry" && pos[0] != "drop" {
		fmt.Fprintf(e.stderr, "envelopd queue: unknown subcommand %q (retry ID, drop ID)\n", pos[0])
		return 2
	}
	var id int64
	if len(pos) > 0 {
		if len(pos) != 2 {
			fmt.Fprintf(e.stderr, "usage: envelopd queue %s ID\n", pos[0])
			return 2
		}
		if id, err = strconv.ParseInt(pos[1], 10, 64); err != nil {
			fmt.Fprintf(e.stderr, "envelopd queue: bad id %q\n", pos[1])
			return 2
		}
	}
	st, ok := openStore(ctx, e, *db)
	if !ok {
		return 2
	}
	defer st.Close()
	if len(pos) > 0 {
		op := st.QueueRetry
		if pos[0] == "drop" {
			op = st.QueueDrop
		}
		if err := op(ctx, id); err != nil {
			fmt.Fprintf(e.stderr, "envelopd queue %s %d: %v\n", pos[0], id, err)
			if errors.Is(err, store.ErrNotFound) {
				return 1
			}
			return 2
		}
		fmt.Fprintf(e.stdout, "queue %d: %s\n", id, map[string]string{"retry": "due now", "drop": "dropped"}[pos[0]])
		return 0
	}
	entries, err := st.Queue(ctx, *state)
	if err != nil {
		fmt.Fprintf(e.stderr, "envelopd queue: %v\n", err)
		return 2
	}
	if *asJSON {
		for _, q := range entries {
			b, _ := json.Marshal(q)
			fmt.Fprintf(e.stdout, "%s\n", b)
		}
		return 0
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tRCPT\tSTATE\tATTEMPTS\tNEXT\tLAST ERROR")
	for _, q := range entries {
		for _, r := range q.Recipients {
			next := "-"
			if r.State == store.QueuePending {
				next = r.NextAttempt.Local().Format(time.DateTime)
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s\n", q.ID, q.Kind, termSafe(r.Rcpt), r.State, r.Attempts, next, termSafe(r.LastError))
		}
	}
	tw.Flush()
	return 0
}
