"""Interop test: the official MCP Python SDK (mcp 1.29.0) against envelopd's
MCP server, over stdio (`envelopd mcp`) and streamable HTTP (/mcp of
`envelopd serve --http`). TestInteropMCPPythonClient sets ENVELOPD_BIN,
ENVELOPD_DB, ENVELOPD_API_URL and ENVELOPD_API_KEY. Bob's agent (stdio)
and the shop's agent (HTTP) use AgentMail's tool names and arguments:
the shop creates inboxes, Bob sends an order written the Envelopay
reference's way, the shop finds it by search and answers from a draft.
Every tool result's structured content is checked against the tool's
declared output schema (jsonschema). Prints "ok".
"""

import asyncio
import json
import os
import time

import jsonschema
import httpx
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

SHOP = "shop@shop.test"
BOB = "bob@buyer.test"

AGENTMAIL_TOOLS = {
    "list_inboxes", "get_inbox", "create_inbox", "update_inbox", "delete_inbox", "search_inboxes",
    "list_threads", "search_threads", "get_thread", "update_thread", "delete_thread", "get_attachment",
    "list_messages", "search_messages", "get_message", "send_message", "reply_to_message", "forward_message",
    "update_message", "create_draft", "list_drafts", "get_draft", "update_draft", "send_draft", "delete_draft",
    "list_list_entries", "get_list_entry", "create_list_entry", "delete_list_entry",
}


class Agent:
    def __init__(self, session):
        self.s = session
        self.schemas = {}

    async def init(self):
        await self.s.initialize()
        tools = (await self.s.list_tools()).tools
        self.schemas = {t.name: t.outputSchema for t in tools}
        missing = AGENTMAIL_TOOLS - set(self.schemas)
        assert not missing, f"missing tools: {missing}"
        for t in tools:
            assert t.description and t.inputSchema, t.name

    async def call(self, name, args):
        r = await self.s.call_tool(name, args)
        assert not r.isError, f"{name}: {r.content}"
        if self.schemas.get(name):
            jsonschema.validate(r.structuredContent, self.schemas[name])
        return r.structuredContent

    async def fails(self, name, args):
        r = await self.s.call_tool(name, args)
        assert r.isError, f"{name} did not fail: {r.structuredContent}"
        return json.loads(r.content[0].text)


async def wait_for(what, fn, tries=400):
    for _ in range(tries):
        v = await fn()
        if v:
            return v
        await asyncio.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


async def play(bob, shop):
    await shop.call("create_inbox", {"username": "shop", "domain": "shop.test", "displayName": "Shop"})
    await shop.call("create_inbox", {"username": "bob", "domain": "buyer.test"})
    assert (await bob.call("get_inbox", {"inboxId": SHOP}))["display_name"] == "Shop"
    assert (await bob.call("search_inboxes", {"q": "shop"}))["count"] == 1
    order = {"v": "0.2.0", "type": "order", "id": "ord_py", "task": {"description": "Translate a page"}}
    sent = await bob.call("send_message", {"inboxId": BOB, "to": [SHOP],
                                           "text": "ORDER | Translate a page\n" + json.dumps(order)})

    async def arrived():
        r = await shop.call("search_messages", {"inboxId": SHOP, "q": "translate"})
        return r["messages"][0] if r["count"] else None

    m = await wait_for("the order", arrived)
    assert m["subject"] == "ORDER | Translate a page", m["subject"]
    assert m["envelopay"]["type"] == "order" and m["envelopay"]["status"] == "accepted", m["envelopay"]
    full = await shop.call("get_message", {"inboxId": SHOP, "messageId": m["message_id"]})
    assert json.loads(full["text"].split("\n", 1)[1])["id"] == "ord_py"
    await shop.call("update_message", {"inboxId": SHOP, "messageId": m["message_id"], "addLabels": ["todo"]})
    # The answer from a draft: FULFILL written the reference's way.
    fulfill = {"v": "0.2.0", "type": "fulfill", "id": "ful_py", "order_ref": "ord_py", "result": {"summary": "done"}}
    d = await shop.call("create_draft", {"inboxId": SHOP, "to": [BOB], "inReplyTo": m["message_id"],
                                         "text": "FULFILL | done\n" + json.dumps(fulfill)})
    assert (await shop.call("list_drafts", {"inboxId": SHOP}))["count"] == 1
    await shop.call("update_draft", {"inboxId": SHOP, "draftId": d["draft_id"], "subject": "FULFILL | done"})
    await shop.call("send_draft", {"inboxId": SHOP, "draftId": d["draft_id"]})

    async def fulfilled():
        r = await bob.call("list_messages", {"inboxId": BOB, "labels": ["received"]})
        return [x for x in r["messages"] if x["envelopay"]["type"] == "fulfill"]

    f = (await wait_for("the fulfill", fulfilled))[0]
    assert f["thread_id"] == sent["thread_id"], (f["thread_id"], sent["thread_id"])
    t = await bob.call("get_thread", {"inboxId": BOB, "threadId": f["thread_id"]})
    assert [x["envelopay"]["type"] for x in t["messages"]] == ["order", "fulfill"], t
    assert (await bob.call("search_threads", {"inboxId": BOB, "q": "translate"}))["count"] == 1
    await bob.call("reply_to_message", {"inboxId": BOB, "messageId": f["message_id"], "text": "thanks"})
    # Lists: Bob blocks the shop's domain for sending; the send is refused.
    await bob.call("create_list_entry", {"inboxId": BOB, "direction": "send", "listType": "block", "entry": "shop.test"})
    e = await bob.fails("send_message", {"inboxId": BOB, "to": [SHOP], "text": "x"})
    assert e["name"] == "MessageRejectedError", e
    await bob.call("delete_list_entry", {"inboxId": BOB, "direction": "send", "listType": "block", "entry": "shop.test"})
    e = await shop.fails("create_draft", {"inboxId": SHOP, "sendAt": "2001-01-01T00:00:00Z"})
    assert e["name"] == "ValidationError", e


async def main():
    bin_, db = os.environ["ENVELOPD_BIN"], os.environ["ENVELOPD_DB"]
    url, key = os.environ["ENVELOPD_API_URL"], os.environ["ENVELOPD_API_KEY"]
    params = StdioServerParameters(command=bin_, args=["mcp", "--db", db, "--relay", "--domain", "shop.test",
                                                       "--domain", "buyer.test", "--sign-local"])
    async with stdio_client(params) as (r1, w1), ClientSession(r1, w1) as s1:
        async with httpx.AsyncClient(headers={"Authorization": "Bearer " + key}, timeout=60) as hc:
            async with streamable_http_client(url + "/mcp", http_client=hc) as (r2, w2, _), ClientSession(r2, w2) as s2:
                bob, shop = Agent(s1), Agent(s2)
                await bob.init()
                await shop.init()
                await play(bob, shop)
    print("ok")


if __name__ == "__main__":
    asyncio.run(main())
