package a2a

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/envelopd/envelopd/protocols/internal/vectors"
)

const dir = "../../testdata/protocols/a2a"

// TestValidate runs every NAME.json against NAME.want (exact codes and
// fields in order, and the summary).
func TestValidate(t *testing.T) {
	vectors.Each(t, dir, 30, ".want", func(t *testing.T, doc, wb []byte) {
		var w struct {
			Errors  []vectors.Problem `json:"errors"`
			Summary map[string]any    `json:"summary"`
		}
		if err := json.Unmarshal(wb, &w); err != nil {
			t.Fatal(err)
		}
		r := Validate(doc)
		vectors.CheckErrors(t, r, w.Errors)
		if r.Protocol != "a2a" {
			t.Errorf("Protocol %q", r.Protocol)
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

func TestIsSend(t *testing.T) {
	vectors.Detects(t, dir, "IsSend", IsSend, map[string]bool{"valid_v03_message_send.json": true, "valid_v10_text.json": true, "bad_method.json": false, "missing_jsonrpc.json": false})
}

func FuzzA2A(f *testing.F) {
	for _, b := range vectors.Docs(f, dir) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		r := Validate(doc)
		if r.Valid != (len(r.Errors) == 0) || r.Protocol != "a2a" {
			t.Fatalf("inconsistent report %+v", r)
		}
		vectors.CheckProblems(t, r)
	})
}
