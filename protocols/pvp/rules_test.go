package pvp

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// tableLines returns the fields of each non-comment line of a table file.
func tableLines(t *testing.T, name string) [][]string {
	t.Helper()
	f, err := os.Open(filepath.Join(vectorDir, name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out = append(out, strings.Fields(line))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatalf("%s is empty", name)
	}
	return out
}

func yes(t *testing.T, s string) bool {
	t.Helper()
	switch s {
	case "yes":
		return true
	case "no":
		return false
	}
	t.Fatalf("want yes or no, got %q", s)
	return false
}

func TestPrimitives(t *testing.T) {
	ps := Primitives()
	if len(ps) != 41 {
		t.Fatalf("%d primitives, want 41 (§4.3 table)", len(ps))
	}
	seen := map[string]bool{}
	for _, p := range ps {
		if seen[p] {
			t.Errorf("duplicate primitive %s", p)
		}
		seen[p] = true
		if !IsPrimitive(p) {
			t.Errorf("IsPrimitive(%q) = false", p)
		}
	}
	for _, p := range []string{"", "tool", "tool.outputs", "Session.create", "error.raise"} {
		if IsPrimitive(p) {
			t.Errorf("IsPrimitive(%q) = true", p)
		}
	}
	ps[0] = "changed"
	if Primitives()[0] != "session.create" {
		t.Error("Primitives returns the package's own array")
	}
}

// TestAllowed checks Allowed for every role and every primitive against
// roles.table, the §7.2 table as written in the spec.
func TestAllowed(t *testing.T) {
	var cols []string
	roleRows := map[string][]bool{}
	gatedBy := map[string]string{}
	for _, f := range tableLines(t, "roles.table") {
		switch f[0] {
		case "role":
			var row []bool
			for _, v := range f[2:] {
				row = append(row, yes(t, v))
			}
			roleRows[f[1]] = row
		case "column":
			cols = append(cols, f[1])
			for _, typ := range f[2:] {
				gatedBy[typ] = f[1]
			}
		default:
			t.Fatalf("roles.table: bad line %q", f)
		}
	}
	if len(roleRows) != 6 {
		t.Fatalf("%d roles in roles.table, want 6", len(roleRows))
	}
	for role, row := range roleRows {
		if len(row) != len(cols) {
			t.Fatalf("role %s has %d columns, want %d", role, len(row), len(cols))
		}
		for _, typ := range Primitives() {
			want := true
			if col, ok := gatedBy[typ]; ok {
				for i, c := range cols {
					if c == col {
						want = row[i]
					}
				}
			}
			if got := Allowed(role, typ); got != want {
				t.Errorf("Allowed(%q, %q) = %v, want %v", role, typ, got, want)
			}
		}
	}
	for _, typ := range []string{"prompt.submit", "heartbeat.pong"} {
		if Allowed("pilot", typ) {
			t.Errorf("Allowed(pilot, %s) = true for an unknown role", typ)
		}
	}
	if Allowed("admin", "prompt.delete") {
		t.Error("Allowed(admin, prompt.delete) = true for an unknown type")
	}
}

func TestPermitted(t *testing.T) {
	list := func(s string) []string {
		if s == "-" {
			return nil
		}
		return strings.Split(s, ",")
	}
	for _, f := range tableLines(t, "permitted.table") {
		if len(f) != 4 {
			t.Fatalf("permitted.table: bad line %q", f)
		}
		if got, want := Permitted(list(f[0]), list(f[1]), f[2]), yes(t, f[3]); got != want {
			t.Errorf("Permitted(%s, %s, %s) = %v, want %v", f[0], f[1], f[2], got, want)
		}
	}
}

func TestGateResolved(t *testing.T) {
	for _, f := range tableLines(t, "gates.table") {
		if len(f) != 6 {
			t.Fatalf("gates.table: bad line %q", f)
		}
		rule, err := strconv.Unquote(f[0])
		if err != nil {
			rule = f[0]
		}
		n := func(s string) int {
			i, err := strconv.Atoi(s)
			if err != nil {
				t.Fatalf("gates.table %q: %v", f, err)
			}
			return i
		}
		resolved, approved := GateResolved(rule, n(f[1]), n(f[2]), n(f[3]))
		if resolved != yes(t, f[4]) || approved != yes(t, f[5]) {
			t.Errorf("GateResolved(%q, %s, %s, %s) = %v, %v; want %s, %s", rule, f[1], f[2], f[3], resolved, approved, f[4], f[5])
		}
	}
}

func TestQuorumRule(t *testing.T) {
	for _, f := range tableLines(t, "quorum.table") {
		in, want, ok := strings.Cut(strings.Join(f, " "), "|")
		if !ok {
			t.Fatalf("quorum.table: bad line %q", f)
		}
		in, want = strings.TrimSpace(in), strings.TrimSpace(want)
		q, err := ParseQuorum([]byte(in))
		if msg, isErr := strings.CutPrefix(want, "error:"); isErr {
			if err == nil || !strings.Contains(err.Error(), strings.TrimSpace(msg)) {
				t.Errorf("ParseQuorum(%s) error = %v, want %q", in, err, msg)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseQuorum(%s): %v", in, err)
		} else if q.Rule() != want {
			t.Errorf("ParseQuorum(%s).Rule() = %q, want %q", in, q.Rule(), want)
		}
	}
}

func TestAckAllowed(t *testing.T) {
	for _, f := range tableLines(t, "acks.table") {
		if len(f) != 3 {
			t.Fatalf("acks.table: bad line %q", f)
		}
		if got, want := AckAllowed(f[0], f[1]), yes(t, f[2]); got != want {
			t.Errorf("AckAllowed(%q, %q) = %v, want %v", f[0], f[1], got, want)
		}
	}
}
