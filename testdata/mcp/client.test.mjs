// Interop test: the official MCP TypeScript SDK (@modelcontextprotocol/sdk
// 1.32.2) against envelopd. TestInteropMCPClient starts `envelopd serve
// --relay --http` and sets ENVELOPD_BIN, ENVELOPD_DB, ENVELOPD_API_URL,
// ENVELOPD_API_KEY and ENVELOPD_NPM_DIR. Bob's agent launches `envelopd mcp`
// over stdio; the shop's agent connects to /mcp over streamable HTTP. They
// play WHICH → METHODS → ORDER → FULFILL → PAY; a replayed proof is refused
// naming duplicate_proof.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";

const require = createRequire(process.env.ENVELOPD_NPM_DIR + "/node_modules/");
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = require("@modelcontextprotocol/sdk/client/stdio.js");
const { StreamableHTTPClientTransport } = require("@modelcontextprotocol/sdk/client/streamableHttp.js");

const SHOP = "shop@shop.test";
const BOB = "bob@buyer.test";
const TOOLS = ["aicp_sign", "create_draft", "create_inbox", "create_list_entry", "delete_draft", "delete_inbox",
  "delete_list_entry", "delete_thread", "forward_message", "get_attachment", "get_draft", "get_draft_attachment", "get_inbox", "get_list_entry",
  "get_message", "get_raw", "get_thread", "label_message", "list_drafts", "list_inboxes", "list_list_entries",
  "list_messages", "list_threads", "reply", "reply_to_message", "search_inboxes", "search_messages", "search_threads",
  "send_draft", "send_envelopay", "send_message", "update_draft", "update_inbox", "update_message", "update_thread",
  "vacant_sign", "wait_for_message"];

// connect connects a client, its failure shown whole.
async function connect(client, transport) {
  try {
    await client.connect(transport);
  } catch (e) {
    throw new Error("connect: " + String(e?.stack ?? e));
  }
}

// call calls a tool that must succeed and returns its structured content.
async function call(client, name, args) {
  const r = await client.callTool({ name, arguments: args });
  assert.ok(!r.isError, `${name}: ${JSON.stringify(r.content)}`);
  assert.ok(r.structuredContent, `${name}: no structured content`);
  return r.structuredContent;
}

// wait waits for the next message of a type in an inbox.
async function wait(client, inbox, type, after) {
  const r = await call(client, "wait_for_message", { inbox_id: inbox, type, timeout_seconds: 60, ...after });
  assert.equal(r.timed_out, false, `${type} in ${inbox} timed out`);
  assert.equal(r.message.envelopay.type, type);
  return r;
}

test("Envelopay exchange through the MCP TypeScript SDK (stdio and streamable HTTP)", async () => {
  const bob = new Client({ name: "bob-agent", version: "1.0.0" });
  await connect(bob, new StdioClientTransport({
    command: process.env.ENVELOPD_BIN,
    args: ["mcp", "--db", process.env.ENVELOPD_DB, "--relay", "--domain", "shop.test", "--domain", "buyer.test", "--sign-local"],
    env: { ...process.env, ENVELOPD_API_KEY: process.env.ENVELOPD_API_KEY },
    stderr: "inherit",
  }));
  const shop = new Client({ name: "shop-agent", version: "1.0.0" });
  await connect(shop, new StreamableHTTPClientTransport(new URL(process.env.ENVELOPD_API_URL + "/mcp"), {
    requestInit: { headers: { Authorization: "Bearer " + process.env.ENVELOPD_API_KEY } },
  }));
  try {
    for (const c of [bob, shop]) {
      const { tools } = await c.listTools();
      assert.deepEqual(tools.map((t) => t.name).sort(), TOOLS);
      const send = tools.find((t) => t.name === "send_envelopay");
      assert.deepEqual(send.inputSchema.required.sort(), ["inbox_id", "to", "type"]);
      assert.equal(send.outputSchema.type, "object");
    }
    await call(shop, "create_inbox", { username: "shop", domain: "shop.test" });
    await call(bob, "create_inbox", { username: "bob", domain: "buyer.test" });
    const inboxes = await call(shop, "list_inboxes", {});
    assert.deepEqual(inboxes.inboxes.map((i) => i.inbox_id), [BOB, SHOP]);

    const which = await call(bob, "send_envelopay", { inbox_id: BOB, to: [SHOP], type: "which" });
    const w = await wait(shop, SHOP, "which", { cursor: 0 });
    assert.equal(w.message.thread_id, which.thread_id);
    await call(shop, "reply", { inbox_id: SHOP, message_id: w.message.message_id, type: "methods", note: "SOL accepted",
      body: { rails: [{ chain: "solana", token: "SOL", wallet: "6dL6n77jJFWq4bu3cQp57H8rMUPEXu7uYN1XApPxpUif", price: "500000000" }] } });
    const m = await wait(bob, BOB, "methods", { after_message_id: which.message_id });
    assert.equal(m.message.subject, "METHODS | SOL accepted");

    // ORDER, and the shop's reply waited for.
    const order = await call(bob, "reply", { inbox_id: BOB, message_id: m.message.message_id, type: "order",
      body: { id: "ord_ts", task: { description: "Review PR #417" } } });
    assert.equal(order.envelopay.status, "accepted");
    const o = await wait(shop, SHOP, "order", { cursor: w.cursor });
    await call(shop, "reply", { inbox_id: SHOP, message_id: o.message.message_id, type: "fulfill",
      body: { order_ref: "ord_ts", result: { summary: "Approved" } } });
    const f = await wait(bob, BOB, "fulfill", { after_message_id: order.message_id });
    assert.equal(f.message.envelopay.dkim[0].result, "pass");

    // PAY, then the same proof again: a tool error naming duplicate_proof.
    const pay = { amount: "500000000", token: "SOL", chain: "solana", proof: { tx: "5xQ7mcpts" } };
    await call(bob, "reply", { inbox_id: BOB, message_id: f.message.message_id, type: "pay", body: pay });
    const p = await wait(shop, SHOP, "pay", { cursor: o.cursor });
    assert.equal(p.message.envelopay.status, "accepted");
    const replay = await bob.callTool({ name: "reply", arguments: { inbox_id: BOB, message_id: f.message.message_id, type: "pay", body: pay } });
    assert.equal(replay.isError, true);
    const err = JSON.parse(replay.content[0].text);
    assert.equal(err.name, "ValidationError");
    assert.deepEqual(err.errors.map((e) => e.code), ["duplicate_proof"]);

    // The thread, from both sides.
    for (const [c, inbox] of [[bob, BOB], [shop, SHOP]]) {
      const t = await call(c, "get_thread", { inbox_id: inbox, thread_id: which.thread_id });
      assert.deepEqual(t.messages.map((x) => x.envelopay.type), ["which", "methods", "order", "fulfill", "pay"]);
    }
  } catch (e) {
    throw new Error(String(e?.stack ?? e) + " " + JSON.stringify(e));
  } finally {
    await bob.close();
    await shop.close();
  }
});
