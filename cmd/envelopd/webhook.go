package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/envelopd/envelopd/store"
)

// webhookRow is one line of `envelopd webhook list --json`: the
// webhook's owner and state, never its secret.
type webhookRow struct {
	ID             string    `json:"webhook_id"`
	URL            string    `json:"url"`
	EventTypes     []string  `json:"event_types"`
	InboxIDs       []string  `json:"inbox_ids"`
	KeyID          string    `json:"key_id"`
	State          string    `json:"state"`
	DisabledReason string    `json:"disabled_reason"`
	Failures       int       `json:"failures"`
	ClientID       string    `json:"client_id"`
	CreatedAt      time.Time `json:"created_at"`
}

// runWebhook manages the HTTP API's webhooks from the command line:
//
//	envelopd webhook list [--json] [--db FILE]
//	envelopd webhook disable ID [--db FILE]
//	envelopd webhook delete ID [--db FILE]
//
// list shows each webhook's owner (the API key that made it) and state
// (enabled, failing, disabled and why); disable stops its deliveries
// (pending ones stay, undelivered); delete removes it and its pending
// deliveries. Revoking a key (envelopd apikey revoke) disables the
// webhooks it made.
func runWebhook(ctx context.Context, e *env, verb string, c *storeCmd) int {
	asJSON := c.jsonFlag("print JSON (list)")
	args, ok := c.parseVerb(verb, map[string]int{"list": 0, "disable": 1, "delete": 1})
	if !ok {
		return 2
	}
	return c.withStore(ctx, func(st store.DB) int {
		switch verb {
		case "list":
			return listWebhooks(ctx, e, st, *asJSON)
		case "disable":
			w, err := st.WebhookByID(ctx, args[0])
			if err == nil {
				w.Enabled, w.DisabledReason, w.UpdatedAt = false, "operator", time.Now().UTC()
				// The operator may always disable: no limit can be crossed.
				err = st.UpdateWebhook(ctx, w, store.WebhookLimits{PerKey: 1 << 30, PerInbox: 1 << 30, EventTypes: 1 << 30, EventTypeLen: 1 << 30, Inboxes: 1 << 30})
			}
			return webhookDone(e, args[0], err)
		default:
			return webhookDone(e, args[0], st.DeleteWebhook(ctx, args[0]))
		}
	})
}

// listWebhooks is `envelopd webhook list [--json]` over the open store.
func listWebhooks(ctx context.Context, e *env, st store.DB, asJSON bool) int {
	ws, err := st.Webhooks(ctx, 0, "", 0)
	if err != nil {
		return failed(e, "webhook", err)
	}
	rows := make([]webhookRow, 0, len(ws))
	for _, w := range ws {
		rows = append(rows, webhookRow{ID: w.ID, URL: w.URL, EventTypes: orEmpty(w.EventTypes), InboxIDs: orEmpty(w.InboxIDs),
			KeyID: w.KeyID, State: w.State(), DisabledReason: w.DisabledReason, Failures: w.Failures, ClientID: w.ClientID, CreatedAt: w.CreatedAt})
	}
	return writeList(e, "webhook list", asJSON, rows, "ID\tSTATE\tOWNER\tINBOXES\tEVENTS\tURL", func(w io.Writer, r webhookRow) {
		state := r.State
		if r.DisabledReason != "" {
			state += " (" + r.DisabledReason + ")"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, state, orDash(r.KeyID), termSafe(listOrStar(r.InboxIDs)),
			termSafe(listOrStar(r.EventTypes)), termSafe(r.URL))
	})
}

func webhookDone(e *env, id string, err error) int {
	switch {
	case errors.Is(err, store.ErrNotFound):
		fmt.Fprintf(e.stderr, "envelopd webhook: no webhook %s\n", id)
		return 1
	case err != nil:
		return failed(e, "webhook", err)
	}
	return 0
}

func orEmpty(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func listOrStar(l []string) string {
	if len(l) == 0 {
		return "*"
	}
	return strings.Join(l, ",")
}
