package doctest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/envelopd/envelopd/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// root is the repository's top directory, seen from this package.
const root = "../.."

// pages are the Markdown files whose blocks are the documentation.
func pages(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{filepath.Join(root, "README.md")}, files...)
}

// name is how a page is named in messages: its path in the repository.
func name(file string) string {
	rel, err := filepath.Rel(root, file)
	if err != nil {
		return file
	}
	return rel
}

var runnable = map[string]bool{"": true, "sh": true, "bash": true, "shell": true, "console": true, "python": true, "js": true, "go": true}

// TestDocsMarked: every block of README.md and docs/*.md has well-formed
// marks, is in a language the harness runs or is marked, an expected
// output follows a block that runs, every JSON block is JSON, and every
// relative link names a file (and heading) that exists. Fast, no network.
func TestDocsMarked(t *testing.T) {
	t.Parallel()
	for _, file := range pages(t) {
		src, blocks, err := ParseFile(file, name(file))
		if err != nil {
			t.Error(err)
			continue
		}
		for i, b := range blocks {
			switch {
			case b.Runs() && b.Lang == "json":
				// A config example: checked below, nothing to run.
			case b.Runs() && !runnable[b.Lang]:
				t.Errorf("%s: the harness cannot run ```%s: mark it <!-- doc: skip: REASON --> or <!-- doc: file NAME -->", b.Where(), b.Lang)
			case b.Output && (i == 0 || !blocks[i-1].Runs()):
				t.Errorf("%s: <!-- doc: output --> must follow a block that runs", b.Where())
			}
			if b.Lang == "json" || strings.HasSuffix(b.WriteTo, ".json") {
				if !json.Valid([]byte(strings.ReplaceAll(b.Text, "…", ""))) {
					t.Errorf("%s: not valid JSON", b.Where())
				}
			}
		}
		checkLinks(t, file, src)
	}
}

var linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// checkLinks reports relative links of file (outside code blocks) to
// files or headings that do not exist.
func checkLinks(t *testing.T, file string, src []byte) {
	t.Helper()
	text := stripBlocks(string(src))
	for _, m := range linkRE.FindAllStringSubmatchIndex(text, -1) {
		target := text[m[2]:m[3]]
		line := 1 + strings.Count(text[:m[0]], "\n")
		if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		path, anchor, _ := strings.Cut(target, "#")
		dest := file
		if path != "" {
			dest = filepath.Join(filepath.Dir(file), path)
			if _, err := os.Stat(dest); err != nil {
				t.Errorf("%s:%d: link %q: no file %s", name(file), line, target, name(dest))
				continue
			}
		}
		if anchor != "" && strings.HasSuffix(dest, ".md") {
			body, err := os.ReadFile(dest)
			if err != nil {
				t.Fatal(err)
			}
			if !headingSlugs(string(body))[anchor] {
				t.Errorf("%s:%d: link %q: no heading #%s in %s", name(file), line, target, anchor, name(dest))
			}
		}
	}
}

// stripBlocks blanks fenced code blocks' lines (keeping line numbers).
func stripBlocks(s string) string {
	lines := strings.Split(s, "\n")
	in := false
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimLeft(l, " \t"), "```") {
			in = !in
			lines[i] = ""
			continue
		}
		if in {
			lines[i] = ""
		}
	}
	return strings.Join(lines, "\n")
}

var slugDrop = regexp.MustCompile(`[^\p{L}\p{N} _-]`)

// headingSlugs returns the anchors GitHub gives the headings of a page.
func headingSlugs(s string) map[string]bool {
	slugs := map[string]bool{}
	for _, l := range strings.Split(stripBlocks(s), "\n") {
		if !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(l, "#"))
		slug := strings.ReplaceAll(slugDrop.ReplaceAllString(strings.ToLower(h), ""), " ", "-")
		for i := 0; ; i++ {
			s := slug
			if i > 0 {
				s = fmt.Sprintf("%s-%d", slug, i)
			}
			if !slugs[s] {
				slugs[s] = true
				break
			}
		}
	}
	return slugs
}

