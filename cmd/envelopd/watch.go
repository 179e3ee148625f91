package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	"github.com/envelopd/envelopd/store"
)

// runWatch streams new stored messages as JSON lines, like tail -f. Each
// line's "id" is the cursor: `--since ID` resumes after it. --once prints
// what is there and exits. --type, --status, --direction and --mailbox
// filter as for inbox. --payments also prints a line per payment that
// settles from then on ({"event": "payment.verified" or
// "payment.rejected", "event_id", "payment": {…}}; docs/payments.md).
func runWatch(ctx context.Context, e *env) int {
	c := newStoreCmd(e, "watch")
	since := c.fs.String("since", "", "cursor: print messages after this id (default: only new ones)")
	all := c.fs.Bool("all", false, "start from the first stored message")
	once := c.fs.Bool("once", false, "print what is there and exit")
	pays := c.fs.Bool("payments", false, "also print a line per payment that settles (payment.verified, payment.rejected)")
	var ff filterFlags
	ff.register(c.fs)
	if !c.parseNone() || !ff.check(e, "watch") {
		return 2
	}
	return c.withStore(ctx, func(st store.DB) int {
		return watch(ctx, e, st, ff.f, *since, *all, *once, *pays)
	})
}

// watch is runWatch over the open store st: f selects the messages,
// since, all and once say where the cursor starts and whether it waits,
// pays adds the payment lines.
func watch(ctx context.Context, e *env, st store.DB, f store.Filter, since string, all, once, pays bool) int {
	switch {
	case since != "":
		n, err := strconv.ParseInt(since, 10, 64)
		if err != nil || n < 0 {
			fmt.Fprintf(e.stderr, "envelopd watch: --since wants a message id, got %q\n", since)
			return 2
		}
		f.AfterID = n
	case !all && !once:
		// The cursor starts after the newest message of any kind: the
		// filters select what is printed, not where "new" begins.
		top, err := newestID(ctx, st)
		if err != nil {
			return failed(e, "watch", err)
		}
		f.AfterID = top
	}
	f.Limit = 500
	var out sync.Mutex // the message and payment lines share stdout
	if pays && !once {
		from, err := st.LastEventID(ctx)
		if err != nil {
			return failed(e, "watch", err)
		}
		go watchPayments(ctx, e, st, from, &out)
	}
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
			return failed(e, "watch", err)
		}
		out.Lock()
		code := printJSONL(e, msgs)
		out.Unlock()
		if code != 0 {
			return code
		}
		if len(msgs) > 0 {
			f.AfterID = msgs[len(msgs)-1].ID
		}
		if len(msgs) == f.Limit {
			continue
		}
		f.AfterID = max(f.AfterID, top)
		if once {
			return 0
		}
		if err := st.WaitNew(ctx, f.AfterID); err != nil {
			return 0 // interrupted
		}
	}
}

// newestID is the id of the newest stored message, or 0.
func newestID(ctx context.Context, st store.Reader) (int64, error) {
	last, err := st.Messages(ctx, store.Filter{Limit: 1, Newest: true})
	if err != nil || len(last) == 0 {
		return 0, err
	}
	return last[0].ID, nil
}

// watchPayments prints a JSON line per payment event after the event id
// from, until ctx ends.
func watchPayments(ctx context.Context, e *env, st store.DB, from int64, out *sync.Mutex) {
	for {
		// As for messages: every event up to top is committed, so the
		// cursor may pass the other events' ids once the query answered
		// (else WaitEvents would wake at once, again and again).
		top, err := st.LastEventID(ctx)
		var evs []store.Event
		if err == nil {
			evs, err = st.Events(ctx, store.EventFilter{After: from, Types: []string{store.EventPaymentVerified, store.EventPaymentRejected}})
		}
		if err != nil {
			if ctx.Err() == nil {
				fmt.Fprintf(e.stderr, "envelopd watch: payments: %v\n", err)
			}
			return
		}
		for _, ev := range evs {
			from = ev.ID
			p, err := st.GetPayment(ctx, ev.MessageID)
			if err != nil {
				continue
			}
			b, _ := json.Marshal(struct {
				Event   string         `json:"event"`
				EventID int64          `json:"event_id"`
				Inbox   string         `json:"inbox"`
				Payment *store.Payment `json:"payment"`
			}{ev.Type, ev.ID, ev.Inbox, p})
			out.Lock()
			e.stdout.Write(append(b, '\n'))
			out.Unlock()
		}
		if len(evs) == 100 { // a full page: more may follow
			continue
		}
		from = max(from, top)
		if err := st.WaitEvents(ctx, from); err != nil {
			return
		}
	}
}
