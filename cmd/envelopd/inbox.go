package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/envelopd/envelopd/mailin"
	"github.com/envelopd/envelopd/store"
)

// runInbox lists stored messages: a table for people, or with --json one
// View object per line (JSONL) for programs.
func runInbox(ctx context.Context, e *env) int {
	fs := newFlags(e, "inbox")
	db := fs.String("db", defaultDB, "SQLite database file")
	asJSON := fs.Bool("json", false, "print JSON lines instead of a table")
	var f store.Filter
	fs.StringVar(&f.Type, "type", "", "only this Envelopay type (lower case)")
	fs.StringVar(&f.Status, "status", "", "only this status: accepted, quarantined, duplicate")
	fs.StringVar(&f.ThreadID, "thread", "", "only this thread id")
	fs.StringVar(&f.Mailbox, "mailbox", "", "only this mailbox (relay mode)")
	fs.IntVar(&f.Limit, "limit", 0, "at most this many (0: all)")
	if err := fs.Parse(e.args); err != nil || fs.NArg() > 0 {
		return 2
	}
	f.Type = strings.ToLower(f.Type)
	st, ok := openStore(ctx, e, *db)
	if !ok {
		return 2
	}
	defer st.Close()
	msgs, err := st.Messages(ctx, f)
	if err != nil {
		fmt.Fprintf(e.stderr, "envelopd inbox: %v\n", err)
		return 2
	}
	if *asJSON {
		return printJSONL(e, msgs)
	}
	printTable(e.stdout, msgs)
	return 0
}

func printJSONL(e *env, msgs []store.Message) int {
	for i := range msgs {
		b, err := mailin.View(&msgs[i])
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