// TestParseMarks: the marks and their errors.
func TestParseMarks(t *testing.T) {
	t.Parallel()
	src := "x\n<!-- doc: skip: needs the internet; really -->\n```sh\ncurl x\n```\n" +
		"<!-- doc: exit 1; replace \"a; b\" \"c\" -->\n  ```\n  false\n  ```\n" +
		"<!-- doc: output -->\n````\nout\n````\n<!-- doc: file agent.sh -->\n```sh\n#!/bin/sh\n```\n"
	blocks, err := Parse("t.md", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 4 {
		t.Fatalf("%d blocks, want 4: %+v", len(blocks), blocks)
	}
	if b := blocks[0]; b.Skip != "needs the internet; really" || b.Runs() || b.Line != 3 || b.Lang != "sh" {
		t.Errorf("skip block: %+v", b)
	}
	if b := blocks[1]; b.Exit != 1 || len(b.Replace) != 1 || b.Replace[0] != [2]string{"a; b", "c"} || b.Text != "false\n" || !b.Runs() || b.Lang != "" {
		t.Errorf("exit/replace block: %+v", b)
	}
	if b := blocks[2]; !b.Output || b.Text != "out\n" {
		t.Errorf("output block: %+v", b)
	}
	if b := blocks[3]; b.WriteTo != "agent.sh" || b.Runs() {
		t.Errorf("file block: %+v", b)
	}
	for _, bad := range []string{
		"<!-- doc: skip -->\n```\n```\n",
		"<!-- doc: run -->\n```\n```\n",
		"<!-- doc: exit one -->\n```\n```\n",
		"<!-- doc: replace \"a\" -->\n```\n```\n",
		"<!-- doc: file a/b -->\n```\n```\n",
		"<!-- doc: output -->\ntext\n```\n```\n",
		"<!-- doc: output\n```\n```\n",
		"```\nnot closed\n",
	} {
		if _, err := Parse("t.md", []byte(bad)); err == nil || !strings.Contains(err.Error(), "t.md:") {
			t.Errorf("%q: %v, want an error naming t.md:LINE", bad, err)
		}
	}
}

// TestBackground: which lines start a server in the background.
func TestBackground(t *testing.T) {
	t.Parallel()
	for line, want := range map[string]bool{
		"envelopd serve &":                         true,
		"envelopd serve --db a.db &   # node 1":    true,
		"envelopd serve 2>serve.log & echo $! > f": true,
		"a && b":        false,
		"a 2>&1 | tail": false,
		"a &> log":      false,
		"echo '&'":      false,
	} {
		if got := backgroundRE.MatchString(line); got != want {
			t.Errorf("%q: background %v, want %v", line, got, want)
		}
	}
}

// TestOutputMatch: how an expected output is compared.
func TestOutputMatch(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		want, got string
		ok        bool
	}{
		{"a  b\n", "a b\n", true},
		{"ID  RECEIVED             STATUS\n1   2026-11-25 21:26:17  accepted  t_0e863521b3210c9c\n",
			"ID  RECEIVED             STATUS\n1   2027-01-02 03:04:05  accepted  t_aaaaaaaaaaaaaaaa\n", true},
		{"{\"id\":…}\n", "{\"id\":12}\n", true},
		{"1 accepted\n", "1 quarantined\n", false},
		{"a\n", "a\nb\n", false},
	} {
		if err := matchOutput(c.want, c.got); (err == nil) != c.ok {
			t.Errorf("want %q got %q: %v, want ok=%v", c.want, c.got, err, c.ok)
		}
	}
}

var (
	timeRE   = regexp.MustCompile(`\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:?\d\d)?`)
	threadRE = regexp.MustCompile(`\bt_[0-9a-f]{16}\b`)
	spaceRE  = regexp.MustCompile(`[ \t]+`)
)

// normalize makes a line comparable: runs of blanks are one space, and
// times and thread ids (which differ per run) are placeholders.
func normalize(l string) string {
	l = timeRE.ReplaceAllString(l, "<time>")
	l = threadRE.ReplaceAllString(l, "<thread>")
	return strings.TrimSpace(spaceRE.ReplaceAllString(l, " "))
}

