package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
)

// Help: -h, -help and --help ask any command for its
// usage, which goes to standard output with exit status 0 — never the
// flag package's exit 2 for flag.ErrHelp. It is handled here, once, for
// every command: run asks the command to parse just its verb and "-h" (so
// nothing else runs) and maps the flag.ErrHelp status to 0.

// asksHelp reports whether args ask for help: a -h, -help or --help before
// any "--" (after which everything is an argument).
func asksHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}

// commandVerbs lists the subcommands of the commands made of them; those
// print their usage when run without a verb.
func commandVerbs(name string) []string {
	switch name {
	case "dkim":
		return []string{"keygen", "sign", "verify"}
	case "keys", "mailbox":
		return []string{"add", "list"}
	case "aicp", "vacant":
		return []string{"sign"}
	}
	return nil
}

// commandArgs is the synopsis of a command's positional arguments, by the
// name given to newFlags ("" when it takes none).
func commandArgs(name string) string {
	switch name {
	case "reply", "thread":
		return "MESSAGE\n\nMESSAGE is a store row id, a Message-ID or an Envelopay id."
	case "queue":
		return "[retry ID | drop ID]"
	case "keys add":
		return "PROTOCOL HANDLE KEY"
	case "keys list":
		return "[PROTOCOL]"
	case "mailbox add":
		return "ADDR"
	}
	return ""
}

// printUsage is the usage newFlags gives every FlagSet: the synopsis, the
// command's summary and its flags.
func printUsage(fs *flag.FlagSet, name string) {
	w := fs.Output()
	syn, more, _ := strings.Cut(commandArgs(name), "\n\n")
	if syn != "" {
		syn = " " + syn
	}
	fmt.Fprintf(w, "usage: envelopd %s [flags]%s\n", name, syn)
	cmd, _, _ := strings.Cut(name, " ")
	if s := commands()[cmd].summary; s != "" {
		fmt.Fprintf(w, "\n%s\n", s)
	}
	if more != "" {
		fmt.Fprintf(w, "\n%s\n", more)
	}
	fmt.Fprintln(w, "\nflags:")
	fs.PrintDefaults()
}

// runHelp answers `envelopd NAME ... -h`: the command parses only its
// leading arguments (a verb, an id) and "-h", so it prints its usage and
// stops before doing anything. Output goes to standard output.
func runHelp(ctx context.Context, name string, c command, e *env) int {
	lead := e.args
	for i, a := range lead {
		if strings.HasPrefix(a, "-") {
			lead = lead[:i]
			break
		}
	}
	sub := *e
	sub.stderr = e.stdout
	if verbs := commandVerbs(name); verbs != nil {
		if len(lead) == 0 {
			sub.args = nil
			c.run(ctx, &sub)
			fmt.Fprintf(e.stdout, "\nverbs: %s (envelopd %s VERB -h shows a verb's flags)\n", strings.Join(verbs, ", "), name)
			return 0
		}
		known := false
		for _, v := range verbs {
			known = known || v == lead[0]
		}
		if !known {
			fmt.Fprintf(e.stderr, "envelopd %s: unknown subcommand %q (%s)\n", name, lead[0], strings.Join(verbs, ", "))
			return 2
		}
		lead = lead[:1]
	}
	sub.args = append(append([]string{}, lead...), "-h")
	if code := c.run(ctx, &sub); code != 2 {
		return code
	}
	return 0 // flag.ErrHelp
}
