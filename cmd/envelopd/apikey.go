package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/mail"
	"strings"
	"time"

	"github.com/envelopd/envelopd/api"
	"github.com/envelopd/envelopd/store"
)

// runAPIKey manages the HTTP API's keys:
//
//	envelopd apikey create [--inbox ADDR]... [--name N] [--permissions P,…] [--json] [--db FILE]
//	envelopd apikey list [--json] [--db FILE]
//	envelopd apikey revoke ID [--db FILE]
//
// create prints the new key once on stdout (only its SHA-256 is stored);
// --inbox scopes it to those inboxes (repeatable; none: every inbox);
// --permissions gives it only those operations (the API's permission
// names, api.Permissions; omitted: every one).
func runAPIKey(ctx context.Context, e *env, verb string, c *storeCmd) int {
	asJSON := c.jsonFlag("print JSON")
	name := c.fs.String("name", "", "a name for the key (create)")
	var inboxes multiFlag
	c.fs.Var(&inboxes, "inbox", "scope the key to this inbox address (create; repeatable)")
	var perms []string // nil: every permission
	c.fs.Func("permissions", "give the key only these permissions, comma-separated: "+strings.Join(api.Permissions, ","), func(v string) (err error) {
		perms, err = api.ParsePermissionList(v)
		return err
	})
	args, ok := c.parseVerb(verb, map[string]int{"create": 0, "list": 0, "revoke": 1})
	if !ok {
		return 2
	}
	switch verb {
	case "create":
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
			return failed(e, "apikey", err)
		}
		k.Permissions, k.UpdatedAt = perms, k.CreatedAt
		return c.withNewStore(ctx, func(st store.DB) int {
			if err := st.CreateAPIKey(ctx, k); err != nil {
				return failed(e, "apikey", err)
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
		})
	case "list":
		return c.withStore(ctx, func(st store.DB) int {
			keys, err := st.APIKeys(ctx)
			if err != nil {
				return failed(e, "apikey", err)
			}
			return writeList(e, "apikey list", *asJSON, keys, "ID\tNAME\tINBOXES\tPERMISSIONS\tCREATED\tREVOKED", func(w io.Writer, k store.APIKey) {
				scope := "*"
				if len(k.Inboxes) > 0 {
					scope = strings.Join(k.Inboxes, ",")
				}
				perms := "*"
				if k.Permissions != nil {
					perms = strings.Join(k.Permissions, ",")
				}
				rev := "-"
				if k.RevokedAt != nil {
					rev = k.RevokedAt.Format(time.RFC3339)
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, termSafe(k.Name), termSafe(scope), termSafe(perms), k.CreatedAt.Format(time.RFC3339), rev)
			})
		})
	default: // revoke
		id := strings.TrimPrefix(args[0], "ek_")
		if i := strings.IndexByte(id, '_'); i >= 0 {
			id = id[:i] // a whole key names its id
		}
		return c.withStore(ctx, func(st store.DB) int {
			if err := st.RevokeAPIKey(ctx, id); err != nil {
				if errors.Is(err, store.ErrNotFound) {
					fmt.Fprintf(e.stderr, "envelopd apikey: no key %s\n", id)
					return 1
				}
				return failed(e, "apikey", err)
			}
			return 0
		})
	}
}