// matchOutput compares an expected output (… matches any text in a line)
// with what was printed, line by line after normalize.
func matchOutput(want, got string) error {
	w := strings.Split(strings.TrimRight(want, "\n"), "\n")
	g := strings.Split(strings.TrimRight(got, "\n"), "\n")
	if len(w) != len(g) {
		return fmt.Errorf("printed %d lines, the doc shows %d", len(g), len(w))
	}
	for i := range w {
		parts := strings.Split(normalize(w[i]), "…")
		for j := range parts {
			parts[j] = regexp.QuoteMeta(parts[j])
		}
		if !regexp.MustCompile("^" + strings.Join(parts, ".*") + "$").MatchString(normalize(g[i])) {
			return fmt.Errorf("line %d: printed %q, the doc shows %q", i+1, g[i], w[i])
		}
	}
	return nil
}

// docPorts are the ports the docs use; each page runs with free ports in
// their place (the same within a page), so pages and other tests never
// collide.
var docPorts = regexp.MustCompile(`\b(2525|2526|2527|8025|8026|5587|1143)\b`)

// backgroundRE finds a command sent to the background: a lone & (not &&,
// >&, &>) ending a line or followed by the next command.
var backgroundRE = regexp.MustCompile(`(?m)(^|[^&>])&([ \t]*(#.*)?$|[ \t]+[^&\s])`)

// TestInteropDocs runs every runnable block of README.md and docs/*.md as
// written (docs/testing.md, "Docs that run"): the pages in parallel, each
// page's blocks in order in a fresh directory of its own, with the
// envelopd built from this clone first on PATH. A block that fails, a
// server that never listens or dies, an output that differs: each fails
// naming the page, line and block, with what it printed.
func TestInteropDocs(t *testing.T) {
	if os.Getenv("ENVELOPD_INTEROP") != "1" {
		t.Skip("runs the docs' blocks with real programs: set ENVELOPD_INTEROP=1 (.ci/run does)")
	}
	for _, p := range []string{"bash", "python3", "node", "curl", "psql", "createdb"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Fatalf("the docs' blocks need %s: %v (.ci/run installs it)", p, err)
		}
	}
	npm := os.Getenv("ENVELOPD_NPM_DIR")
	if _, err := os.Stat(filepath.Join(npm, "node_modules", "agentmail")); err != nil {
		t.Fatalf("ENVELOPD_NPM_DIR=%q has no node_modules/agentmail (.ci/run installs it): %v", npm, err)
	}
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "envelopd"), "./cmd/envelopd")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/envelopd: %v\n%s", err, out)
	}
	var pgOnce sync.Once
	var pgEnv []string
	var pgMu sync.Mutex // pages that use Postgres share its server: one at a time
	for _, file := range pages(t) {
		_, blocks, err := ParseFile(file, name(file))
		if err != nil {
			t.Fatal(err)
		}
		t.Run(name(file), func(t *testing.T) {
			t.Parallel()
			usesPG := false
			for _, b := range blocks {
				if b.Runs() && (strings.Contains(b.Text, "postgres") || strings.Contains(b.Text, "createdb")) {
					usesPG = true
				}
			}
			var extra []string
			if usesPG {
				pgOnce.Do(func() { pgEnv = postgresEnv(t) })
				if pgEnv == nil {
					t.Fatal("no Postgres for the page (see the first page that asked for it)")
				}
				pgMu.Lock()
				defer pgMu.Unlock()
				resetPostgres(t, pgEnv)
				extra = pgEnv
			}
			p := newPage(t, bin, npm, extra)
			defer p.stop()
			for i := range blocks {
				if i == 0 && name(file) == "README.md" {
					// The two set-up commands: a server in the foreground
					// (the next block starts it in the background) and
					// go test ./..., .ci/run's own first step.
					continue
				}
				if !p.run(&blocks[i]) {
					return
				}
			}
		})
	}
}

// postgresEnv returns the libpq variables of a Postgres server for the
// pages (pgtest's: ENVELOPD_PG_DSN's, or a throwaway one), as its
// superuser, and PGHOSTPORT (HOST:PORT) for placeholders.
func postgresEnv(t *testing.T) []string {
	u, err := url.Parse(pgtest.Server(t))
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"PGHOST=" + u.Hostname(), "PGPORT=" + u.Port(), "PGUSER=" + u.User.Username(), "PGHOSTPORT=" + u.Host, "PGDATABASE=postgres"}
	if pw, ok := u.User.Password(); ok {
		env = append(env, "PGPASSWORD="+pw)
	}
	return env
}

