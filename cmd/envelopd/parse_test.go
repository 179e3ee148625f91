package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/envelopd/envelopd/parse"
	"github.com/envelopd/envelopd/protocols"
)

const parseEML = "../../testdata/eml/"

func parseGolden(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(parseEML + name + ".golden.json")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseCommand(t *testing.T) {
	stdinMail, err := os.ReadFile(parseEML + "invoice.eml")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		args   []string
		stdin  []byte
		code   int
		stdout string // golden name, or "" for no output
		stderr string // substring
	}{
		{"valid", []string{"parse", parseEML + "pay-plain.eml"}, nil, 0, "pay-plain", ""},
		{"invalid", []string{"parse", parseEML + "invoice-missing-wallet.eml"}, nil, 1, "invoice-missing-wallet", ""},
		{"not envelopay", []string{"parse", parseEML + "re-prefix.eml"}, nil, 1, "re-prefix", ""},
		{"lenient flag first", []string{"parse", "--lenient", parseEML + "lenient-re-prefix.eml"}, nil, 0, "lenient-re-prefix", ""},
		{"lenient flag after file", []string{"parse", parseEML + "lenient-re-prefix.eml", "-lenient"}, nil, 0, "lenient-re-prefix", ""},
		{"stdin dash", []string{"parse", "-"}, stdinMail, 0, "invoice", ""},
		{"stdin implicit", []string{"parse"}, stdinMail, 0, "invoice", ""},
		{"two files", []string{"parse", parseEML + "pay-plain.eml", parseEML + "invoice.eml"}, nil, 2, "", "one message at a time"},
		{"missing file", []string{"parse", parseEML + "no-such-file.eml"}, nil, 2, "", "no such file"},
		{"unknown flag", []string{"parse", "--no-such-flag", "x"}, nil, 2, "", "flag provided but not defined"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(context.Background(), &env{args: c.args, stdin: bytes.NewReader(c.stdin), stdout: &out, stderr: &errb})
			if code != c.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, c.code, errb.String())
			}
			want := ""
			if c.stdout != "" {
				want = parseGolden(t, c.stdout)
			}
			if out.String() != want {
				t.Errorf("stdout:\n%s\nwant:\n%s", out.String(), want)
			}
			if !strings.Contains(errb.String(), c.stderr) || (c.stderr == "" && errb.Len() > 0) {
				t.Errorf("stderr %q, want it to contain %q", errb.String(), c.stderr)
			}
		})
	}
}

// TestParseHook shows how a later step (DKIM, tunnelled protocols) plugs
// into `envelopd parse`: a flag, an extra key, a problem that makes the
// message invalid.
func TestParseHook(t *testing.T) {
	hook := func(fs *flag.FlagSet) func(context.Context, []byte, *parse.Result, map[string]any) error {
		fail := fs.Bool("fail-dkim", false, "pretend DKIM failed")
		return func(_ context.Context, raw []byte, r *parse.Result, extra map[string]any) error {
			extra["dkim"] = map[string]any{"result": "fail", "bytes": len(raw)}
			if *fail {
				r.Errors = append(r.Errors, protocols.New(protocols.CodeDKIMFailed, "dkim", "bad signature"))
			}
			return nil
		}
	}
	var out, errb bytes.Buffer
	e := &env{args: []string{"--fail-dkim", parseEML + "pay-plain.eml"}, stdout: &out, stderr: &errb}
	if code := parseCommand(context.Background(), e, hook); code != 1 {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	var got struct {
		Valid  bool               `json:"valid"`
		Errors protocols.Problems `json:"errors"`
		DKIM   map[string]any     `json:"dkim"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Valid || !got.Errors.Has(protocols.CodeDKIMFailed) || got.DKIM["result"] != "fail" {
		t.Errorf("got %+v", got)
	}
	if !strings.HasSuffix(strings.TrimSpace(out.String()), "\"dkim\": {\n    \"bytes\": "+parseFileLen(t, parseEML+"pay-plain.eml")+",\n    \"result\": \"fail\"\n  }\n}") {
		t.Errorf("dkim is not the last key:\n%s", out.String())
	}
}

func parseFileLen(t *testing.T, file string) string {
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := json.Marshal(len(b))
	return string(n)
}

// TestParseUsage: the usage line is the synopsis in docs/json.md and names every
// flag `envelopd parse` registers.
func TestParseUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), &env{args: []string{"parse", "--help"}, stdin: strings.NewReader(""), stdout: &out, stderr: &errb}); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	line, _, _ := strings.Cut(out.String(), "\n")
	if line != "usage: "+parseSynopsis {
		t.Errorf("usage line %q", line)
	}
	for _, f := range []string{"--lenient", "--dkim-txt", "--aicp-key", "--now"} {
		if !strings.Contains(line, "["+f) {
			t.Errorf("usage line lacks %s: %q", f, line)
		}
	}
	readme, err := os.ReadFile("../../docs/json.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sect, _ := strings.Cut(string(readme), "## `envelopd parse`: the JSON contract\n\n<!-- doc: skip: synopsis -->\n```\n")
	if syn, _, _ := strings.Cut(sect, "\n"); syn != parseSynopsis {
		t.Errorf("docs/json.md synopsis %q, usage %q", syn, parseSynopsis)
	}
}
