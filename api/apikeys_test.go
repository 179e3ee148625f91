package api_test

import (
	"strings"
	"testing"
)

type apiKeyObj struct {
	APIKeyID string `json:"api_key_id"`
	APIKey   string `json:"api_key"`
	Prefix   string `json:"prefix"`
	Name     string `json:"name"`
	InboxID  string `json:"inbox_id"`
}

// TestAPIKeysOverAPI: create shows the key once and it works; list
// never shows secrets; delete revokes at once; a scoped key manages
// keys of its inboxes only and never makes a wider one.
func TestAPIKeysOverAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.createInbox("a", "shop.test")
	e.createInbox("b", "shop.test")
	var k apiKeyObj
	if c := e.do(e.key, "POST", "/v0/api-keys", `{"name":"ci"}`, &k); c != 200 || !strings.HasPrefix(k.APIKey, "ek_"+k.APIKeyID+"_") || k.Prefix != "ek_"+k.APIKeyID || k.Name != "ci" {
		t.Fatalf("create: %d %+v", c, k)
	}
	if c := e.do(k.APIKey, "GET", "/v0/inboxes", nil, nil); c != 200 {
		t.Errorf("the new key: %d", c)
	}
	var ik apiKeyObj
	if c := e.do(e.key, "POST", "/v0/inboxes/a@shop.test/api-keys", `{}`, &ik); c != 200 || ik.InboxID != "a@shop.test" {
		t.Fatalf("inbox create: %d %+v", c, ik)
	}
	var l struct {
		Count   int         `json:"count"`
		APIKeys []apiKeyObj `json:"api_keys"`
	}
	if c := e.do(e.key, "GET", "/v0/api-keys", nil, &l); c != 200 || l.Count != 3 {
		t.Errorf("list: %d %+v", c, l)
	}
	for _, x := range l.APIKeys {
		if x.APIKey != "" {
			t.Errorf("list shows a secret: %+v", x)
		}
	}
	if e.do(e.key, "GET", "/v0/inboxes/a@shop.test/api-keys", nil, &l); l.Count != 1 || l.APIKeys[0].APIKeyID != ik.APIKeyID {
		t.Errorf("inbox list: %+v", l)
	}
	// The inbox key: its inbox's keys only; never a wider key.
	if c := e.do(ik.APIKey, "POST", "/v0/api-keys", `{}`, nil); c != 403 {
		t.Errorf("scoped key making an unscoped key: %d", c)
	}
	if c := e.do(ik.APIKey, "POST", "/v0/inboxes/b@shop.test/api-keys", `{}`, nil); c != 404 {
		t.Errorf("scoped key making a key for another inbox: %d", c)
	}
	if c := e.do(ik.APIKey, "DELETE", "/v0/api-keys/"+k.APIKeyID, nil, nil); c != 404 {
		t.Errorf("scoped key deleting an unscoped key: %d", c)
	}
	if c := e.do(e.key, "POST", "/v0/api-keys", `{"permissions":{"message_sent":true}}`, nil); c != 400 {
		t.Errorf("unknown permission: %d", c)
	}
	// Delete revokes.
	if c := e.do(e.key, "DELETE", "/v0/api-keys/"+k.APIKeyID, nil, nil); c != 204 {
		t.Fatalf("delete: %d", c)
	}
	if c := e.do(k.APIKey, "GET", "/v0/inboxes", nil, nil); c != 401 {
		t.Errorf("a deleted key still works: %d", c)
	}
	if c := e.do(e.key, "DELETE", "/v0/api-keys/"+k.APIKeyID, nil, nil); c != 404 {
		t.Errorf("second delete: %d", c)
	}
}
