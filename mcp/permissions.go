package mcp

// toolPermissions is the API key permission each tool needs (the
// permission of the API route doing the same; api.Permissions). A tool
// missing from it needs a permission no key holds ("undeclared"), so a
// key with permissions cannot call it; TestToolPermissions fails first.
var toolPermissions = map[string]string{
	"list_inboxes": "inbox_read", "search_inboxes": "inbox_read", "get_inbox": "inbox_read",
	"create_inbox": "inbox_create", "update_inbox": "inbox_update", "delete_inbox": "inbox_delete",

	"list_threads": "thread_read", "get_thread": "thread_read", "search_threads": "thread_read", "get_attachment": "thread_read",
	"update_thread": "message_update", "delete_thread": "thread_delete",

	"list_messages": "message_read", "get_message": "message_read", "get_raw": "message_read",
	"search_messages": "message_read", "wait_for_message": "message_read",
	"send_message": "message_send", "reply_to_message": "message_send", "forward_message": "message_send",
	"send_envelopay": "message_send", "reply": "message_send",
	// The signing tools make the claims an agent sends (aicp.md, vacant.md).
	"aicp_sign": "message_send", "vacant_sign": "message_send",
	"update_message": "message_update", "label_message": "message_update",

	"create_draft": "draft_create", "list_drafts": "draft_read", "get_draft": "draft_read",
	"get_draft_attachment": "draft_read", "update_draft": "draft_update", "send_draft": "draft_send",
	"delete_draft": "draft_delete",

	"list_list_entries": "list_entry_read", "get_list_entry": "list_entry_read",
	"create_list_entry": "list_entry_create", "delete_list_entry": "list_entry_delete",
}

// toolPermission is the permission tool name needs.
func toolPermission(name string) string {
	if p, ok := toolPermissions[name]; ok {
		return p
	}
	return "undeclared"
}
