package parse

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/envelopd/envelopd/protocols"
)

// TestAttachmentJSON: every attachment entry carries protocol, valid,
// errors and summary, inspected or not.
func TestAttachmentJSON(t *testing.T) {
	vcp, no := "vcp", false
	for _, c := range []struct {
		name string
		a    Attachment
		want string
	}{
		{"not inspected", Attachment{Filename: "a.pdf", ContentType: "application/pdf", Size: 3, Data: []byte("pdf")},
			`{"filename":"a.pdf","content_type":"application/pdf","size":3,"protocol":null,"valid":true,"errors":[],"summary":null}`},
		{"plain json", Attachment{Filename: "d.json", ContentType: "application/json", Size: 2, Errors: protocols.Problems{}, Summary: map[string]any{}},
			`{"filename":"d.json","content_type":"application/json","size":2,"protocol":null,"valid":true,"errors":[],"summary":null}`},
		{"invalid", Attachment{Filename: "v.json", ContentType: "application/json", Size: 2, Protocol: &vcp, Valid: &no,
			Errors: protocols.Problems{{Code: "missing_field", Field: "id", Message: "no <id>"}}, Summary: map[string]any{"kind": "x"}},
			`{"filename":"v.json","content_type":"application/json","size":2,"protocol":"vcp","valid":false,"errors":[{"code":"missing_field","field":"id","message":"no <id>"}],"summary":{"kind":"x"}}`},
	} {
		var b bytes.Buffer // as Encode: no HTML escaping
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(c.a); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := strings.TrimSuffix(b.String(), "\n"); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}