// resetPostgres drops what a page creates (the database and role
// "envelopd"), so that each page starts as on a fresh server.
func resetPostgres(t *testing.T, env []string) {
	cmd := exec.Command("psql", "-v", "ON_ERROR_STOP=1", "-q", "-c", "DROP DATABASE IF EXISTS envelopd WITH (FORCE)", "-c", "DROP ROLE IF EXISTS envelopd")
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("reset Postgres for the page (it creates the role and database envelopd: ENVELOPD_PG_DSN's role must be a superuser, or unset it for a throwaway server): %v\n%s", err, out)
	}
}

// page is the state of one page's run: its directory, environment (the
// variables its shell blocks set carry over), ports and background
// commands.
type page struct {
	t     *testing.T
	dir   string // where the blocks run
	logs  string // their outputs
	env   []string
	ports map[string]string // doc port → free port
	bg    []background
	last  string // the standard output of the last block run
	n     int
}

type background struct {
	pgid  int
	where string
	err   string // the file its standard error goes to
}

func newPage(t *testing.T, bin, npm string, extra []string) *page {
	p := &page{t: t, dir: t.TempDir(), logs: t.TempDir(), ports: map[string]string{}}
	if err := os.Symlink(filepath.Join(npm, "node_modules"), filepath.Join(p.dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "PATH", "HOME", "PWD", "OLDPWD":
			continue
		}
		p.env = append(p.env, kv)
	}
	p.env = append(p.env, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "HOME="+p.dir)
	p.env = append(p.env, extra...)
	return p
}

// text is b's content as run: placeholders replaced (NEW may name the
// page's variables, $PGHOSTPORT), `go run ./cmd/envelopd` is the built
// envelopd, and the docs' ports are the page's free ports.
func (p *page) text(b *Block) string {
	s := b.Text
	for _, r := range b.Replace {
		s = strings.ReplaceAll(s, r[0], os.Expand(r[1], p.getenv))
	}
	s = strings.ReplaceAll(s, "go run ./cmd/envelopd", "envelopd")
	return docPorts.ReplaceAllStringFunc(s, func(port string) string {
		if _, ok := p.ports[port]; !ok {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				p.t.Fatal(err)
			}
			p.ports[port] = strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
			l.Close()
		}
		return p.ports[port]
	})
}

func (p *page) getenv(k string) string {
	for i := len(p.env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(p.env[i], k+"="); ok {
			return v
		}
	}
	return ""
}

// run runs b (or writes it, or checks it as an output) and reports
// whether the page may go on.
func (p *page) run(b *Block) bool {
	t := p.t
	switch {
	case b.Skip != "":
		return true
	case b.WriteTo != "":
		mode := os.FileMode(0o600)
		if strings.HasPrefix(b.Text, "#!") {
			mode = 0o700
		}
		if err := os.WriteFile(filepath.Join(p.dir, b.WriteTo), []byte(p.text(b)), mode); err != nil {
			t.Fatal(err)
		}
		return true
	case b.Output:
		if err := matchOutput(b.Text, p.last); err != nil {
			t.Errorf("%s: the output shown is not what the block before printed: %v\n--- printed ---\n%s", b.Where(), err, p.last)
			return false
		}
		return true
	case b.Lang == "json":
		return true
	}
	text := p.text(b)
	if b.Lang == "go" {
		return p.goTest(b, text)
	}
	if lines := strings.Split(text, "\n"); b.Lang == "" || b.Lang == "console" {
		if strings.HasPrefix(lines[0], "$ ") {
			return p.transcript(b, lines)
		}
	}
	return p.exec(b, text, b.Exit)
}

// goStd are the standard packages a Go block may use by their name.
var goStd = map[string]string{"bytes": "bytes", "context": "context", "fmt": "fmt", "json": "encoding/json",
	"os": "os", "strings": "strings", "time": "time"}

var goCommentRE = regexp.MustCompile(`//.*`)
var goQualRE = regexp.MustCompile(`\b([a-z][a-z0-9]*)\.[A-Z]`)

