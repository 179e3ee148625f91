package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/envelopd/envelopd/store"
)

const handoffUsage = "usage: envelopd handoff [list] [--json] [--state pending|failed|done|dropped|all] [--target T] [--limit N] | handoff retry ID | handoff drop ID"

// runHandoff is `envelopd handoff`: the --exec/--webhook
// delivery log, like `envelopd queue` for the outbound queue.
//
//	envelopd handoff [list] [--json] [--state S] [--target T] [--limit N]
//	envelopd handoff retry ID   # pending or dropped → due now, backoff reset
//	envelopd handoff drop ID    # never attempted again (retry undoes it)
//
// list shows every hand-off not yet done by default; --state failed is the
// pending ones whose last attempt failed. Exit status: 0; 1 when retry or
// drop names an unknown or already delivered hand-off; 2 usage or I/O.
func runHandoff(ctx context.Context, e *env) int {
	c := newStoreCmd(e, "handoff")
	asJSON := c.jsonFlag("print one JSON object per hand-off")
	var f store.HandoffFilter
	c.fs.StringVar(&f.State, "state", "", "only hand-offs in this state: pending, failed (pending after a failed attempt), done, dropped, all (default: all but done)")
	c.fs.StringVar(&f.Target, "target", "", "only this target: exec, webhook")
	c.fs.IntVar(&f.Limit, "limit", 0, "at most this many (0: all)")
	pos, ok := c.parse()
	if !ok || !checkListFlags(e, "handoff", &f.State, store.HandoffStates, true, f.Limit) {
		return 2
	}
	verb, id, ok := subcommand(e, "handoff", handoffUsage, "envelopd handoff list", pos, []string{"list"}, []string{"retry", "drop"})
	if !ok {
		return 2
	}
	return c.withNewStore(ctx, func(st store.DB) int {
		if verb != "list" {
			return retryOrDrop(ctx, e, "handoff", verb, id, st.HandoffRetry, st.HandoffDrop, store.ErrNotFound, store.ErrHandoffDone)
		}
		return listHandoffs(ctx, e, st, f, *asJSON)
	})
}

// listHandoffs is `envelopd handoff [list]` over the open store.
func listHandoffs(ctx context.Context, e *env, st store.DB, f store.HandoffFilter, asJSON bool) int {
	hs, err := st.Handoffs(ctx, f)
	if err != nil {
		return failed(e, "handoff", err)
	}
	return writeList(e, "handoff", asJSON, hs, "ID\tTARGET\tSTATE\tATTEMPTS\tNEXT\tMESSAGE\tTYPE\tFROM\tLAST ERROR", func(w io.Writer, h store.Handoff) {
		next, state := "-", h.State
		if h.NextAttempt != nil {
			next = h.NextAttempt.Local().Format(time.DateTime)
		}
		if h.Held {
			next = "held (payment)"
		}
		if h.Failed {
			state = store.HandoffFailed
		}
		typ := h.Message.Type
		if typ == "" {
			typ = "-"
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%d\t%s\t%d\t%s\t%s\t%s\n", h.ID, termSafe(h.Target), state, h.Attempts, next,
			h.Message.ID, termSafe(typ), termSafe(h.Message.From), termSafe(h.LastError))
	})
}

// subcommand splits a command's positional arguments into its verb
// ("list" when none) and, for a verb in withID, the one row id that
// follows it (the ID column of listing); a verb in noID takes nothing.
// Anything else is a usage error, reported on stderr (ok false).
func subcommand(e *env, cmd, usage, listing string, pos []string, noID, withID []string) (verb string, id int64, ok bool) {
	verb = "list"
	if len(pos) > 0 {
		verb, pos = pos[0], pos[1:]
	}
	switch {
	case slices.Contains(noID, verb):
		if len(pos) != 0 {
			fmt.Fprintln(e.stderr, usage)
			return verb, 0, false
		}
	case slices.Contains(withID, verb):
		if len(pos) != 1 {
			fmt.Fprintf(e.stderr, "usage: envelopd %s %s ID\n", cmd, verb)
			return verb, 0, false
		}
		n, err := strconv.ParseInt(pos[0], 10, 64)
		if err != nil || n <= 0 {
			fmt.Fprintf(e.stderr, "envelopd %s: bad id %q (the ID column of `%s`)\n", cmd, pos[0], listing)
			return verb, 0, false
		}
		id = n
	default:
		fmt.Fprintf(e.stderr, "envelopd %s: unknown subcommand %q\n%s\n", cmd, verb, usage)
		return verb, 0, false
	}
	return verb, id, true
}
