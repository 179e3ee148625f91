package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/envelopd/envelopd/dkim"
	"github.com/envelopd/envelopd/message"
	"github.com/envelopd/envelopd/parse"
	"github.com/envelopd/envelopd/protocols/aicp"
	"github.com/envelopd/envelopd/protocols/tunnel"
)

// maxMessage bounds what `envelopd parse` reads (bytes).
const maxMessage = 64 << 20

// parseSynopsis is the usage line, as the synopsis in docs/json.md.
const parseSynopsis = "envelopd parse [--lenient] [--dkim-txt FILE] [--aicp-key HANDLE=KEY]… [--now RFC3339] [FILE|-]"

// runParse is `envelopd parse`: parse one raw message
// and print the Result as JSON (parse.Encode). Exit 0 when it is a valid
// Envelopay message, 1 when it is not (the JSON says why), 2 on usage or
// I/O errors.
func runParse(ctx context.Context, e *env) int {
	return parseCommand(ctx, e, dkimHook, tunnelHook)
}

// dkimHook adds --dkim-txt FILE: verify DKIM against the static key file
// and print the results as "dkim" (issue: DKIM, "envelopd parse --dkim-txt").
func dkimHook(fs *flag.FlagSet) func(context.Context, []byte, *parse.Result, map[string]any) error {
	path := fs.String("dkim-txt", "", "verify DKIM with this static key file (name TXT-value lines) and print \"dkim\"")
	return func(ctx context.Context, raw []byte, r *parse.Result, extra map[string]any) error {
		if *path == "" {
			return nil
		}
		res, err := dkim.LoadStaticResolver(*path)
		if err != nil {
			return err
		}
		extra["dkim"] = message.VerifyDKIM(ctx, &dkim.Verifier{Resolver: res}, raw, r)
		return nil
	}
}

// tunnelHook validates JSON attachments as VCP, AICP, Vacant, A2A or PVP;
// --aicp-key HANDLE=KEY supplies AICP public keys and --now the receipt
// time for timestamp windows.
func tunnelHook(fs *flag.FlagSet) func(context.Context, []byte, *parse.Result, map[string]any) error {
	var keys multiFlag
	fs.Var(&keys, "aicp-key", "AICP public key as HANDLE=BASE64 (raw 32 bytes or SPKI; repeatable)")
	now := fs.String("now", "", "receipt time for timestamp checks (RFC 3339; default: now)")
	return func(ctx context.Context, raw []byte, r *parse.Result, extra map[string]any) error {
		opts := tunnel.Options{AICPKeys: map[string][]byte{}}
		for _, kv := range keys {
			h, k, ok := strings.Cut(kv, "=")
			if !ok || h == "" {
				return fmt.Errorf("--aicp-key wants HANDLE=KEY, got %q", kv)
			}
			b, err := aicp.ParseKey(k)
			if err != nil {
				return fmt.Errorf("--aicp-key %s: %w", h, err)
			}
			opts.AICPKeys[h] = b
		}
		if *now != "" {
			t, err := time.Parse(time.RFC3339, *now)
			if err != nil {
				return fmt.Errorf("--now: %w", err)
			}
			opts.Now = t
		}
		lim, _ := extra["limits"].(parse.Limits) // parseCommand's flags
		message.InspectAttachmentsWithin(r, opts, lim)
		return nil
	}
}

// parseHook extends `envelopd parse`: it registers its flags on fs and
// returns a step run after parsing, which may add problems to r and keys to
// extra (printed after the Result's own keys). An error from the step is
// an exit-2 failure. After all steps, valid is recomputed as "errors is
// empty" and the OOPS from the final errors.
type parseHook func(fs *flag.FlagSet) func(ctx context.Context, raw []byte, r *parse.Result, extra map[string]any) error

func parseCommand(ctx context.Context, e *env, hooks ...parseHook) int {
	fs := flag.NewFlagSet("envelopd parse", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintln(e.stderr, "usage: "+parseSynopsis+"\n\nParse one raw RFC 5322 message (FILE, or standard input when FILE is - or absent)\nand print the Envelopay result as JSON. Exit 0 valid, 1 not valid, 2 usage or I/O error.\n\nflags:")
		fs.PrintDefaults()
	}
	lenient := fs.Bool("lenient", false, "accept the reference implementation's subjects: strip Re: (never Fwd:), keyword in any case")
	var limits parse.Limits
	registerLimits(fs, &limits)
	steps := make([]func(context.Context, []byte, *parse.Result, map[string]any) error, 0, len(hooks))
	for _, h := range hooks {
		steps = append(steps, h(fs))
	}
	args, err := parseArgs(fs, e.args)
	if err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if len(args) > 1 {
		fmt.Fprintf(e.stderr, "envelopd parse: one message at a time (got %d arguments)\n", len(args))
		fs.Usage()
		return 2
	}
	raw, err := readMessage(e, args)
	if err != nil {
		return failed(e, "parse", err)
	}
	r := parse.Parse(raw, parse.Options{Lenient: *lenient, Limits: limits})
	extra := map[string]any{"limits": limits}
	for _, step := range steps {
		if err := step(ctx, raw, r, extra); err != nil {
			return failed(e, "parse", err)
		}
	}
	delete(extra, "limits") // passed to the tunnel step, not printed
	// What is printed is O(the input), as what serve stores.
	limit := limits.OutputLimit(len(raw))
	extraSize := 0 // the steps' keys (dkim) are printed too
	if b, err := json.Marshal(extra); err == nil {
		extraSize = len(b)
	}
	r.Bound(limit - extraSize)
	// The steps may have added errors (dkim_failed, attachment problems):
	// valid and the OOPS follow them, as serve's courtesy OOPS does.
	r.Revalidate(*lenient)
	if err := parse.EncodeWithin(e.stdout, r, extra, limit); err != nil {
		fmt.Fprintf(e.stderr, "envelopd parse: writing the result: %v\n", err)
		return 2
	}
	if !r.Valid {
		return 1
	}
	return 0
}

func readMessage(e *env, args []string) ([]byte, error) {
	var r io.Reader = e.stdin
	name := "standard input"
	if len(args) == 1 && args[0] != "-" {
		f, err := os.Open(args[0])
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r, name = f, args[0]
	}
	raw, err := io.ReadAll(io.LimitReader(r, maxMessage+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if len(raw) > maxMessage {
		return nil, fmt.Errorf("%s is larger than %d bytes", name, maxMessage)
	}
	return raw, nil
}
