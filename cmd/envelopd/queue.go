package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/envelopd/envelopd/store"
)

// runQueue: envelopd queue [--json] [--state S] lists the outbound queue
// with each recipient's state and last error; `queue retry ID` makes an
// entry's unsent recipients due now; `queue drop ID` gives them up.
func runQueue(ctx context.Context, e *env) int {
	c := newStoreCmd(e, "queue")
	asJSON := c.jsonFlag("print one JSON object per queue entry")
	state := c.fs.String("state", "", "only entries with a recipient in this state (pending, sent, failed, dropped)")
	pos, ok := c.parse()
	if !ok {
		return 2
	}
	var okState bool
	if *state, okState = oneOf(e, "queue", "state", *state, queueStates); !okState {
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
		var err error
		if id, err = strconv.ParseInt(pos[1], 10, 64); err != nil {
			fmt.Fprintf(e.stderr, "envelopd queue: bad id %q\n", pos[1])
			return 2
		}
	}
	return c.withStore(ctx, func(st store.DB) int {
		if len(pos) > 0 {
			return retryOrDrop(ctx, e, "queue", pos[0], id, st.QueueRetry, st.QueueDrop, store.ErrNotFound)
		}
		return listQueue(ctx, e, st, *state, *asJSON)
	})
}

// listQueue is `envelopd queue [--state S] [--json]` over the open store.
func listQueue(ctx context.Context, e *env, st store.DB, state string, asJSON bool) int {
	entries, err := st.Queue(ctx, state)
	if err != nil {
		return failed(e, "queue", err)
	}
	// Pending entries wait forever when the last serve/poll started with
	// no smarthost (store.SettingOutbound).
	mode, _, err := st.Setting(ctx, store.SettingOutbound)
	if err != nil {
		return failed(e, "queue", err)
	}
	stuck := func(q store.QueueEntry) bool {
		return mode == store.OutboundNone && slices.ContainsFunc(q.Recipients, func(r store.QueueRecipient) bool {
			return r.State == store.QueuePending
		})
	}
	if asJSON {
		for _, q := range entries {
			b, _ := json.Marshal(struct {
				store.QueueEntry
				// NoSmarthost: pending, and the last serve/poll had
				// no --smtp-url to deliver it through.
				NoSmarthost bool `json:"no_smarthost"`
			}{q, stuck(q)})
			fmt.Fprintf(e.stdout, "%s\n", b)
		}
		return 0
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tRCPT\tSTATE\tATTEMPTS\tNEXT\tLAST ERROR")
	nStuck := 0
	for _, q := range entries {
		if stuck(q) {
			nStuck++
		}
		for _, r := range q.Recipients {
			next := "-"
			if r.State == store.QueuePending {
				next = r.NextAttempt.Local().Format(time.DateTime)
				if mode == store.OutboundNone {
					next = "no_smarthost"
				}
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s\n", q.ID, q.Kind, termSafe(r.Rcpt), r.State, r.Attempts, next, termSafe(r.LastError))
		}
	}
	tw.Flush()
	if nStuck > 0 {
		fmt.Fprintf(e.stderr, "envelopd queue: %d pending entr%s wait for a smarthost: the last serve/poll ran without --smtp-url\n",
			nStuck, map[bool]string{true: "y", false: "ies"}[nStuck == 1])
	}
	return 0
}

// retryOrDrop is `CMD retry ID` (retry) or `CMD drop ID` (drop), by verb,
// for the queue and the hand-offs: "CMD ID: due now" or "CMD ID: dropped"
// on stdout, exit 0. An error goes to stderr: exit 1 when it is one of
// final (no such row, or one past retrying), 2 otherwise.
func retryOrDrop(ctx context.Context, e *env, cmd, verb string, id int64, retry, drop func(context.Context, int64) error, final ...error) int {
	op, done := retry, "due now"
	if verb == "drop" {
		op, done = drop, "dropped"
	}
	if err := op(ctx, id); err != nil {
		fmt.Fprintf(e.stderr, "envelopd %s %s %d: %v\n", cmd, verb, id, err)
		if slices.ContainsFunc(final, func(f error) bool { return errors.Is(err, f) }) {
			return 1
		}
		return 2
	}
	fmt.Fprintf(e.stdout, "%s %d: %s\n", cmd, id, done)
	return 0
}
