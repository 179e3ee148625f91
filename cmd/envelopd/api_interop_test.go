package main

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/envelopd/envelopd/internal/pgtest"
)

// apiServer is a real `envelopd serve --relay --sign-local --http`
// process with an API key.
type apiServer struct {
	url, key, db, bin string
}

// startAPIServer builds envelopd, creates a key and starts serve in relay
// mode (domains shop.test and buyer.test, local DKIM signing) with the
// HTTP API on a free port, read from its "http api" log line. prep, when
// given, fills the database before serve starts.
func startAPIServer(t *testing.T, prep ...func(db string)) apiServer {
	return startAPIServerDB(t, "", prep...)
}

// startAPIServerDB is startAPIServer on the store db names (a SQLite file
// in a temporary directory when ""; a postgres:// DSN for Postgres).
func startAPIServerDB(t *testing.T, db string, prep ...func(db string)) apiServer {
	t.Helper()
	return startAPIServerArgs(t, db, relayServeArgs, prep...)
}

// relayServeArgs are the arguments of startAPIServerDB's serve.
var relayServeArgs = []string{"--relay", "--domain", "shop.test", "--domain", "buyer.test", "--sign-local"}

// startSDKServer is startAPIServerDB with an MX host name, so that the
// SDKs' domain calls have one.
func startSDKServer(t *testing.T, db string) apiServer {
	t.Helper()
	return startAPIServerArgs(t, db, append(slices.Clone(relayServeArgs), "--hostname", "mx.shop.test"))
}

// startAPIServerArgs is startAPIServerDB with serve's arguments besides
// --db, --smtp and --http.
func startAPIServerArgs(t *testing.T, db string, args []string, prep ...func(db string)) apiServer {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "envelopd")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if db == "" {
		db = filepath.Join(dir, "envelopd.db")
	}
	out, err := exec.Command(bin, "apikey", "create", "--db", db).Output()
	if err != nil {
		t.Fatalf("apikey create: %v", err)
	}
	key := strings.TrimSpace(string(out))
	for _, p := range prep {
		p(db)
	}
	cmd := exec.Command(bin, append([]string{"serve", "--db", db, "--smtp", "127.0.0.1:0", "--http", "127.0.0.1:0"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		if err := cmd.Wait(); err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	addrc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			var l struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "http api" && !sent {
				addrc <- l.Addr
				sent = true
			}
			if testing.Verbose() {
				t.Log(sc.Text())
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	select {
	case a := <-addrc:
		return apiServer{url: "http://" + a, key: key, db: db, bin: bin}
	case <-time.After(60 * time.Second):
		t.Fatal("serve --http did not start")
	}
	return apiServer{}
}

// npmDir returns a directory with agentmail@0.5.27 and svix installed:
// $ENVELOPD_NPM_DIR (.ci/run installs them there), else a fresh npm
// install into a temporary directory.
func npmDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("ENVELOPD_NPM_DIR"); d != "" {
		return d
	}
	d := t.TempDir()
	cmd := exec.Command("npm", "install", "--no-audit", "--no-fund", "agentmail@0.5.27", "svix")
	cmd.Dir = d
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm install agentmail@0.5.27 svix: %v\n%s", err, out)
	}
	return d
}

// TestInteropAgentMailSDK: the official AgentMail TypeScript SDK,
// unchanged, plays an Envelopay exchange between two inboxes against a
// real envelopd (testdata/api/sdk.test.mjs, node's test runner).
func TestInteropAgentMailSDK(t *testing.T) { testAgentMailSDK(t, "") }

// TestInteropPostgresAgentMailSDK is TestInteropAgentMailSDK with the
// store on Postgres (websocket events and webhooks from its event log).
func TestInteropPostgresAgentMailSDK(t *testing.T) {
	interop(t, "node", "npm")
	testAgentMailSDK(t, pgtest.Schema(t))
}

func testAgentMailSDK(t *testing.T, db string) {
	interop(t, "node", "npm")
	dir := npmDir(t)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "agentmail", "package.json")); err != nil {
		t.Fatalf("agentmail is not installed in %s: %v", dir, err)
	}
	srv := startSDKServer(t, db)
	script, _ := filepath.Abs("../../testdata/api/sdk.test.mjs")
	cmd := exec.Command("node", "--test", script)
	cmd.Env = append(os.Environ(), "ENVELOPD_API_URL="+srv.url, "ENVELOPD_API_KEY="+srv.key, "ENVELOPD_NPM_DIR="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test sdk.test.mjs: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "# pass 1") || !strings.Contains(string(out), "# fail 0") {
		t.Fatalf("node --test did not pass:\n%s", out)
	}
}

// TestInteropPythonURLLib: the Envelopay reference shop's calls, made
// with Python's urllib.request (testdata/api/shop.py).
func TestInteropPythonURLLib(t *testing.T) {
	interop(t, "python3")
	srv := startAPIServer(t)
	script, _ := filepath.Abs("../../testdata/api/shop.py")
	cmd := exec.Command("python3", script)
	cmd.Env = append(os.Environ(), "ENVELOPD_API_URL="+srv.url, "ENVELOPD_API_KEY="+srv.key)
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("shop.py: %v\n%s", err, out)
	}
}