// goTest runs a Go block as the body of a test (t is its *testing.T) in
// a module of its own that uses this clone: the packages it names
// (relaytest.Start, store.Message, json.Marshal) are imported, the
// clone's by their directory's name.
func (p *page) goTest(b *Block, text string) bool {
	t := p.t
	rootAbs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	ours := map[string]string{}
	filepath.WalkDir(rootAbs, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if n := d.Name(); n == "testdata" || strings.HasPrefix(n, ".") || n == "node_modules" {
			return filepath.SkipDir
		}
		if gos, _ := filepath.Glob(filepath.Join(path, "*.go")); len(gos) > 0 {
			rel, _ := filepath.Rel(rootAbs, path)
			ours[d.Name()] = "github.com/envelopd/envelopd/" + filepath.ToSlash(rel)
		}
		return nil
	})
	imports := map[string]bool{"testing": true}
	for _, m := range goQualRE.FindAllStringSubmatch(goCommentRE.ReplaceAllString(text, ""), -1) {
		if path, ok := ours[m[1]]; ok {
			imports[path] = true
		} else if path, ok := goStd[m[1]]; ok {
			imports[path] = true
		}
	}
	var src strings.Builder
	src.WriteString("package doctestrun\n\nimport (\n")
	for path := range imports {
		fmt.Fprintf(&src, "\t%q\n", path)
	}
	fmt.Fprintf(&src, ")\n\n// TestDocBlock is %s.\nfunc TestDocBlock(t *testing.T) {\n%s}\n", b.Where(), text)
	p.n++
	dir := filepath.Join(p.logs, fmt.Sprintf("go%d", p.n))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(rootAbs, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	mod := fmt.Sprintf("module doctestrun\n\ngo 1.26.0\n\nrequire github.com/envelopd/envelopd v0.0.0\n\nreplace github.com/envelopd/envelopd => %s\n", rootAbs)
	for name, data := range map[string]string{"go.mod": mod, "go.sum": string(sum), "doc_test.go": src.String()} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "test", "-count=1", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off")
	out, err := cmd.CombinedOutput()
	p.last = string(out)
	if err != nil {
		t.Errorf("%s: as the body of a Go test: %v\n--- ran ---\n%s\n--- go test ---\n%s", b.Where(), err, src.String(), tail(out))
		return false
	}
	return true
}

// transcript runs a block written as a terminal session: each "$ "
// line is a command, the lines after it its expected output.
func (p *page) transcript(b *Block, lines []string) bool {
	var cmd string
	var want []string
	flush := func() bool {
		if cmd == "" {
			return true
		}
		if !p.exec(b, cmd, 0) {
			return false
		}
		if len(want) > 0 {
			if err := matchOutput(strings.Join(want, "\n"), p.last); err != nil {
				p.t.Errorf("%s: $ %s: %v\n--- printed ---\n%s", b.Where(), cmd, err, p.last)
				return false
			}
		}
		cmd, want = "", nil
		return true
	}
	for _, l := range lines {
		if c, ok := strings.CutPrefix(l, "$ "); ok {
			if !flush() {
				return false
			}
			cmd = c
		} else if strings.TrimSpace(l) != "" {
			want = append(want, l)
		}
	}
	return flush()
}

