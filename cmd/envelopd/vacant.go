package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"regexp"

	"github.com/envelopd/envelopd/protocols/tunnelsign"
	"github.com/envelopd/envelopd/protocols/vacant"
	"github.com/envelopd/envelopd/store"
)

const vacantUsage = "usage: envelopd vacant sign --key FILE --to HEX [--seq N --prev HEX | --db FILE] [--idem KEY] [--now RFC3339] [--role R] [--context ID] [--text T | MSG.json|-]"

var vacantHexRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// runVacant is "envelopd vacant sign": it builds and signs a Vacant P6
// envelope (vacant-p6-protocol.txt, build_envelope + to_a2a_jsonrpc) and
// prints its JSON-RPC wire form.
//
// The message is --text T (one text part, role --role, default ROLE_USER, a
// random messageId) or an A2A message JSON file ({"role", "parts",
// "contextId", "messageId", "selfEval"}). The chain position is --seq and
// --prev (--prev may be left out for seq 1); without them it is read from
// the store (--db): the tip of the from>to chain, plus one. Signing does not
// advance the tip: the tip moves when the envelope is stored as sent.
func runVacant(ctx context.Context, e *env) int {
	if len(e.args) == 0 || e.args[0] != "sign" {
		fmt.Fprintln(e.stderr, vacantUsage)
		return 2
	}
	fs := flag.NewFlagSet("envelopd vacant sign", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	keyFile := fs.String("key", "", "Ed25519 private key: PEM PKCS#8, or base64/hex 32-byte seed")
	to := fs.String("to", "", "recipient vacant id: 64 lowercase hex digits")
	seq := fs.Int64("seq", 0, "sequence number (default: the store's chain tip + 1)")
	prev := fs.String("prev", "", "hash of the previous envelope on the pair (default: the store's tip)")
	db := fs.String("db", "envelopd.db", "SQLite database to read the chain tip from")
	idem := fs.String("idem", "", "idempotency key (default: a random UUID)")
	nowFlag := fs.String("now", "", "envelope timestamp (RFC 3339); default now")
	role := fs.String("role", "ROLE_USER", "message role for --text")
	contextID := fs.String("context", "", "contextId for --text")
	text := fs.String("text", "", "message text (one text part)")
	args, err := parseArgs(fs, e.args[1:])
	if err != nil {
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *keyFile == "" || !vacantHexRE.MatchString(*to) || len(args) > 1 || (set["text"] && len(args) == 1) ||
		(set["prev"] && !set["seq"]) || (set["seq"] && *seq > 1 && !set["prev"]) {
		fmt.Fprintln(e.stderr, vacantUsage)
		return 2
	}
	fail := func(code int, err error) int {
		fmt.Fprintf(e.stderr, "envelopd vacant sign: %v\n", err)
		return code
	}
	now, err := parseNow(*nowFlag)
	if err != nil {
		return fail(2, err)
	}
	priv, err := loadEd25519Key(*keyFile)
	if err != nil {
		return fail(2, err)
	}
	var msg vacant.Message
	if set["text"] {
		msg = tunnelsign.VacantText(*text, *role, *contextID)
	} else {
		doc, err := readArg(e, args)
		if err != nil {
			return fail(2, err)
		}
		if msg, err = vacant.MessageFromJSON(doc); err != nil {
			return fail(1, err)
		}
	}
	env := &vacant.Envelope{To: *to, Seq: *seq, Prev: *prev, Time: now, Idem: *idem, Payload: msg}
	if !set["seq"] {
		from := tunnelsign.VacantID(priv)
		if env.Seq, env.Prev, err = chainNext(ctx, *db, vacant.Chain(from, *to)); err != nil {
			return fail(2, fmt.Errorf("%w (or give --seq and --prev)", err))
		}
	}
	wire, err := tunnelsign.SignVacant(env, priv)
	if err != nil {
		return fail(1, err)
	}
	fmt.Fprintf(e.stdout, "%s\n", wire)
	return 0
}

// chainNext reads the tip of chain from the store at path and returns the
// next envelope's seq and prev.
func chainNext(ctx context.Context, path, chain string) (int64, string, error) {
	if _, err := os.Stat(path); err != nil {
		return 0, "", fmt.Errorf("no store to read the chain tip from: %w", err)
	}
	st, err := store.OpenSQLite(ctx, path)
	if err != nil {
		return 0, "", err
	}
	defer st.Close()
	seq, hash, err := st.ChainTip(ctx, chain)
	if err != nil {
		return 0, "", err
	}
	seq, hash = tunnelsign.VacantNext(seq, hash)
	return seq, hash, nil
}
