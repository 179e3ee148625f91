package tunnel

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
	"time"

	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/protocols/aicp"
)

const vectorDir = "../../testdata/protocols/tunnel"

// TestVectors runs every NAME.json in testdata/protocols/tunnel through
// Inspect and MediaType, with the inputs and expectations of NAME.expect
// (format in the README there).
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
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			c := readCase(t, strings.TrimSuffix(f, ".json")+".expect")
			if !IsJSONPart(c.contentType, c.filename) {
				t.Errorf("IsJSONPart(%q, %q) = false for a test part", c.contentType, c.filename)
			}
			got := Inspect(data, c.contentType, c.filename, c.opts)
			if diff := c.diff(got); diff != "" {
				t.Error(diff)
			}
			if mt := MediaType(data); mt != c.mediaType {
				t.Errorf("MediaType = %q, want %q", mt, c.mediaType)
			}
		})
	}
}

type tcase struct {
	contentType, filename, mediaType string
	opts                             Options
	protocol                         string
	valid                            bool
	errors                           []string
	summary                          map[string]string
	claims                           []string
	claimCount                       int // from "claims: N"; -1 when the claims are listed
	links                            int // from "links: N"
}

func readCase(t *testing.T, path string) tcase {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("every vector needs its .expect: %v", err)
	}
	c := tcase{summary: map[string]string{}, claimCount: -1}
	seen := map[string]bool{}
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
		seen[k] = true
		switch {
		case k == "content-type":
			c.contentType = v
		case k == "filename":
			c.filename = v
		case k == "media-type":
			c.mediaType = v
		case k == "now":
			c.opts.Now, err = time.Parse(time.RFC3339, v)
		case k == "aicp-key":
			handle, key, _ := strings.Cut(v, " ")
			var raw []byte
			raw, err = aicp.ParseKey(key)
			if c.opts.AICPKeys == nil {
				c.opts.AICPKeys = map[string][]byte{}
			}
			c.opts.AICPKeys[handle] = raw
		case k == "protocol":
			c.protocol = v
		case k == "valid":
			c.valid, err = strconv.ParseBool(v)
		case k == "error":
			c.errors = append(c.errors, strings.Join(strings.Fields(v), " "))
		case strings.HasPrefix(k, "summary."):
			c.summary[strings.TrimPrefix(k, "summary.")] = v
		case k == "claim":
			c.claims = append(c.claims, v)
		case k == "claims":
			c.claimCount, err = strconv.Atoi(v)
		case k == "links":
			c.links, err = strconv.Atoi(v)
		default:
			t.Fatalf("%s:%d: unknown key %q", path, n, k)
		}
		if err != nil {
			t.Fatalf("%s:%d: %v", path, n, err)
		}
	}
	for _, k := range []string{"content-type", "media-type", "protocol", "valid"} {
		if !seen[k] {
			t.Fatalf("%s: no %s: line", path, k)
		}
	}
	return c
}

func (c tcase) diff(r protocols.Report) string {
	var b strings.Builder
	if r.Protocol != c.protocol {
		fmt.Fprintf(&b, "protocol = %q, want %q\n", r.Protocol, c.protocol)
	}
	if r.Valid != c.valid {
		fmt.Fprintf(&b, "valid = %v, want %v\n", r.Valid, c.valid)
	}
	if r.Errors == nil || r.Summary == nil {
		fmt.Fprintf(&b, "errors or summary is nil\n")
	}
	var errs []string
	for _, p := range r.Errors {
		errs = append(errs, strings.TrimSpace(string(p.Code)+" "+p.Field))
	}
	if !sameSet(errs, c.errors) {
		fmt.Fprintf(&b, "errors = %q, want %q (%v)\n", errs, c.errors, r.Errors)
	}
	sum := map[string]string{}
	for k, v := range r.Summary {
		sum[k] = fmt.Sprint(v)
	}
	if fmt.Sprint(sum) != fmt.Sprint(c.summary) {
		fmt.Fprintf(&b, "summary = %v, want %v\n", sum, c.summary)
	}
	if len(r.Links) != c.links {
		fmt.Fprintf(&b, "%d links, want %d\n", len(r.Links), c.links)
	}
	if c.claimCount >= 0 {
		if len(r.Claims) != c.claimCount {
			fmt.Fprintf(&b, "%d claims, want %d\n", len(r.Claims), c.claimCount)
		}
	} else {
		var claims []string
		for _, cl := range r.Claims {
			claims = append(claims, fmt.Sprintf("%s %s %s %s %s", cl.Kind, strconv.Quote(cl.Key), cl.Value, dash(cl.OnSame), dash(cl.OnConflict)))
		}
		if !sameSet(claims, c.claims) {
			fmt.Fprintf(&b, "claims = %q, want %q\n", claims, c.claims)
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

func TestIsJSONPart(t *testing.T) {
	f, err := os.Open(filepath.Join(vectorDir, "jsonpart.table"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cols := strings.Split(line, "|")
		if len(cols) != 3 {
			t.Fatalf("jsonpart.table: bad line %q", line)
		}
		for i := range cols {
			if cols[i] = strings.TrimSpace(cols[i]); cols[i] == "-" {
				cols[i] = ""
			}
		}
		want := cols[2] == "yes"
		if got := IsJSONPart(cols[0], cols[1]); got != want {
			t.Errorf("IsJSONPart(%q, %q) = %v, want %v", cols[0], cols[1], got, want)
		}
		rows++
	}
	if rows == 0 {
		t.Fatal("jsonpart.table has no rows")
	}
}
