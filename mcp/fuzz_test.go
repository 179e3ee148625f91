package mcp

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/envelopd/envelopd/parse"
)

// FuzzEnvelopayRequest: any type, body, note and text give a request or
// an error, never a panic; a request's JSON is found again in its text
// with the type asked for.
func FuzzEnvelopayRequest(f *testing.F) {
	f.Add("order", `{"task":{"description":"x"}}`, "note", "hello")
	f.Add("which", ``, "", "")
	f.Add("pay", `{"type":"pay","amount":"1"}`, "a\r\nb", "")
	f.Add("bogus", `[1]`, "", "x")
	f.Fuzz(func(t *testing.T, typ, body, note, text string) {
		sr, err := envelopayRequest(envelopayIn{Type: typ, Body: json.RawMessage(body), Note: note, Text: text}, "")
		if err != nil {
			return
		}
		if len(body) == 0 && strings.EqualFold(typ, "which") {
			return // bare WHICH: no JSON
		}
		j, err := parse.FindJSON([]byte(sr.Text))
		if err != nil || len(j) == 0 {
			t.Fatalf("no JSON in %q: %v", sr.Text, err)
		}
		var b struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(j, &b); err != nil || !strings.EqualFold(b.Type, strings.TrimSpace(typ)) {
			t.Fatalf("type %q in %s, want %q", b.Type, j, typ)
		}
	})
}
