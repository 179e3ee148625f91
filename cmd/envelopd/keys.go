package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/envelopd/envelopd/protocols/aicp"
	"github.com/envelopd/envelopd/store"
)

// parseAICPKey accepts every key form AICP peers publish (raw 32 bytes or
// SPKI DER, base64 std or url, padded or not, optional "ed25519:" prefix).
func parseAICPKey(s string) ([]byte, error) { return aicp.ParseKey(s) }

// runKeys manages the public keys the tunnelled-protocol validators use:
//
//	envelopd keys add aicp HANDLE KEY [--db FILE]
//	envelopd keys list [aicp] [--json] [--db FILE]
func runKeys(ctx context.Context, e *env, verb string, c *storeCmd) int {
	asJSON := c.jsonFlag("print JSON")
	args, ok := c.parse()
	if !ok {
		return 2
	}
	switch verb {
	case "add":
		if len(args) != 3 {
			return usageError(e, "usage: envelopd keys add PROTOCOL HANDLE KEY")
		}
		proto, handle, key := args[0], args[1], args[2]
		if proto != "aicp" {
			fmt.Fprintf(e.stderr, "envelopd keys: unknown protocol %q (known: aicp)\n", proto)
			return 2
		}
		raw, err := parseAICPKey(key)
		if err != nil {
			fmt.Fprintf(e.stderr, "envelopd keys: %v\n", err)
			return 1
		}
		return c.withNewStore(ctx, func(st store.DB) int {
			if err := st.PutKey(ctx, proto, handle, base64.StdEncoding.EncodeToString(raw)); err != nil {
				return failed(e, "keys", err)
			}
			return 0
		})
	case "list":
		proto := "aicp"
		if len(args) == 1 {
			proto = args[0]
		} else if len(args) > 1 {
			return 2
		}
		return c.withStore(ctx, func(st store.DB) int { return listKeys(ctx, e, st, proto, *asJSON) })
	}
	fmt.Fprintf(e.stderr, "envelopd keys: unknown verb %q\n", verb)
	return 2
}

// listKeys is `envelopd keys list [PROTOCOL] [--json]` over the open store.
func listKeys(ctx context.Context, e *env, st store.DB, proto string, asJSON bool) int {
	keys, err := st.Keys(ctx, proto)
	if err != nil {
		return failed(e, "keys", err)
	}
	handles := make([]string, 0, len(keys))
	for h := range keys {
		handles = append(handles, h)
	}
	sort.Strings(handles)
	for _, h := range handles {
		if asJSON {
			b, _ := json.Marshal(map[string]string{"protocol": proto, "handle": h, "key": keys[h]})
			fmt.Fprintf(e.stdout, "%s\n", b)
		} else {
			fmt.Fprintf(e.stdout, "%s\t%s\t%s\n", proto, h, keys[h])
		}
	}
	return 0
}
