// Interop test: events through the official AgentMail TypeScript SDK
// (agentmail@0.5.27), unchanged, against `envelopd serve --relay --http`
// (TestInteropAgentMailEvents starts the server and sets
// ENVELOPD_API_URL, ENVELOPD_API_KEY and ENVELOPD_NPM_DIR, where agentmail
// and svix are installed):
//   - webhooks made with client.webhooks, their deliveries verified with
//     the svix package's own Webhook.verify;
//   - the websocket (client.websockets.connect, sendSubscribe): events in
//     order, the same event ids as the webhook's, and a reconnect with
//     last_event_id that gets what it missed;
//   - Idempotency-Key (requestOptions.idempotencyKey): a resend answers
//     the first response and sends nothing; another body → 409;
//   - message.received.blocked and message.rejected (the inbox's lists),
//     and the inbox events (client.inboxes.events.list) of labels.
import { test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { createRequire } from "node:module";

const require = createRequire(process.env.ENVELOPD_NPM_DIR + "/node_modules/");
const { AgentMailClient, AgentMailError } = require("agentmail");
const { Webhook } = require("svix");

const base = process.env.ENVELOPD_API_URL;
const client = new AgentMailClient({
  apiKey: process.env.ENVELOPD_API_KEY,
  environment: { http: base, websockets: base.replace(/^http/, "ws") },
});
const SHOP = "shop@shop.test";
const BOB = "bob@buyer.test";

async function waitFor(what, fn) {
  for (let i = 0; i < 300; i++) {
    const v = await fn();
    if (v) return v;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error("timed out waiting for " + what);
}

// A webhook receiver: every POST is kept with its headers and raw body;
// the first one is answered 500 (envelopd retries it).
function receiver() {
  const hits = [];
  let failFirst = true;
  const srv = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      hits.push({ headers: req.headers, body: Buffer.concat(chunks).toString("utf8") });
      if (failFirst) {
        failFirst = false;
        res.writeHead(500).end();
        return;
      }
      res.writeHead(204).end();
    });
  });
  return new Promise((resolve) => srv.listen(0, "127.0.0.1", () => resolve({ srv, hits, url: `http://127.0.0.1:${srv.address().port}/hook` })));
}

// subscribe connects the SDK's websocket and resolves once subscribed;
// events collects what follows.
async function subscribe(sub, queryParams) {
  const events = [];
  const socket = await client.websockets.connect(queryParams ? { queryParams } : {});
  let subscribed;
  const ok = new Promise((r) => (subscribed = r));
  socket.on("message", (m) => {
    if (m.type === "subscribed") subscribed(m);
    else events.push(m);
  });
  socket.sendSubscribe({ type: "subscribe", ...sub });
  const s = await ok;
  return { socket, events, subscribed: s };
}

