// Package vectors is test support shared by the protocol packages: it walks
// a testdata corpus of NAME.json documents and compares each report with
// what NAME.expect (key: value lines) or NAME.want (JSON) says of it. It is
// imported only from _test.go files.
package vectors

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/envelopd/envelopd/internal/conflines"
	"github.com/envelopd/envelopd/protocols"
)

// Expect is what a NAME.expect file says about a protocols.Report:
//
//	protocol: NAME
//	valid: false
//	error: CODE [FIELD]           (one per problem, any order)
//	summary.KEY: VALUE            (the whole summary, key by key)
//	claim: KIND "KEY" VALUE ON_SAME ON_CONFLICT   ("-" for an empty code)
type Expect struct {
	Protocol string
	Valid    bool
	Errors   []string
	Summary  map[string]string
	Claims   []string
	// ClaimCount, when not -1, is compared with the number of claims
	// instead of comparing Claims.
	ClaimCount int
	// Links, when not -1, is compared with the number of links.
	Links int
}

// NewExpect returns an Expect with an empty summary that compares the
// claims one by one and does not look at links.
func NewExpect() Expect {
	return Expect{Summary: map[string]string{}, ClaimCount: -1, Links: -1}
}

// Key applies one of the keys listed on Expect; known is false for any
// other key.
func (e *Expect) Key(k, v string) (known bool, err error) {
	switch {
	case k == "protocol":
		e.Protocol = v
	case k == "valid":
		e.Valid, err = strconv.ParseBool(v)
	case k == "error":
		e.Errors = append(e.Errors, strings.Join(strings.Fields(v), " "))
	case strings.HasPrefix(k, "summary."):
		e.Summary[strings.TrimPrefix(k, "summary.")] = v
	case k == "claim":
		e.Claims = append(e.Claims, v)
	default:
		return false, nil
	}
	return true, err
}

// ReadKeys calls set for every "key: value" line of path (blank lines and
// "#" comments skipped) and returns the keys it saw. A missing file, a line
// without a colon, a key set does not know and an error from set are fatal.
func ReadKeys(t testing.TB, path string, set func(k, v string) (known bool, err error)) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("every vector needs its .expect: %v", err)
	}
	seen := map[string]bool{}
	sc := conflines.New(bytes.NewReader(data))
	for sc.Scan() {
		n, line := sc.Line()
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			t.Fatalf("%s:%d: not key: value", path, n)
		}
		known, err := set(k, strings.TrimSpace(v))
		if err != nil {
			t.Fatalf("%s:%d: %v", path, n, err)
		}
		if !known {
			t.Fatalf("%s:%d: unknown key %q", path, n, k)
		}
		seen[k] = true
	}
	return seen
}

// ReadExpect reads a NAME.expect that holds only the keys of Expect; the
// valid: line is required.
func ReadExpect(t testing.TB, path string) Expect {
	t.Helper()
	e := NewExpect()
	if !ReadKeys(t, path, e.Key)["valid"] {
		t.Fatalf("%s: no valid: line", path)
	}
	return e
}

// Diff compares r with e and returns one line per difference, "" when they
// agree: protocol, valid, errors (a list, not nil; codes and fields as a
// set), the summary printed key by key, the claims (as a set, or their
// number) and the number of links.
func (e Expect) Diff(r protocols.Report) string {
	var b strings.Builder
	if r.Protocol != e.Protocol {
		fmt.Fprintf(&b, "protocol = %q, want %q\n", r.Protocol, e.Protocol)
	}
	if r.Valid != e.Valid {
		fmt.Fprintf(&b, "valid = %v, want %v\n", r.Valid, e.Valid)
	}
	if r.Errors == nil {
		fmt.Fprintf(&b, "errors is nil, want a list\n")
	}
	var errs []string
	for _, p := range r.Errors {
		errs = append(errs, strings.TrimSpace(string(p.Code)+" "+p.Field))
	}
	if !SameSet(errs, e.Errors) {
		fmt.Fprintf(&b, "errors = %q, want %q (%v)\n", errs, e.Errors, r.Errors)
	}
	sum := map[string]string{}
	for k, v := range r.Summary {
		sum[k] = fmt.Sprint(v)
	}
	if fmt.Sprint(sum) != fmt.Sprint(e.Summary) {
		fmt.Fprintf(&b, "summary = %v, want %v\n", sum, e.Summary)
	}
	if e.Links >= 0 && len(r.Links) != e.Links {
		fmt.Fprintf(&b, "%d links, want %d\n", len(r.Links), e.Links)
	}
	if e.ClaimCount >= 0 {
		if len(r.Claims) != e.ClaimCount {
			fmt.Fprintf(&b, "%d claims, want %d\n", len(r.Claims), e.ClaimCount)
		}
	} else {
		var claims []string
		for _, c := range r.Claims {
			claims = append(claims, fmt.Sprintf("%s %s %s %s %s", c.Kind, strconv.Quote(c.Key), c.Value, dash(c.OnSame), dash(c.OnConflict)))
		}
		if !SameSet(claims, e.Claims) {
			fmt.Fprintf(&b, "claims = %q, want %q\n", claims, e.Claims)
		}
	}
	return b.String()
}

func dash(c protocols.Code) string {
	if c == "" {
		return "-"
	}
	return string(c)
}

// SameSet reports whether a and b hold the same strings, as many times
// each, in any order.
func SameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
