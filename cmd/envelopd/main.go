// Command envelopd is an email-native mail processor for AI agents: it
// receives mail (SMTP or IMAP), verifies DKIM, parses Envelopay messages and
// the protocols tunnelled inside them, stores threads in SQLite, hands the
// result to the agent and sends replies.
//
// Usage: envelopd COMMAND [flags]. Run `envelopd help` for the list.
//
// Exit status: 0 success, 1 the input was processed but is not valid (or a
// check failed), 2 usage or I/O error.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// env is what a command may touch: its arguments and standard streams. Tests
// call commands through it without a process.
type env struct {
	args   []string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	// ready, when set, is told the listening address of a server command
	// once it accepts connections (tests use it).
	ready func(addr string)
}

// A command runs with a context cancelled on SIGINT/SIGTERM and returns the
// process exit status.
type command struct {
	summary string
	run     func(ctx context.Context, e *env) int
}

// The synopses of the commands made of verbs (verbCommand), printed when
// the verb is missing or its arguments are wrong.
const (
	keysUsage    = "usage: envelopd keys add PROTOCOL HANDLE KEY | envelopd keys list [PROTOCOL] [--json]"
	mailboxUsage = "usage: envelopd mailbox add ADDR --password-file F | envelopd mailbox list [--json]"
	apikeyUsage  = "usage: envelopd apikey create [--inbox ADDR]... [--name N] [--permissions P,…] [--json] | apikey list [--json] | apikey revoke ID"
	webhookUsage = "usage: envelopd webhook list [--json] | webhook disable ID | webhook delete ID"
)

func commands() map[string]command {
	return map[string]command{
		"parse":    {"parse one raw message and print the Envelopay result as JSON", runParse},
		"dkim":     {"DKIM keys, signing and verification (keygen, sign, verify)", runDKIM},
		"serve":    {"run the SMTP server and ingest mail into the store", runServe},
		"inbox":    {"list stored messages (table or --json lines)", runInbox},
		"thread":   {"print a whole thread as JSON", runThread},
		"watch":    {"stream new stored messages as JSON lines", runWatch},
		"poll":     {"poll IMAP mailboxes and ingest new mail", runPoll},
		"compose":  {"compose an Envelopay message and print it", runCompose},
		"send":     {"compose, queue and deliver an Envelopay message", runSend},
		"reply":    {"reply to a stored message", runReply},
		"queue":    {"list, retry or drop outbound queue entries", runQueue},
		"handoff":  {"list, retry or drop --exec/--webhook hand-offs", runHandoff},
		"payments": {"list received payments and their verification (--state S), check ID, collisions", runPayments},
		"keys":     {"manage tunnelled-protocol public keys (keys add, keys list)", verbCommand("keys", keysUsage, runKeys)},
		"mailbox":  {"relay-mode mailboxes (mailbox add ADDR --password-file F, mailbox list)", verbCommand("mailbox", mailboxUsage, runMailbox)},
		"aicp":     {"AICP helpers (aicp sign)", runAICP},
		"domain":   {"managed domains: the DNS records envelopd needs, checked (domain add DOMAIN, list, check, zone, delete)", runDomain},
		"apikey":   {"HTTP API keys (apikey create [--inbox ADDR]... [--permissions P,...], apikey list, apikey revoke ID)", verbCommand("apikey", apikeyUsage, runAPIKey)},
		"webhook":  {"HTTP API webhooks (webhook list [--json], webhook disable ID, webhook delete ID)", verbCommand("webhook", webhookUsage, runWebhook)},
		"vacant":   {"Vacant helpers (vacant sign)", runVacant},
		"mcp":      {"MCP server over stdio for model-driven agents (tools over the API's service)", runMCP},
		"version":  {"print the version, VCS revision and Go version (--json)", runVersion},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, &env{args: os.Args[1:], stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr})
	stop()
	os.Exit(code)
}

func run(ctx context.Context, e *env) int {
	cmds := commands()
	if len(e.args) == 0 {
		usage(e.stderr, cmds)
		return 2
	}
	name, args := e.args[0], e.args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		if len(args) == 0 {
			usage(e.stdout, cmds)
			return 0
		}
		// envelopd help COMMAND [VERB] is envelopd COMMAND [VERB] --help.
		name, args = args[0], append(args[1:len(args):len(args)], "--help")
	case "-version", "--version":
		name = "version"
	}
	c, ok := cmds[name]
	if !ok {
		fmt.Fprintf(e.stderr, "envelopd: unknown command %q\n", name)
		usage(e.stderr, cmds)
		return 2
	}
	sub := *e
	sub.args = args
	if asksHelp(args) {
		return runHelp(ctx, name, c, &sub)
	}
	return c.run(ctx, &sub)
}

func usage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "usage: envelopd COMMAND [flags]\n\ncommands:")
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintln(w, "\nenvelopd COMMAND -h prints a command's flags.")
}

// notYet is what a command that has not landed yet answers.
func notYet(name string) func(ctx context.Context, e *env) int {
	return func(ctx context.Context, e *env) int {
		fmt.Fprintf(e.stderr, "envelopd %s: not implemented yet\n", name)
		return 2
	}
}
