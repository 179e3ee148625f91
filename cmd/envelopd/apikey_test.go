package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestAPIKeyCLI: create prints the key once (text and --json), list shows
// ids and scopes but never a secret, revoke marks it.
func TestAPIKeyCLI(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "k.db")
	key, _ := cli(t, "apikey", "create", "--db", db)
	key = strings.TrimSpace(key)
	if !strings.HasPrefix(key, "ek_") || len(key) != 3+12+1+43 {
		t.Fatalf("key %q", key)
	}
	out, _ := cli(t, "apikey", "create", "--db", db, "--inbox", "Shop@Shop.test", "--name", "shop", "--json")
	var created struct {
		Key     string   `json:"key"`
		ID      string   `json:"id"`
		Inboxes []string `json:"inboxes"`
		Name    string   `json:"name"`
	}
	if err := json.Unmarshal([]byte(out), &created); err != nil || !strings.HasPrefix(created.Key, "ek_"+created.ID+"_") ||
		len(created.Inboxes) != 1 || created.Inboxes[0] != "shop@shop.test" || created.Name != "shop" {
		t.Fatalf("create --json: %q %v", out, err)
	}
	// --permissions: the API's names, checked as the API checks them.
	out, _ = cli(t, "apikey", "create", "--db", db, "--permissions", "message_read, inbox_read", "--json")
	var limited struct {
		ID          string   `json:"id"`
		Permissions []string `json:"permissions"`
	}
	if err := json.Unmarshal([]byte(out), &limited); err != nil || strings.Join(limited.Permissions, ",") != "inbox_read,message_read" {
		t.Fatalf("create --permissions --json: %q %v", out, err)
	}
	if !strings.Contains(out, `"permissions":["inbox_read","message_read"]`) {
		t.Errorf("create --permissions --json: %s", out)
	}
	if out, _ := cli(t, "apikey", "list", "--db", db); !strings.Contains(out, "inbox_read,message_read") {
		t.Errorf("list shows no permissions:\n%s", out)
	}
	var perrb bytes.Buffer
	if code := run(context.Background(), &env{args: []string{"apikey", "create", "--permissions", "message_read,send_mail", "--db", db},
		stdin: strings.NewReader(""), stdout: &bytes.Buffer{}, stderr: &perrb}); code != 2 || !strings.Contains(perrb.String(), `unknown permission "send_mail"`) {
		t.Errorf("unknown permission: exit %d %s, want 2", code, perrb.String())
	}
	if _, code := cli(t, "apikey", "revoke", limited.ID, "--db", db); code != 0 {
		t.Errorf("revoke: exit %d", code)
	}
	list, _ := cli(t, "apikey", "list", "--json", "--db", db)
	if strings.Count(list, "\n") != 3 || strings.Contains(list, key[16:]) || strings.Contains(list, created.Key[16:]) {
		t.Errorf("list shows a secret or the wrong keys:\n%s", list)
	}
	if _, code := cli(t, "apikey", "revoke", created.Key, "--db", db); code != 0 {
		t.Errorf("revoke: exit %d", code)
	}
	list, _ = cli(t, "apikey", "list", "--db", db)
	if !strings.Contains(list, created.ID) || strings.Count(list, "-\n") != 1 || strings.Count(list, "Z\n") != 2 {
		t.Errorf("list after revoke:\n%s", list)
	}
	if _, code := cli(t, "apikey", "revoke", "000000000000", "--db", db); code != 1 {
		t.Errorf("revoke unknown: exit %d, want 1", code)
	}
	var errb bytes.Buffer
	if code := run(context.Background(), &env{args: []string{"apikey", "create", "--inbox", "not an address", "--db", db},
		stdin: strings.NewReader(""), stdout: &bytes.Buffer{}, stderr: &errb}); code != 2 || !strings.Contains(errb.String(), "not a bare address") {
		t.Errorf("bad --inbox: exit %d %s, want 2", code, errb.String())
	}
}
