package mcp_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/envelopd/envelopd/api"
	"github.com/envelopd/envelopd/mcp"
)

// TestToolPermissions: every tool names the API key permission it needs
// (one of the SDK's), and a key without it is refused with a
// ForbiddenError naming it, before the tool runs; a key holding it is
// served.
func TestToolPermissions(t *testing.T) {
	f := newFixture(t)
	tools, err := connect(t, f.cfg).ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools.Tools) < 30 {
		t.Fatalf("%d tools", len(tools.Tools))
	}
	for _, tl := range tools.Tools {
		if p := mcp.ToolPermission(tl.Name); !slices.Contains(api.Permissions, p) {
			t.Errorf("tool %s needs %q, not a permission of the SDKs", tl.Name, p)
		}
	}
	cfg := f.cfg
	cfg.Principal = &api.Principal{KeyID: "k", Permissions: []string{"inbox_read"}}
	cs := connect(t, cfg)
	if l := call[api.ListInboxes](t, cs, "list_inboxes", nil); l.Count != 0 {
		t.Errorf("list_inboxes: %+v", l)
	}
	for name, args := range map[string]map[string]any{
		"list_messages":     {"inbox_id": shop},
		"send_message":      {"inboxId": shop, "to": []string{bob}},
		"create_inbox":      {"username": "x"},
		"wait_for_message":  {"inbox_id": shop, "timeout_seconds": 1},
		"list_list_entries": {"inboxId": shop, "direction": "send", "listType": "block"},
	} {
		e := toolError(t, cs, name, args)
		if e.Name != "ForbiddenError" || !strings.Contains(e.Message, mcp.ToolPermission(name)) {
			t.Errorf("%s without %s: %+v", name, mcp.ToolPermission(name), e)
		}
	}
}
