package parse

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"testing"

	"github.com/envelopd/envelopd/protocols"
)

// readJSONL decodes each non-empty line of a testdata file into a T.
func readJSONL[T any](t testing.TB, name string) []T {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var out []T
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var v T
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("%s:%d: %v", name, n, err)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		t.Fatalf("%s: no cases", name)
	}
	return out
}

func TestMessageIDList(t *testing.T) {
	for _, c := range readJSONL[struct {
		In  string   `json:"in"`
		Out []string `json:"out"`
	}](t, "testdata/msgids.jsonl") {
		if got := MessageIDList(c.In); !reflect.DeepEqual(got, c.Out) {
			t.Errorf("MessageIDList(%q) = %q, want %q", c.In, got, c.Out)
		}
		want := ""
		if len(c.Out) > 0 {
			want = c.Out[0]
		}
		if got := NormalizeMessageID(c.In); got != want {
			t.Errorf("NormalizeMessageID(%q) = %q, want %q", c.In, got, want)
		}
	}
}

func TestAddressList(t *testing.T) {
	for _, c := range readJSONL[struct {
		In  string   `json:"in"`
		Out []string `json:"out"`
		OK  bool     `json:"ok"`
	}](t, "testdata/addresses.jsonl") {
		got, ok := addressList([]byte(c.In))
		if !reflect.DeepEqual(got, c.Out) || ok != c.OK {
			t.Errorf("addressList(%q) = %q, %v; want %q, %v", c.In, got, ok, c.Out, c.OK)
		}
	}
}

func TestFindJSON(t *testing.T) {
	for _, c := range readJSONL[struct {
		Name string  `json:"name"`
		Text string  `json:"text"`
		JSON *string `json:"json"`
		Err  string  `json:"err"`
	}](t, "testdata/findjson.jsonl") {
		got, err := FindJSON([]byte(c.Text))
		code := ""
		if err != nil {
			var p protocols.Problem
			if !errors.As(err, &p) || p.Message == "" || p.Field != "body" {
				t.Errorf("%s: error %v", c.Name, err)
			}
			code = string(p.Code)
		}
		if code != c.Err {
			t.Errorf("%s: error %v, want code %q", c.Name, err, c.Err)
		}
		if (c.JSON == nil) != (got == nil) || (c.JSON != nil && string(got) != *c.JSON) {
			t.Errorf("%s: FindJSON = %q, want %v", c.Name, got, c.JSON)
		}
	}
}

func TestStripQuoted(t *testing.T) {
	for _, c := range readJSONL[struct {
		Name string `json:"name"`
		In   string `json:"in"`
		Out  string `json:"out"`
	}](t, "testdata/stripquoted.jsonl") {
		if got := string(stripQuoted([]byte(c.In))); got != c.Out {
			t.Errorf("%s: stripQuoted = %q, want %q", c.Name, got, c.Out)
		}
	}
}
