package tunnel

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/envelopd/envelopd/protocols/aicp"
	"github.com/envelopd/envelopd/protocols/internal/vectors"
)

const vectorDir = "../../testdata/protocols/tunnel"

// TestVectors runs every NAME.json in testdata/protocols/tunnel through
// Inspect and MediaType, with the inputs and expectations of NAME.expect
// (format in the README there).
func TestVectors(t *testing.T) {
	for _, f := range vectors.Files(t, vectorDir, 1) {
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
			diff := c.Diff(got)
			if got.Summary == nil {
				diff += "summary is nil\n"
			}
			if diff != "" {
				t.Error(diff)
			}
			if mt := MediaType(data); mt != c.mediaType {
				t.Errorf("MediaType = %q, want %q", mt, c.mediaType)
			}
		})
	}
}

// tcase is a NAME.expect here: the keys of vectors.Expect, "claims: N"
// (instead of claim lines), "links: N" (0 when absent), and the inputs
// content-type, filename, now and aicp-key.
type tcase struct {
	vectors.Expect
	contentType, filename, mediaType string
	opts                             Options
}

func readCase(t *testing.T, path string) tcase {
	t.Helper()
	c := tcase{Expect: vectors.NewExpect()}
	c.Links = 0
	seen := vectors.ReadKeys(t, path, func(k, v string) (known bool, err error) {
		switch k {
		case "content-type":
			c.contentType = v
		case "filename":
			c.filename = v
		case "media-type":
			c.mediaType = v
		case "now":
			c.opts.Now, err = time.Parse(time.RFC3339, v)
		case "aicp-key":
			handle, key, _ := strings.Cut(v, " ")
			var raw []byte
			raw, err = aicp.ParseKey(key)
			if c.opts.AICPKeys == nil {
				c.opts.AICPKeys = map[string][]byte{}
			}
			c.opts.AICPKeys[handle] = raw
		case "claims":
			c.ClaimCount, err = strconv.Atoi(v)
		case "links":
			c.Links, err = strconv.Atoi(v)
		default:
			return c.Key(k, v)
		}
		return true, err
	})
	for _, k := range []string{"content-type", "media-type", "protocol", "valid"} {
		if !seen[k] {
			t.Fatalf("%s: no %s: line", path, k)
		}
	}
	return c
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
