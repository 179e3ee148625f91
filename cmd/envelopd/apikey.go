package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/mail"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/envelopd/envelopd/api"
	"github.com/envelopd/envelopd/store"
)

// runAPIKey manages the HTTP API's keys:
//
//	envelopd apikey create [--inbox ADDR]... [--name N] [--json] [--db FILE]
//	envelopd apikey list [--json] [--db FILE]
//	envelopd apikey revoke ID [--db FILE]
//
// create prints the new key once on stdout (only its SHA-256 is stored);
// --inbox scopes it to those inboxes (repeatable; none: every inbox).
func runAPIKey(ctx context.Context, e *env) int {
	const usage = "usage: envelopd apikey create [--inbox ADDR]... [--name N] [--json] | apikey list [--json] | apikey revoke ID"
	if len(e.args) == 0 {
		fmt.Fprintln(e.stderr, usage)
		return 2
	}
	verb := e.args[0]
	fs := newFlags(e, "apikey "+verb)
	db := fs.String("db", defaultDB, "SQLite database file, or a postgres:// URL (several nodes on one database)")
	asJSON := fs.Bool("json", false, "print JSON")
	name := fs.String("name", "", "a name for the key (create)")
	var inboxes multiFlag
	fs.Var(&inboxes, "inbox", "scope the key to this inbox address (create; repeatable)")
	args, err := parseArgs(fs, e.args[1:])
	if err != nil {
		return 2
	}
	switch verb {
	case "create":
		if len(args) != 0 {
			fmt.Fprintln(e.stderr, usage)
			return 2
		}
		var scope []string
		for _, in := range inboxes {
			a, err := mail.ParseAddress(in)
			if err != nil || a.Name != "" || !strings.Contains(a.Address, "@") {
				fmt.Fprintf(e.stderr, "envelopd apikey: --inbox %q is not a bare address\n", in)
				return 2
			}
			scope = append(scope, strings.ToLower(a.Address))
		}
		key, k, err := api.NewKey(scope, *name, time.Now())
		if err != nil {
			fmt.Fprintf(e.stderr, "envelopd apikey: %v\n", err)
			return 2
		}
		st, ok := openStore(ctx, e, *db)
		if !ok {
			return 2
		}
		defer st.Close()
		if err := st.CreateAPIKey(ctx, k); err != nil {
			fmt.Fprintf(e.stderr, "envelopd apikey: %v\n", err)
			return 2
		}
		if *asJSON {
			b, _ := json.Marshal(struct {
				Key string `json:"key"`
				store.APIKey
			}{key, k})
			fmt.Fprintf(e.stdout, "%s\n", b)
		} else {
			fmt.Fprintln(e.stdout, key)
			fmt.Fprintf(e.stderr, "envelopd apikey: key %s created; it is shown only now\n", k.ID)
		}
		return 0
	case "list":
		if len(args) != 0 {
			fmt.Fprintln(e.stderr, usage)
			return 2
		}
		st, ok := openExistingStore(ctx, e, "apikey list", *db)
		if !ok {
			return 2
		}
		defer st.Close()
		keys, err := st.APIKeys(ctx)
		if err != nil {
			fmt.Fprintf(e.stderr, "envelopd apikey: %v\n", err)
			return 2
		}
		if *asJSON {
			return writeJSONLines(e, "apikey list", keys)
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tINBOXES\tCREATED\tREVOKED")
		for _, k := range keys {
			scope := "*"
			if len(k.Inboxes) > 0 {
				scope = strings.Join(k.Inboxes, ",")
			}
			rev := "-"
			if k.RevokedAt != nil {
				rev = k.RevokedAt.Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", k.ID, termSafe(k.Name), termSafe(scope), k.CreatedAt.Format(time.RFC3339), rev)
		}
		tw.Flush()
		return 0
	case "revoke":
		if len(args) != 1 {
			fmt.Fprintln(e.stderr, usage)
			return 2
		}
		st, ok := openExistingStore(ctx, e, "apikey revoke", *db)
		if !ok {
			return 2
		}
		defer st.Close()
		id := strings.TrimPrefix(args[0], "ek_")
		if i := strings.IndexByte(id, '_'); i >= 0 {
			id = id[:i] // a whole key names its id
		}
		if err := st.RevokeAPIKey(ctx, id); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				fmt.Fprintf(e.stderr, "envelopd apikey: no key %s\n", id)
				return 1
			}
			fmt.Fprintf(e.stderr, "envelopd apikey: %v\n", err)
			return 2
		}
		return 0
	}
	fmt.Fprintln(e.stderr, usage)
	return 2
}
