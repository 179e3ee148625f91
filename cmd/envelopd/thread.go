package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/envelopd/envelopd/mailin"
	"github.com/envelopd/envelopd/store"
)

// runThread prints the thread holding a thread id, Message-ID or Envelopay
// id as one JSON object: {"thread_id": …, "messages": [View…]} oldest first.
func runThread(ctx context.Context, e *env) int {
	fs := newFlags(e, "thread")
	db := fs.String("db", defaultDB, "SQLite database file")
	if err := fs.Parse(e.args); err != nil || fs.NArg() != 1 {
		fmt.Fprintln(e.stderr, "usage: envelopd thread [--db FILE] ID")
		return 2
	}
	st, ok := openStore(ctx, e, *db)
	if !ok {
		return 2
	}
	defer st.Close()
	msgs, err := st.Thread(ctx, fs.Arg(0))
	if errors.Is(err, store.ErrNotFound) || (err == nil && len(msgs) == 0) {
		fmt.Fprintf(e.stderr, "envelopd thread: %s: not found\n", fs.Arg(0))
		return 1
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "envelopd thread: %v\n", err)
		return 2
	}
	views := make([]json.RawMessage, 0, len(msgs))
	for i := range msgs {
		b, err := mailin.View(&msgs[i])
		if err != nil {
			fmt.Fprintf(e.stderr, "envelopd thread: %v\n", err)
			return 2
		}
		views = append(views, b)
	}
	out, _ := json.Marshal(map[string]any{"thread_id": msgs[0].ThreadID, "messages": views})
	e.stdout.Write(append(out, '\n'))
	return 0
}
