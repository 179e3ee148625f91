package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/envelopd/envelopd/internal/pgtest"
)

// TestInteropAgentMailEvents: the official AgentMail SDK's webhooks,
// websocket and Idempotency-Key against a real envelopd, webhook
// signatures checked by the svix package's own Webhook.verify
// (testdata/api/events.test.mjs, node's test runner).
func TestInteropAgentMailEvents(t *testing.T) { testAgentMailEvents(t, "") }

// TestInteropPostgresAgentMailEvents is TestInteropAgentMailEvents with
// the store on Postgres: the event log's cursor (websocket reconnect with
// last_event_id), webhook deliveries and Idempotency-Key from Postgres.
func TestInteropPostgresAgentMailEvents(t *testing.T) {
	interop(t, "node", "npm")
	testAgentMailEvents(t, pgtest.Schema(t))
}

func testAgentMailEvents(t *testing.T, db string) {
	interop(t, "node", "npm")
	dir := npmDir(t)
	for _, p := range []string{"agentmail", "svix"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", p, "package.json")); err != nil {
			t.Fatalf("%s is not installed in %s: %v", p, dir, err)
		}
	}
	srv := startAPIServerDB(t, db)
	script, _ := filepath.Abs("../../testdata/api/events.test.mjs")
	cmd := exec.Command("node", "--test", script)
	cmd.Env = append(os.Environ(), "ENVELOPD_API_URL="+srv.url, "ENVELOPD_API_KEY="+srv.key, "ENVELOPD_NPM_DIR="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test events.test.mjs: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "# pass 1") || !strings.Contains(string(out), "# fail 0") {
		t.Fatalf("node --test did not pass:\n%s", out)
	}
}
