package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/envelopd/envelopd/message"
	"github.com/envelopd/envelopd/store"
)

// runInbox lists stored messages: a table for people, or with --json one
// View object per line (JSONL) for programs.
func runInbox(ctx context.Context, e *env) int {
	c := newStoreCmd(e, "inbox")
	asJSON := c.jsonFlag("print JSON lines instead of a table")
	var ff filterFlags
	ff.register(c.fs)
	c.fs.StringVar(&ff.f.ThreadID, "thread", "", "only this thread id")
	c.fs.IntVar(&ff.f.Limit, "limit", 0, "at most this many (0: all)")
	if !c.parseNone() || !ff.check(e, "inbox") || !checkListFlags(e, "inbox", nil, nil, false, ff.f.Limit) {
		return 2
	}
	return c.withStore(ctx, func(st store.DB) int {
		msgs, err := st.Messages(ctx, ff.f)
		if err != nil {
			return failed(e, "inbox", err)
		}
		if *asJSON {
			return printJSONL(e, msgs)
		}
		printTable(e.stdout, msgs)
		return 0
	})
}

func printJSONL(e *env, msgs []store.Message) int {
	for i := range msgs {
		b, err := message.View(&msgs[i])
		if err != nil {
			fmt.Fprintf(e.stderr, "envelopd: message %d: %v\n", msgs[i].ID, err)
			return 2
		}
		e.stdout.Write(append(b, '\n'))
	}
	return 0
}

func printTable(w io.Writer, msgs []store.Message) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tRECEIVED\tSTATUS\tTYPE\tFROM\tSUBJECT\tTHREAD\tERRORS")
	for _, m := range msgs {
		var codes []string
		for _, p := range m.Errors {
			codes = append(codes, string(p.Code))
		}
		typ := m.Type
		if typ == "" {
			typ = "-"
		}
		subj := termSafe(m.Subject)
		if len(subj) > 40 {
			subj = subj[:37] + "..."
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.ID, m.ReceivedAt.Local().Format("2006-01-02 15:04:05"),
			m.Status, termSafe(typ), termSafe(m.Sender), subj, termSafe(m.ThreadID), strings.Join(codes, ","))
	}
	tw.Flush()
}