// exec runs one script of b and checks its exit status, the servers it
// leaves in the background and the ones started before.
func (p *page) exec(b *Block, text string, wantExit int) bool {
	t := p.t
	p.n++
	base := filepath.Join(p.logs, fmt.Sprintf("block%d", p.n))
	envFile := base + ".env"
	var cmd *exec.Cmd
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	switch b.Lang {
	case "python":
		f := filepath.Join(p.dir, fmt.Sprintf("block%d.py", p.n))
		os.WriteFile(f, []byte(text), 0o600)
		cmd = exec.CommandContext(ctx, "python3", f)
	case "js":
		f := filepath.Join(p.dir, fmt.Sprintf("block%d.mjs", p.n))
		os.WriteFile(f, []byte(text), 0o600)
		cmd = exec.CommandContext(ctx, "node", f)
	default:
		script := "set -eu -o pipefail\nset -a\n" + text + "\nenv -0 > " + strconv.Quote(envFile) + "\n"
		cmd = exec.CommandContext(ctx, "bash", "-c", script)
	}
	cmd.Dir, cmd.Env = p.dir, p.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	outF, _ := os.Create(base + ".out")
	errF, _ := os.Create(base + ".err")
	cmd.Stdout, cmd.Stderr = outF, errF
	err := cmd.Run()
	outF.Close()
	errF.Close()
	out, _ := os.ReadFile(base + ".out")
	p.last = string(out)
	fail := func(why string) bool {
		stderr, _ := os.ReadFile(base + ".err")
		t.Errorf("%s: %s\n--- ran (after substitutions) ---\n%s\n--- stdout ---\n%s\n--- stderr ---\n%s",
			b.Where(), why, text, tail(out), tail(stderr))
		return false
	}
	code := 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			return fail(err.Error())
		}
		code = ee.ExitCode()
		if ctx.Err() != nil {
			return fail("still running after 3 minutes (a server left in the foreground? end its line with &)")
		}
	}
	if code != wantExit {
		return fail(fmt.Sprintf("exit status %d, want %d", code, wantExit))
	}
	if env, err := os.ReadFile(envFile); err == nil {
		p.env = p.env[:0]
		for _, kv := range strings.Split(string(env), "\x00") {
			k, _, _ := strings.Cut(kv, "=")
			if kv == "" || k == "_" || k == "SHLVL" || k == "PWD" || k == "OLDPWD" || strings.HasPrefix(k, "BASH") {
				continue
			}
			p.env = append(p.env, kv)
		}
	}
	if b.Lang != "python" && b.Lang != "js" && backgroundRE.MatchString(text) {
		bg := background{pgid: cmd.Process.Pid, where: b.Where(), err: base + ".err"}
		p.bg = append(p.bg, bg)
		for _, port := range uniq(docPortsIn(p, text)) {
			if !waitListen(port, bg, 60*time.Second) {
				return fail(fmt.Sprintf("what it started in the background never listened on 127.0.0.1:%s", port))
			}
		}
	}
	if strings.Contains(text, "kill") {
		// A block that stops a server: forget the ones that ended.
		live := p.bg[:0]
		for _, bg := range p.bg {
			if waitGone(bg, 5*time.Second) != nil {
				live = append(live, bg)
			}
		}
		p.bg = live
	}
	for _, bg := range p.bg {
		if !groupAlive(bg.pgid) {
			stderr, _ := os.ReadFile(bg.err)
			t.Errorf("%s: after it, the command %s started in the background has exited (a port taken? stop the first server, or give the second its own ports)\n--- its stderr ---\n%s",
				b.Where(), bg.where, tail(stderr))
			return false
		}
	}
	return true
}

// docPortsIn returns the page's free ports that text uses.
func docPortsIn(p *page, text string) []string {
	var ports []string
	for _, free := range p.ports {
		if regexp.MustCompile(`\b` + free + `\b`).MatchString(text) {
			ports = append(ports, free)
		}
	}
	return ports
}

func uniq(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// waitListen waits until something accepts connections on port, or bg
// has exited, or d has passed.
func waitListen(port string, bg background, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second)
		if err == nil {
			c.Close()
			return true
		}
		if !groupAlive(bg.pgid) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// waitGone waits up to d for bg's processes to end; nil when they have.
func waitGone(bg background, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		alive := groupAlive(bg.pgid)
		if !alive || time.Now().After(deadline) {
			if !alive {
				return nil
			}
			return errors.New("still running")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// groupAlive reports whether a process of group pgid runs (zombies do
// not count: an orphan's parent may never reap it). Linux's /proc.
func groupAlive(pgid int) bool {
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range dirs {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp …: comm may hold spaces, so cut at
		// its last ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(b[i+1:]))
		if len(fields) >= 3 && fields[2] == strconv.Itoa(pgid) && fields[0] != "Z" && fields[0] != "X" {
			return true
		}
	}
	return false
}

// stop ends the page's background commands: TERM, then KILL.
func (p *page) stop() {
	for _, bg := range p.bg {
		syscall.Kill(-bg.pgid, syscall.SIGTERM)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, bg := range p.bg {
		for groupAlive(bg.pgid) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		syscall.Kill(-bg.pgid, syscall.SIGKILL)
	}
}

// tail is the end of a long output.
func tail(b []byte) string {
	const max = 4000
	b = bytes.TrimRight(b, "\n")
	if len(b) > max {
		return "…" + string(b[len(b)-max:])
	}
	return string(b)
}
