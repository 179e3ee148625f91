package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/envelopd/envelopd/api"
	"github.com/envelopd/envelopd/store"
)

// mcpDB makes a store with one API key scoped to bob@buyer.test.
func mcpDB(t *testing.T) (db, scopedKey string) {
	t.Helper()
	ctx := context.Background()
	db = filepath.Join(t.TempDir(), "mcp.db")
	st, err := store.OpenSQLite(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	key, k, err := api.NewKey([]string{"bob@buyer.test"}, "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateAPIKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	return db, key
}

// runMCPSession runs `envelopd mcp ARGS` in-process with its standard
// streams piped to the go-sdk's client, and returns the session and a
// function that ends it and returns the exit status.
func runMCPSession(t *testing.T, environ map[string]string, args ...string) (*sdk.ClientSession, func() int) {
	t.Helper()
	for k, v := range environ {
		t.Setenv(k, v)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var errb bytes.Buffer
	done := make(chan int, 1)
	go func() {
		code := run(context.Background(), &env{args: append([]string{"mcp"}, args...), stdin: inR, stdout: outW, stderr: &errb})
		outW.Close()
		done <- code
	}()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(),
		&sdk.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatalf("connect: %v (%s)", err, errb.String())
	}
	return cs, func() int {
		cs.Close()
		inW.Close()
		select {
		case code := <-done:
			if code != 0 {
				t.Logf("stderr: %s", errb.String())
			}
			return code
		case <-time.After(10 * time.Second):
			t.Fatal("envelopd mcp did not exit when its input closed")
			return -1
		}
	}
}

func listInboxes(t *testing.T, cs *sdk.ClientSession) []string {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "list_inboxes", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("list_inboxes: %v %+v", err, res)
	}
	b, _ := json.Marshal(res.StructuredContent)
	var l api.ListInboxes
	if err := json.Unmarshal(b, &l); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, i := range l.Inboxes {
		out = append(out, i.InboxID)
	}
	return out
}

// TestMCPStdio: envelopd mcp over stdio; without a key it sees every
// inbox, with one ($ENVELOPD_API_KEY or --key-file) only the key's; it
// exits 0 when the client closes its input.
func TestMCPStdio(t *testing.T) {
	db, key := mcpDB(t)
	cs, end := runMCPSession(t, map[string]string{mcpKeyEnv: ""}, "--db", db, "--relay", "--domain", "shop.test", "--domain", "buyer.test", "--sign-local")
	for _, u := range []string{"shop", "bob"} {
		res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "create_inbox", Arguments: map[string]any{"username": u,
			"domain": map[string]string{"shop": "shop.test", "bob": "buyer.test"}[u]}})
		if err != nil || res.IsError {
			t.Fatalf("create_inbox: %v %+v", err, res)
		}
	}
	if got := listInboxes(t, cs); strings.Join(got, ",") != "bob@buyer.test,shop@shop.test" {
		t.Fatalf("unscoped: %v", got)
	}
	if code := end(); code != 0 {
		t.Fatalf("exit %d", code)
	}

	cs, end = runMCPSession(t, map[string]string{mcpKeyEnv: key}, "--db", db, "--relay", "--domain", "shop.test")
	if got := listInboxes(t, cs); strings.Join(got, ",") != "bob@buyer.test" {
		t.Fatalf("scoped by $%s: %v", mcpKeyEnv, got)
	}
	end()
	kf := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(kf, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cs, end = runMCPSession(t, map[string]string{mcpKeyEnv: ""}, "--db", db, "--key-file", kf)
	if got := listInboxes(t, cs); strings.Join(got, ",") != "bob@buyer.test" {
		t.Fatalf("scoped by --key-file: %v", got)
	}
	end()
}

// TestMCPUsageErrors: a bad key, a missing store or bad flags exit 2
// before any session.
func TestMCPUsageErrors(t *testing.T) {
	db, key := mcpDB(t)
	loose := filepath.Join(t.TempDir(), "loose")
	if err := os.WriteFile(loose, []byte(key), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		env  string
		args []string
		want string
	}{
		{"ek_000000000000_" + strings.Repeat("A", 43), []string{"--db", db}, "API key: api: invalid API key"},
		{"", []string{"--db", filepath.Join(t.TempDir(), "none.db")}, "does not exist"},
		{"", []string{"--db", db, "--relay"}, "--relay needs at least one --domain"},
		{"", []string{"--db", db, "--sign-local"}, "--sign-local needs --relay"},
		{"", []string{"--db", db, "--key-file", loose}, "loose"},
		{"", []string{"--db", db, "extra"}, "unexpected argument"},
	} {
		t.Setenv(mcpKeyEnv, c.env)
		var out, errb bytes.Buffer
		code := run(context.Background(), &env{args: append([]string{"mcp"}, c.args...), stdin: strings.NewReader(""), stdout: &out, stderr: &errb})
		if code != 2 || out.Len() != 0 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q (want %q)", c.args, code, out.String(), errb.String(), c.want)
		}
	}
}
