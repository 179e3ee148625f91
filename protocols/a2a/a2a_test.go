package a2a

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/protocols/canonjson"
)

const dir = "../../testdata/protocols/a2a"

// TestValidate runs every NAME.json against NAME.want (exact codes and
// fields in order, and the summary).
func TestValidate(t *testing.T) {
	docs, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	if len(docs) < 30 {
		t.Fatalf("found %d vectors, want the whole corpus", len(docs))
	}
	for _, path := range docs {
		name := strings.TrimSuffix(path, ".json")
		t.Run(filepath.Base(name), func(t *testing.T) {
			doc, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			wb, err := os.ReadFile(name + ".want")
			if err != nil {
				t.Fatal(err)
			}
			var w struct {
				Errors []struct {
					Code  protocols.Code `json:"code"`
					Field string         `json:"field"`
				} `json:"errors"`
				Summary map[string]any `json:"summary"`
			}
			if err := json.Unmarshal(wb, &w); err != nil {
				t.Fatal(err)
			}
			r := Validate(doc)
			var got, exp []string
			for _, p := range r.Errors {
				got = append(got, string(p.Code)+"@"+p.Field)
			}
			for _, e := range w.Errors {
				exp = append(exp, string(e.Code)+"@"+e.Field)
			}
			if !reflect.DeepEqual(got, exp) {
				t.Errorf("errors = %v, want %v\n%v", got, exp, r.Errors)
			}
			if r.Protocol != "a2a" || r.Valid != (len(exp) == 0) {
				t.Errorf("Protocol %q Valid %v", r.Protocol, r.Valid)
			}
			// Round-trip the summary through JSON: counts are ints here.
			sb, _ := json.Marshal(r.Summary)
			var sum map[string]any
			_ = json.Unmarshal(sb, &sum)
			if !reflect.DeepEqual(sum, w.Summary) {
				t.Errorf("summary = %v, want %v", sum, w.Summary)
			}
		})
	}
}

func TestIsSend(t *testing.T) {
	for file, want := range map[string]bool{"valid_v03_message_send.json": true, "valid_v10_text.json": true, "bad_method.json": false, "missing_jsonrpc.json": false} {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		m, err := canonjson.ParseObject(b)
		if err != nil {
			t.Fatal(err)
		}
		if got := IsSend(m); got != want {
			t.Errorf("IsSend(%s) = %v", file, got)
		}
	}
}

func FuzzA2A(f *testing.F) {
	docs, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	for _, d := range docs {
		if b, err := os.ReadFile(d); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		r := Validate(doc)
		if r.Valid != (len(r.Errors) == 0) || r.Protocol != "a2a" {
			t.Fatalf("inconsistent report %+v", r)
		}
		for _, p := range r.Errors {
			if p.Code == "" || p.Message == "" {
				t.Fatalf("problem without code or message: %+v", p)
			}
		}
	})
}
