package main

import (
	"bytes"
	"context"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestHelpExitsZero: -h, -help, --help and `help COMMAND` print the
// command's usage on standard output and exit 0 for every command and every
// verb, without running it: serve would otherwise listen, and
// inbox open envelopd.db. The command list is commands(), so a new command
// is covered by this test the day it is added.
func TestHelpExitsZero(t *testing.T) {
	t.Chdir(t.TempDir()) // nothing may create envelopd.db here
	cmds := commands()
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	type tc struct {
		args []string
		want string // in standard output
	}
	cases := []tc{
		{[]string{"-h"}, "usage: envelopd COMMAND"},
		{[]string{"--help"}, "usage: envelopd COMMAND"},
		{[]string{"help"}, "usage: envelopd COMMAND"},
	}
	for _, n := range names {
		cases = append(cases,
			tc{[]string{n, "-h"}, "usage"},
			tc{[]string{n, "-help"}, "usage"},
			tc{[]string{n, "--help"}, "usage"},
			tc{[]string{"help", n}, "usage"},
		)
		for _, v := range commandVerbs(n) {
			cases = append(cases,
				tc{[]string{n, v, "-h"}, "usage"},
				tc{[]string{n, v, "--flag-before-help", "-h"}, "usage"},
				tc{[]string{"help", n, v}, "usage"},
			)
		}
	}
	// Arguments and flags around -h are not acted on.
	cases = append(cases,
		tc{[]string{"serve", "--smtp", "127.0.0.1:0", "--help"}, "usage: envelopd serve [flags]\n"},
		tc{[]string{"reply", "12", "--type", "PAY", "-h"}, "usage: envelopd reply [flags] MESSAGE\n"},
		tc{[]string{"queue", "retry", "3", "-h"}, "usage: envelopd queue [flags] [retry ID | drop ID]\n"},
		tc{[]string{"inbox", "--db", "typo.db", "-h"}, "-db string"},
		tc{[]string{"send", "--to", "b@example.test", "--help"}, "flags:\n"},
	)
	for _, c := range cases {
		var out, errb bytes.Buffer
		code := run(context.Background(), &env{args: c.args, stdin: strings.NewReader(""), stdout: &out, stderr: &errb})
		if code != 0 || errb.Len() != 0 {
			t.Errorf("envelopd %s: exit %d, stderr %q, want 0 and none", strings.Join(c.args, " "), code, errb.String())
		}
		if !strings.Contains(strings.ToLower(out.String()), strings.ToLower(c.want)) {
			t.Errorf("envelopd %s: stdout %q lacks %q", strings.Join(c.args, " "), out.String(), c.want)
		}
	}
	if got, _ := filepath.Glob("*"); len(got) != 0 {
		t.Errorf("help created files: %v", got)
	}
}

// TestHelpErrors: help for what does not exist is a usage error (exit 2,
// on standard error), and a flag value after "--" is not a help request.
func TestHelpErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		err  string
	}{
		{nil, 2, "usage: envelopd COMMAND"},
		{[]string{"frobnicate", "-h"}, 2, `unknown command "frobnicate"`},
		{[]string{"help", "frobnicate"}, 2, `unknown command "frobnicate"`},
		{[]string{"keys", "frob", "-h"}, 2, `unknown subcommand "frob" (add, list)`},
		{[]string{"version", "--", "-h"}, 2, `unexpected argument "-h"`},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), &env{args: c.args, stdin: strings.NewReader(""), stdout: &out, stderr: &errb})
		if code != c.code || !strings.Contains(errb.String(), c.err) {
			t.Errorf("envelopd %s: exit %d, stderr %q; want %d and %q", strings.Join(c.args, " "), code, errb.String(), c.code, c.err)
		}
	}
}
