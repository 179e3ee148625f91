package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/envelopd/envelopd/message"
	"github.com/envelopd/envelopd/store"
)

// runThread prints the thread holding a message as one JSON object:
// {"thread_id": …, "messages": [View…]} oldest first. The message is named
// as for reply (a row id, a Message-ID or an Envelopay id), or by its
// thread id.
func runThread(ctx context.Context, e *env) int {
	c := newStoreCmd(e, "thread")
	pos, ok := c.parse()
	if !ok || len(pos) != 1 {
		fmt.Fprintln(e.stderr, "usage: envelopd thread ID [--db FILE]  (row id, Message-ID, Envelopay id or thread id)")
		return 2
	}
	return c.withStore(ctx, func(st store.DB) int {
		ref := pos[0]
		var msgs []store.Message
		var err error
		if m, ferr := findStored(ctx, st, ref); ferr == nil {
			msgs, err = st.Messages(ctx, store.Filter{ThreadID: m.ThreadID})
		} else {
			msgs, err = st.Thread(ctx, ref)
		}
		if errors.Is(err, store.ErrNotFound) || (err == nil && len(msgs) == 0) {
			fmt.Fprintf(e.stderr, "envelopd thread: %s: not found\n", ref)
			return 1
		}
		if err != nil {
			return failed(e, "thread", err)
		}
		views := make([]json.RawMessage, 0, len(msgs))
		for i := range msgs {
			b, err := message.View(&msgs[i])
			if err != nil {
				return failed(e, "thread", err)
			}
			views = append(views, b)
		}
		out, _ := json.Marshal(map[string]any{"thread_id": msgs[0].ThreadID, "messages": views})
		e.stdout.Write(append(out, '\n'))
		return 0
	})
}
