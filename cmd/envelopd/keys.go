package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/envelopd/envelopd/protocols/aicp"
)

// parseAICPKey accepts every key form AICP peers publish (raw 32 bytes or
// SPKI DER, base64 std or url, padded or not, optional "ed25519:" prefix).
func parseAICPKey(s string) ([]byte, error) { return aicp.ParseKey(s) }

// runKeys manages the public keys the tunnelled-protocol validators use:
//
//	envelopd keys add aicp HANDLE KEY [--db FILE]
//	envelopd keys list [aicp] [--json] [--db FILE]
func runKeys(ctx context.Context, e *env) int {
	verb, fs, db, ok := verbFlags(e, "keys", "usage: envelopd keys add PROTOCOL HANDLE KEY | envelopd keys list [PROTOCOL] [--json]")
	if !ok {
		return 2
	}
	asJSON := fs.Bool("json", false, "print JSON")
	args, err := parseArgs(fs, e.args[1:])
	if err != nil {
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
		st, ok := openStore(ctx, e, *db)
		if !ok {
			return 2
		}
		defer st.Close()
		if err := st.PutKey(ctx, proto, handle, base64.StdEncoding.EncodeToString(raw)); err != nil {
			return failed(e, "keys", err)
		}
		return 0
	case "list":
		proto := "aicp"
		if len(args) == 1 {
			proto = args[0]
		} else if len(args) > 1 {
			return 2
		}
		st, ok := openExistingStore(ctx, e, "keys list", *db)
		if !ok {
			return 2
		}
		defer st.Close()
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
			if *asJSON {
				b, _ := json.Marshal(map[string]string{"protocol": proto, "handle": h, "key": keys[h]})
				fmt.Fprintf(e.stdout, "%s\n", b)
			} else {
				fmt.Fprintf(e.stdout, "%s\t%s\t%s\n", proto, h, keys[h])
			}
		}
		return 0
	}
	fmt.Fprintf(e.stderr, "envelopd keys: unknown verb %q\n", verb)
	return 2
}
