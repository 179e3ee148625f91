package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestParseCLICorpus runs `envelopd parse` with the DKIM and tunnelled-
// protocol flags over testdata/cli/parse: NAME.args holds the arguments
// (paths relative to the repository root), NAME.golden.json the exact
// output and NAME.exit the exit status. -update-cli rewrites the goldens.
func TestParseCLICorpus(t *testing.T) {
	t.Chdir("../..")
	cases, _ := filepath.Glob("testdata/cli/parse/*.args")
	if len(cases) == 0 {
		t.Fatal("no cases in testdata/cli/parse")
	}
	for _, c := range cases {
		name := strings.TrimSuffix(c, ".args")
		t.Run(filepath.Base(name), func(t *testing.T) {
			b, err := os.ReadFile(c)
			if err != nil {
				t.Fatal(err)
			}
			args := append([]string{"parse"}, strings.Fields(string(b))...)
			var out, errb bytes.Buffer
			code := run(context.Background(), &env{args: args, stdin: strings.NewReader(""), stdout: &out, stderr: &errb})
			if *updateCLI {
				os.WriteFile(name+".golden.json", out.Bytes(), 0o644)
				os.WriteFile(name+".exit", []byte(strconv.Itoa(code)+"\n"), 0o644)
				return
			}
			want, _ := os.ReadFile(name + ".golden.json")
			wantExit, _ := os.ReadFile(name + ".exit")
			if got := strconv.Itoa(code); got != strings.TrimSpace(string(wantExit)) {
				t.Errorf("exit %s, want %s (stderr %q)", got, strings.TrimSpace(string(wantExit)), errb.String())
			}
			if out.String() != string(want) {
				t.Errorf("stdout:\n%s\nwant:\n%s", out.String(), want)
			}
		})
	}
}

var updateCLI = flag.Bool("update-cli", false, "rewrite testdata/cli goldens")