// TestInteropMCPClient: the official MCP TypeScript SDK plays an
// Envelopay exchange against a real envelopd: one agent launches
// `envelopd mcp` over stdio, the other connects to /mcp over streamable
// HTTP (testdata/mcp/client.test.mjs, node's test runner).
func TestInteropMCPClient(t *testing.T) { testMCPClient(t, "") }

// TestInteropPostgresMCPClient is TestInteropMCPClient with the store on
// Postgres (`envelopd mcp --db postgres://…` and /mcp of serve).
func TestInteropPostgresMCPClient(t *testing.T) {
	interop(t, "node", "npm")
	testMCPClient(t, pgtest.Schema(t))
}

func testMCPClient(t *testing.T, db string) {
	interop(t, "node", "npm")
	dir := os.Getenv("ENVELOPD_NPM_DIR")
	if dir == "" {
		dir = t.TempDir()
		cmd := exec.Command("npm", "install", "--no-audit", "--no-fund", "@modelcontextprotocol/sdk@1.32.2")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm install @modelcontextprotocol/sdk@1.32.2: %v\n%s", err, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk", "package.json")); err != nil {
		t.Fatalf("@modelcontextprotocol/sdk is not installed in %s: %v", dir, err)
	}
	srv := startAPIServerDB(t, db)
	script, _ := filepath.Abs("../../testdata/mcp/client.test.mjs")
	cmd := exec.Command("node", "--test", script)
	cmd.Env = append(os.Environ(), "ENVELOPD_API_URL="+srv.url, "ENVELOPD_API_KEY="+srv.key, "ENVELOPD_NPM_DIR="+dir,
		"ENVELOPD_BIN="+srv.bin, "ENVELOPD_DB="+srv.db)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test client.test.mjs: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "# pass 1") || !strings.Contains(string(out), "# fail 0") {
		t.Fatalf("node --test did not pass:\n%s", out)
	}
}

// pyVenv returns a Python venv holding agentmail 0.5.0, svix 2.0.0 and
// mcp 1.29.0 from the offline wheelhouse (../shared/interop/python):
// $ENVELOPD_PY_VENV (.ci/run makes it), else a fresh venv in a temporary
// directory made by the wheelhouse README's recipe.
func pyVenv(t *testing.T) string {
	t.Helper()
	interop(t, "python3")
	if d := os.Getenv("ENVELOPD_PY_VENV"); d != "" {
		return d
	}
	wheels, _ := filepath.Abs("../../../shared/interop/python") // beside the repository
	if _, err := os.Stat(wheels); err != nil {
		wheels = "/work/shared/interop/python"
	}
	if d := os.Getenv("ENVELOPD_PY_WHEELS"); d != "" {
		wheels = d
	}
	d := filepath.Join(t.TempDir(), "venv")
	for _, c := range [][]string{
		{"python3", "-m", "venv", "--system-site-packages", d},
		{filepath.Join(d, "bin", "pip"), "install", "-q", "--no-index", "--find-links", filepath.Join(wheels, "wheelhouse"),
			"-r", filepath.Join(wheels, "requirements.txt")},
	} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(c, " "), err, out)
		}
	}
	return d
}

// TestInteropAgentMailPythonSDK: AgentMail's official Python SDK
// (agentmail 0.5.0), unchanged and with strict response validation,
// calls every method envelopd serves once (testdata/api/sdk_test.py).
func TestInteropAgentMailPythonSDK(t *testing.T) { testAgentMailPythonSDK(t, "") }

// TestInteropPostgresAgentMailPythonSDK is TestInteropAgentMailPythonSDK
// with the store on Postgres.
func TestInteropPostgresAgentMailPythonSDK(t *testing.T) {
	interop(t, "python3")
	testAgentMailPythonSDK(t, pgtest.Schema(t))
}

func testAgentMailPythonSDK(t *testing.T, db string) {
	venv := pyVenv(t)
	srv := startSDKServer(t, db)
	script, _ := filepath.Abs("../../testdata/api/sdk_test.py")
	cmd := exec.Command(filepath.Join(venv, "bin", "python"), script)
	cmd.Env = append(os.Environ(), "ENVELOPD_API_URL="+srv.url, "ENVELOPD_API_KEY="+srv.key)
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("sdk_test.py: %v\n%s", err, out)
	}
}

// TestInteropMCPPythonClient: the official MCP Python SDK (mcp 1.29.0)
// over stdio (`envelopd mcp`) and streamable HTTP (/mcp) with
// AgentMail's tool names and arguments, output schemas checked
// (testdata/mcp/client_test.py).
func TestInteropMCPPythonClient(t *testing.T) {
	venv := pyVenv(t)
	srv := startAPIServer(t)
	script, _ := filepath.Abs("../../testdata/mcp/client_test.py")
	cmd := exec.Command(filepath.Join(venv, "bin", "python"), script)
	cmd.Env = append(os.Environ(), "ENVELOPD_API_URL="+srv.url, "ENVELOPD_API_KEY="+srv.key, "ENVELOPD_BIN="+srv.bin, "ENVELOPD_DB="+srv.db)
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("client_test.py: %v\n%s", err, out)
	}
}