test("webhooks, websocket and Idempotency-Key through the AgentMail SDK", async () => {
  await client.inboxes.create({ username: "shop", domain: "shop.test" });
  await client.inboxes.create({ username: "bob", domain: "buyer.test" });

  // A webhook for the shop's inbox; the secret is shown once.
  const rcv = await receiver();
  const types = ["message.received", "message.sent", "message.delivered"];
  const hook = await client.webhooks.create({ url: rcv.url, eventTypes: types, inboxIds: [SHOP], clientId: "hook-1" });
  assert.match(hook.secret, /^whsec_[A-Za-z0-9+/=]+$/);
  assert.deepEqual(hook.inboxIds, [SHOP]);
  assert.equal((await client.webhooks.get(hook.webhookId)).url, rcv.url);
  assert.equal((await client.webhooks.list()).webhooks.length, 1);
  const again = await client.webhooks.create({ url: rcv.url, eventTypes: types, inboxIds: [SHOP], clientId: "hook-1" });
  assert.equal(again.webhookId, hook.webhookId);

  // The websocket, subscribed to the same.
  const ws = await subscribe({ inboxIds: [SHOP], eventTypes: types });
  assert.deepEqual(ws.subscribed.inboxIds, [SHOP]);

  // Bob writes, the shop answers (delivered locally by the relay).
  const which = await client.inboxes.messages.send(BOB, { to: SHOP, subject: "WHICH", text: "" });
  const got = await waitFor("message.received", () => ws.events.find((e) => e.eventType === "message.received"));
  assert.equal(got.message.inboxId, SHOP);
  assert.equal(got.message.messageId, which.messageId);
  assert.equal(got.thread.threadId, which.threadId);
  assert.ok(got.message.labels.includes("received"));
  assert.equal(got.message.envelopay.type, "which");
  const reply = await client.inboxes.messages.reply(SHOP, which.messageId, {
    text: JSON.stringify({ v: "0.2.0", type: "methods", id: "mth_1",
      rails: [{ chain: "solana", token: "SOL", wallet: "6dL6n77jJFWq4bu3cQp57H8rMUPEXu7uYN1XApPxpUif", price: "500000000" }] }),
  });
  await waitFor("three websocket events", () => ws.events.length >= 3);
  assert.deepEqual(ws.events.map((e) => e.eventType), types);
  assert.equal(ws.events[1].send.messageId, reply.messageId);
  assert.deepEqual(ws.events[1].send.recipients, [BOB]);
  assert.equal(ws.events[2].delivery.messageId, reply.messageId);
  assert.deepEqual(ws.events[2].delivery.recipients, [BOB]);
  const ids = ws.events.map((e) => e.eventId);
  const num = (id) => Number(id.replace(/^evt_/, ""));
  assert.ok(num(ids[0]) < num(ids[1]) && num(ids[1]) < num(ids[2]), ids.join(" "));

  // The webhook got the same three events (the first attempt failed and
  // was retried), each verified by svix itself.
  const wh = new Webhook(hook.secret);
  const delivered = await waitFor("webhook deliveries", () => {
    const ok = new Map();
    for (const h of rcv.hits) {
      const ev = wh.verify(h.body, { "svix-id": h.headers["svix-id"], "svix-timestamp": h.headers["svix-timestamp"], "svix-signature": h.headers["svix-signature"] });
      ok.set(ev.event_id, ev);
    }
    return ok.size >= 3 && rcv.hits.length >= 4 ? ok : null; // the first attempt failed
  });
  assert.deepEqual([...delivered.keys()].sort((a, b) => num(a) - num(b)), ids);
  assert.equal(delivered.get(ids[0]).message.message_id, which.messageId);
  assert.ok(rcv.hits.length >= 4, "the failed first attempt was retried");
  // A tampered body does not verify.
  assert.throws(() => wh.verify(rcv.hits[0].body + " ", {
    "svix-id": rcv.hits[0].headers["svix-id"], "svix-timestamp": rcv.hits[0].headers["svix-timestamp"], "svix-signature": rcv.hits[0].headers["svix-signature"] }));

  // Away and back: a reconnect with the last event id gets what it missed.
  ws.socket.close();
  const missed = await client.inboxes.messages.send(BOB, { to: SHOP, subject: "missed", text: "while away" });
  await waitFor("the missed message stored", async () => (await client.inboxes.messages.list(SHOP, { labels: ["received"] })).count >= 2);
  const back = await subscribe({ inboxIds: [SHOP], eventTypes: ["message.received"] }, { last_event_id: ids[2] });
  const m = await waitFor("the missed event", () => back.events[0]);
  assert.equal(m.eventType, "message.received");
  assert.equal(m.message.messageId, missed.messageId);
  back.socket.close();

  // Idempotency-Key: the same request answers the first response and
  // queues nothing new; another body with the key → 409.
  const req = { to: SHOP, subject: "once", text: "exactly once" };
  const a = await client.inboxes.messages.send(BOB, req, { idempotencyKey: "order-42" });
  const b = await client.inboxes.messages.send(BOB, req, { idempotencyKey: "order-42" });
  assert.equal(b.messageId, a.messageId);
  await assert.rejects(client.inboxes.messages.send(BOB, { ...req, text: "changed" }, { idempotencyKey: "order-42" }),
    (err) => err instanceof AgentMailError && err.statusCode === 409);
  const onceCopies = await waitFor("the once message", async () => {
    const l = await client.inboxes.messages.list(SHOP, { labels: ["received"], limit: 100 });
    return l.messages.some((x) => x.subject === "once") ? l.messages.filter((x) => x.subject === "once") : null;
  });
  assert.equal(onceCopies.length, 1);

  // The variants: mail from a sender the shop's receive lists block is
  // message.received.blocked (the message labelled blocked); a send the
  // shop's send lists refuse is message.rejected, with its Reject.
  const v = await subscribe({ inboxIds: [SHOP] });
  await client.inboxes.lists.create(SHOP, "receive", "block", { entry: "buyer.test" });
  await client.inboxes.lists.create(SHOP, "send", "block", { entry: "evil.test" });
  const spam = await client.inboxes.messages.send(BOB, { to: SHOP, subject: "blocked", text: "from a blocked domain" });
  await assert.rejects(client.inboxes.messages.send(SHOP, { to: "x@evil.test", subject: "no", text: "refused" }),
    (err) => err instanceof AgentMailError && err.statusCode === 403);
  const blocked = await waitFor("message.received.blocked", () => v.events.find((e) => e.eventType === "message.received.blocked"));
  assert.equal(blocked.message.messageId, spam.messageId);
  assert.ok(blocked.message.labels.includes("blocked"));
  assert.equal(blocked.thread.threadId, spam.threadId);
  const rejected = await waitFor("message.rejected", () => v.events.find((e) => e.eventType === "message.rejected"));
  assert.equal(rejected.reject.inboxId, SHOP);
  assert.match(rejected.reject.reason, /evil\.test/);
  assert.match(rejected.reject.messageId, /@shop\.test>$/);
  assert.ok(rejected.reject.threadId && rejected.reject.timestamp instanceof Date);
  assert.ok(!v.events.some((e) => e.eventType === "message.received"));
  v.socket.close();

  // Inbox events: the labels added and removed through the API.
  await client.inboxes.messages.update(SHOP, spam.messageId, { addLabels: ["vip"] });
  await client.inboxes.messages.update(SHOP, spam.messageId, { removeLabels: ["vip"] });
  const ie = await client.inboxes.events.list(SHOP, { limit: 10 });
  assert.equal(ie.count, 2);
  assert.deepEqual(ie.events.map((e) => e.eventType + " " + e.label), ["label.removed vip", "label.added vip"]);
  assert.equal(ie.events[0].messageId, spam.messageId);
  assert.equal(ie.events[0].inboxId, SHOP);
  assert.ok(ie.events[0].eventAt instanceof Date && ie.events[0].createdAt instanceof Date);

  // Webhook update and delete.
  const upd = await client.webhooks.update(hook.webhookId, { eventTypes: ["message.bounced"] });
  assert.deepEqual(upd.eventTypes, ["message.bounced"]);
  await client.webhooks.delete(hook.webhookId);
  assert.equal((await client.webhooks.list()).count, 0);
  rcv.srv.close();
  rcv.srv.closeAllConnections();
});
