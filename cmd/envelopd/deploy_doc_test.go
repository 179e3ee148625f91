package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/envelopd/envelopd/authdns/dnstest"
	"github.com/envelopd/envelopd/domain"
	"github.com/envelopd/envelopd/store"
)

// docCommands returns the commands of a Markdown page's code blocks,
// continuation lines joined.
func docCommands(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	in, cur := false, ""
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "```") {
			in = !in
			continue
		}
		if !in {
			continue
		}
		l = strings.TrimSpace(l)
		if c, ok := strings.CutSuffix(l, `\`); ok {
			cur += c
			continue
		}
		out = append(out, cur+l)
		cur = ""
	}
	return out
}

// TestDeployDoc runs docs/deploy.md's commands — dkim keygen, domain add,
// domain check, and serve with the flags of its systemd drop-in — with
// temporary paths, loopback ports and an in-process DNS server serving
// the records domain add printed.
func TestDeployDoc(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fix := strings.NewReplacer("/etc/envelopd/", dir+"/", "/var/lib/envelopd/", dir+"/", "%d/", dir+"/",
		"smtp.provider.example:465", "127.0.0.1:1", "--http 127.0.0.1:8025", "--http 127.0.0.1:0")
	if err := os.WriteFile(filepath.Join(dir, "smtp-password"), []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var ran, serveFlags []string
	var dns *dnstest.Server
	db := filepath.Join(dir, "envelopd.db")
	for _, c := range docCommands(t, "../../docs/deploy.md") {
		args := strings.Fields(fix.Replace(c))
		for i, a := range args { // the shell's quotes
			args[i] = strings.Trim(a, `"`)
		}
		switch {
		case strings.HasPrefix(c, "envelopd dkim keygen"), strings.HasPrefix(c, "envelopd domain add"):
			if c2 := fix.Replace(c); strings.Contains(c2, `--spf "`) { // one quoted argument with spaces
				i := strings.Index(c2, `--spf "`)
				j := strings.Index(c2[i+7:], `"`) + i + 7
				args = append(strings.Fields(c2[:i]), append([]string{"--spf", c2[i+7 : j]}, strings.Fields(c2[j+1:])...)...)
			}
			out, code := cli(t, args[1:]...)
			if code != 0 || out == "" {
				t.Fatalf("%s: exit %d", c, code)
			}
			if args[1] == "domain" {
				st, err := store.OpenSQLite(context.Background(), db)
				if err != nil {
					t.Fatal(err)
				}
				d, err := (&domain.Service{Store: st}).Get(context.Background(), "agents.example.com")
				st.Close()
				if err != nil {
					t.Fatal(err)
				}
				if dns, err = dnstest.Start(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(dns.Close)
				dns.A("mx.example.com", "192.0.2.25")
				domain.Publish(dns, domain.Records(d.Name, d.Config), nil)
			}
			ran = append(ran, args[1]+" "+args[2])
		case strings.HasPrefix(c, "envelopd domain check"):
			if _, code := cli(t, append(args[1:], "--dns", dns.Addr())...); code != 0 {
				t.Errorf("%s: exit %d with every record published", c, code)
			}
			ran = append(ran, "domain check")
		case strings.HasPrefix(c, "ExecStart=/usr/local/bin/envelopd serve"):
			var flags []string
			for i := 2; i < len(args); i++ {
				if args[i] == "--smtp" || args[i] == "--db" {
					i++ // startServe's own
					continue
				}
				flags = append(flags, args[i])
			}
			serveFlags = flags // run last: it needs the key made below
		}
	}
	if serveFlags != nil {
		startServe(t, db, serveFlags...)
		ran = append(ran, "serve")
	}
	if strings.Join(ran, ",") != "dkim keygen,domain add,domain check,serve" {
		t.Errorf("ran %v: docs/deploy.md changed, update this test", ran)
	}
}
