// Command envelopd-load measures SMTP ingest: it generates realistic,
// DKIM-signed Envelopay mails (all nine types of Envelopay v0.2.0, some
// carrying tunnelled VCP and PVP JSON attachments), drives a server with N
// concurrent sessions and reports msg/s and latency percentiles. It also
// runs the no-op baseline server (go-smtp reading DATA into io.Discard) and
// compares envelopd against it in the same run.
// budget measures, in the same run, the CPU per message of the no-op pair
// and of envelopd's own stages (DKIM, analysis, store) each alone, and
// prints the highest ratio those costs leave room for (see Budget).
//
// Usage:
//
//	envelopd-load run --addr HOST:PORT --sessions N --messages M [flags]
//	envelopd-load noop --addr HOST:PORT
//	envelopd-load compare --sessions 10 --messages 20000 [--smtp-source] [flags]
//	envelopd-load budget --sessions 10 --messages 20000 [--smtp-source] [flags]
//	envelopd-load hostile [--parts 100000] [--large-bytes 25165824] [--concurrent 40] [flags]
//	envelopd-load api --messages 1000000 --db FILE [--clients 10] [--sends 5000]
//	envelopd-load api-abuse [--strangers 100] [--dead-webhooks 20] [--requests 400] [--sends 100]
//
// Exit status: 0 success, 1 the load ran but some messages were not
// accepted (or a server failed), 2 usage or I/O error.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// env is what a command may touch: its arguments and standard streams.
type env struct {
	args           []string
	stdin          io.Reader
	stdout, stderr io.Writer
}

type command struct {
	summary string
	run     func(ctx context.Context, e *env) int
}

func commands() map[string]command {
	return map[string]command{
		"run":                 {"drive an SMTP server with generated DKIM-signed Envelopay mail", runLoad},
		"noop":                {"run the no-op baseline SMTP server (reads DATA, discards it)", runNoop},
		"compare":             {"run the same load against envelopd serve and the no-op server, print the ratio", runCompare},
		"budget":              {"measure the CPU per message of the no-op pair and of envelopd's stages, print the ratio they allow", runBudget},
		"hostile":             {"send the hostile mail shapes (docs/security.md) to a fresh envelopd serve each, print peak RSS and times", runHostile},
		"api":                 {"fill a store with N messages, print HTTP API list/get latencies and send throughput", runAPIBench},
		"api-abuse":           {"a valid key's p99 latency idle, under 100 unauthenticated clients and beside one tenant's dead webhooks", runAPIAbuse},
		"api-abuse-strangers": {"the unauthenticated clients of api-abuse --strangers-process (started by it)", runAPIAbuseStrangers},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := dispatch(ctx, &env{args: os.Args[1:], stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr})
	stop()
	os.Exit(code)
}

// newFlags is the flag set of the command name: it reports on e.stderr
// and does not exit.
func newFlags(e *env, name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	return fs
}

func dispatch(ctx context.Context, e *env) int {
	cmds := commands()
	if len(e.args) == 0 || e.args[0] == "help" || e.args[0] == "-h" || e.args[0] == "--help" {
		usage(e.stderr, cmds)
		if len(e.args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := cmds[e.args[0]]
	if !ok {
		fmt.Fprintf(e.stderr, "envelopd-load: unknown command %q\n", e.args[0])
		usage(e.stderr, cmds)
		return 2
	}
	sub := *e
	sub.args = e.args[1:]
	return c.run(ctx, &sub)
}

func usage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "usage: envelopd-load COMMAND [flags]\n\ncommands:")
	for _, n := range []string{"run", "noop", "compare", "budget", "hostile", "api"} {
		fmt.Fprintf(w, "  %-8s %s\n", n, cmds[n].summary)
	}
}
