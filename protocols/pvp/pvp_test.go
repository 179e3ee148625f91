package pvp

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/envelopd/envelopd/protocols"
)

const vectorDir = "../../testdata/protocols/pvp"

// TestVectors runs every NAME.json in testdata/protocols/pvp against its
// NAME.expect (see the README there for the format).
func TestVectors(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(vectorDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no vectors in %s", vectorDir)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		t.Run(name, func(t *testing.T) {
			doc, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			want := readExpect(t, strings.TrimSuffix(f, ".json")+".expect")
			got := Validate(doc)
			if diff := want.diff(got); diff != "" {
				t.Errorf("%s", diff)
			}
		})
	}
}

// expect is a NAME.expect file: "key: value" lines, "#" comments.
//
//	protocol: pvp
//	valid: false
//	error: CODE [FIELD]           (one per problem, any order)
//	summary.KEY: VALUE            (the whole summary, key by key)
//	claim: KIND "KEY" VALUE ON_SAME ON_CONFLICT   ("-" for an empty code)
type expect struct {
	protocol string
	valid    bool
	errors   []string
	summary  map[string]string
	claims   []string
}

func readExpect(t *testing.T, path string) expect {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("every vector needs its .expect: %v", err)
	}
	e := expect{summary: map[string]string{}}
	sawValid := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			t.Fatalf("%s:%d: not key: value", path, n)
		}
		v = strings.TrimSpace(v)
		switch {
		case k == "protocol":
			e.protocol = v
		case k == "valid":
			e.valid, err = strconv.ParseBool(v)
			if err != nil {
				t.Fatalf("%s:%d: %v", path, n, err)
			}
			sawValid = true
		case k == "error":
			e.errors = append(e.errors, strings.Join(strings.Fields(v), " "))
		case strings.HasPrefix(k, "summary."):
			e.summary[strings.TrimPrefix(k, "summary.")] = v
		case k == "claim":
			e.claims = append(e.claims, v)
		default:
			t.Fatalf("%s:%d: unknown key %q", path, n, k)
		}
	}
	if !sawValid {
		t.Fatalf("%s: no valid: line", path)
	}
	return e
}

func (e expect) diff(r protocols.Report) string {
	var b strings.Builder
	if r.Protocol != e.protocol {
		fmt.Fprintf(&b, "protocol = %q, want %q\n", r.Protocol, e.protocol)
	}
	if r.Valid != e.valid {
		fmt.Fprintf(&b, "valid = %v, want %v\n", r.Valid, e.valid)
	}
	if r.Errors == nil {
		fmt.Fprintf(&b, "errors is nil, want a list\n")
	}
	var got []string
	for _, p := range r.Errors {
		got = append(got, strings.TrimSpace(string(p.Code)+" "+p.Field))
		if p.Message == "" {
			fmt.Fprintf(&b, "problem %s has no message\n", p.Code)
		}
	}
	if !sameSet(got, e.errors) {
		fmt.Fprintf(&b, "errors = %q, want %q\n", got, e.errors)
	}
	gotSum := map[string]string{}
	for k, v := range r.Summary {
		gotSum[k] = fmt.Sprint(v)
	}
	if fmt.Sprint(gotSum) != fmt.Sprint(e.summary) {
		fmt.Fprintf(&b, "summary = %v, want %v\n", gotSum, e.summary)
	}
	var claims []string
	for _, c := range r.Claims {
		claims = append(claims, fmt.Sprintf("%s %s %s %s %s", c.Kind, strconv.Quote(c.Key), c.Value, dash(c.OnSame), dash(c.OnConflict)))
	}
	if !sameSet(claims, e.claims) {
		fmt.Fprintf(&b, "claims = %q, want %q\n", claims, e.claims)
	}
	return b.String()
}

func dash(c protocols.Code) string {
	if c == "" {
		return "-"
	}
	return string(c)
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	a = append([]string(nil), a...)
	b = append([]string(nil), b...)
	sort.Strings(a)
	sort.Strings(b)
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
