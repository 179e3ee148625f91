package api_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/envelopd/envelopd/store"
)

// TestHandoffHold: a person holds and releases the hand-off of a message
// through the API with a key scoped to its inbox; a key scoped to another
// inbox is refused with 404, as for every message it may not see;
// nothing pending to hold is a 409.
func TestHandoffHold(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.createInbox("shop", "shop.test")
	e.createInbox("other", "shop.test")
	mid := "hold1@buyer.test"
	if _, err := e.st.Ingest(context.Background(), &store.Incoming{Direction: store.DirIn, Mailbox: "shop@shop.test",
		Raw: []byte("From: b@buyer.test\r\nTo: shop@shop.test\r\nMessage-ID: <" + mid + ">\r\n\r\nx\r\n"), MessageID: mid,
		Sender: "b@buyer.test", Recipients: []string{"shop@shop.test"}, Status: store.StatusAccepted,
		Handoff: []string{"exec"}, ReceivedAt: time.Unix(1700000000, 0)}); err != nil {
		t.Fatal(err)
	}
	e.messages(store.Filter{}, 1)
	shop := e.newKey([]string{"shop@shop.test"})
	other := e.newKey([]string{"other@shop.test"})
	base := "/v0/inboxes/shop@shop.test/messages/" + url.PathEscape("<"+mid+">")
	type answer struct {
		Name     string `json:"name"`
		Handoffs []struct {
			State  string `json:"state"`
			Held   bool   `json:"held"`
			HeldBy string `json:"held_by"`
		} `json:"handoffs"`
	}
	for _, c := range []struct {
		key, method, path string
		code              int
		name              string
		held              bool
	}{
		{other, "POST", base + "/hold", 404, "NotFoundError", false},
		{shop, "GET", base + "/handoffs", 200, "", false},
		{shop, "POST", base + "/hold", 200, "", true},
		{other, "POST", base + "/release", 404, "NotFoundError", false},
		{shop, "GET", base + "/handoffs", 200, "", true},
		{shop, "POST", base + "/release", 200, "", false},
		{shop, "POST", base + "/release", 409, "HandoffStateError", false},
		{other, "GET", base + "/handoffs", 404, "NotFoundError", false},
	} {
		var a answer
		if got := e.do(c.key, c.method, c.path, nil, &a); got != c.code || a.Name != c.name {
			t.Fatalf("%s %s: %d %+v, want %d %s", c.method, c.path, got, a, c.code, c.name)
		}
		if c.code == 200 && (len(a.Handoffs) != 1 || a.Handoffs[0].Held != c.held || a.Handoffs[0].State != "pending") {
			t.Fatalf("%s %s: %+v, want one pending hand-off, held %v", c.method, c.path, a, c.held)
		}
		if c.held && a.Handoffs[0].HeldBy != "person" {
			t.Fatalf("held by %q", a.Handoffs[0].HeldBy)
		}
	}
}
