package parse

import (
	"encoding/json"
	"testing"

	"github.com/envelopd/envelopd/protocols"
)

// TestRevalidateOOPS: a problem added after Parse (DKIM, attachments) makes
// the message invalid and gets the OOPS Parse itself would have built.
func TestRevalidateOOPS(t *testing.T) {
	raw := []byte("From: joe@example.com\r\nTo: suzie@example.net\r\nSubject: ORDER | Review\r\n\r\n" +
		`{"v":"0.2.0","type":"order","id":"ord_1","task":{"description":"Review"}}` + "\r\n")
	r := Parse(raw, Options{})
	if !r.Valid || r.OOPS != nil {
		t.Fatalf("before: valid %v oops %s errors %v", r.Valid, r.OOPS, r.Errors)
	}
	r.Errors = append(r.Errors, protocols.New(protocols.CodeDKIMFailed, "", "signature did not verify"))
	r.Revalidate(false)
	if r.Valid {
		t.Error("still valid")
	}
	var o struct {
		Type  string `json:"type"`
		Ref   string `json:"ref"`
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.OOPS, &o); err != nil {
		t.Fatalf("oops %s: %v", r.OOPS, err)
	}
	if o.Type != "oops" || o.Ref != "ord_1" || o.Error.Code != string(protocols.CodeDKIMFailed) {
		t.Errorf("oops %s", r.OOPS)
	}

	// Nothing added: unchanged (valid, no OOPS).
	r = Parse(raw, Options{})
	r.Revalidate(false)
	if !r.Valid || r.OOPS != nil {
		t.Errorf("untouched: valid %v oops %s", r.Valid, r.OOPS)
	}
}
