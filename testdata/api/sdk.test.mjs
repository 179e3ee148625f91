// Interop test: the official AgentMail TypeScript SDK (agentmail@0.5.27),
// unchanged, against `envelopd serve --relay --http` (TestInteropAgentMailSDK
// starts the server and sets ENVELOPD_API_URL, ENVELOPD_API_KEY and
// ENVELOPD_NPM_DIR, where agentmail is installed). Two inboxes play an
// Envelopay exchange by send/reply: WHICH → METHODS → ORDER → FULFILL →
// PAY, then a replayed proof that envelopd marks duplicate.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";

const require = createRequire(process.env.ENVELOPD_NPM_DIR + "/node_modules/");
const { AgentMailClient, AgentMail, AgentMailError } = require("agentmail");
const serializers = require("agentmail/serialization");
const { Webhook: SvixWebhook } = require("svix");
import http from "node:http";

const base = process.env.ENVELOPD_API_URL;
const client = new AgentMailClient({
  apiKey: process.env.ENVELOPD_API_KEY,
  environment: { http: base, websockets: base.replace(/^http/, "ws") },
});
const SHOP = "shop@shop.test";
const BOB = "bob@buyer.test";

// waitFor polls fn until it returns a value (local delivery is done by
// the relay's queue worker, asynchronously).
async function waitFor(what, fn) {
  for (let i = 0; i < 200; i++) {
    const v = await fn();
    if (v) return v;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error("timed out waiting for " + what);
}

// received waits for the message of the given Envelopay type to arrive
// in inbox and returns it (a MessageItem).
async function received(inbox, type, n = 1) {
  return waitFor(`${type} in ${inbox}`, async () => {
    const l = await client.inboxes.messages.list(inbox, { labels: ["received"], limit: 100, ascending: true });
    const ms = l.messages.filter((m) => m.envelopay.type === type);
    return ms.length >= n ? ms[n - 1] : null;
  });
}

// strict checks an answer the SDK parsed (it skips validation) against
// the SDK's own schema: a missing required field or a wrong type throws.
function strict(schema, data) {
  schema.jsonOrThrow(data, { unrecognizedObjectKeys: "passthrough" });
  return data;
}

// listen starts a webhook receiver on loopback; hits collects the
// deliveries ({headers, body}).
async function listen() {
  const hits = [];
  const srv = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      hits.push({ headers: req.headers, body: Buffer.concat(chunks).toString("utf8") });
      res.writeHead(204).end();
    });
  });
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  srv.unref(); // a failed assertion must end the run, not leave it waiting on the listener
  return { srv, hits, url: `http://127.0.0.1:${srv.address().port}/hook` };
}

test("Envelopay exchange through the AgentMail SDK", async () => {

  // Inboxes; client_id makes create idempotent.
  const shop = await client.inboxes.create({ username: "shop", domain: "shop.test", clientId: "shop-1" });
  assert.equal(shop.inboxId, SHOP);
  const again = await client.inboxes.create({ username: "shop", domain: "shop.test", clientId: "shop-1" });
  assert.equal(again.inboxId, SHOP);
  assert.equal(again.createdAt.getTime(), shop.createdAt.getTime());
  await client.inboxes.create({ username: "bob", domain: "buyer.test", displayName: "Bob" });
  const inboxes = await client.inboxes.list();
  assert.deepEqual(inboxes.inboxes.map((i) => i.inboxId).sort(), [BOB, SHOP]);
  assert.equal((await client.inboxes.get(BOB)).displayName, "Bob");

  // A webhook with custom delivery headers hears the shop's mail; its
  // deliveries carry them and still verify with svix.
  const listener = await listen();
  const hh = await client.webhooks.create({ url: listener.url, eventTypes: ["message.received"], inboxIds: [SHOP],
    headers: { "X-Agent-Token": "tok-1", Authorization: "Bearer shop" } });

  // WHICH (bare) from Bob.
  const which = await client.inboxes.messages.send(BOB, { to: SHOP, subject: "WHICH", text: "" });
  assert.match(which.messageId, /^<.+@buyer\.test>$/);
  const w = await received(SHOP, "which");
  assert.equal(w.threadId, which.threadId);
  assert.ok(w.labels.includes("received") && w.labels.includes("accepted"));

  // METHODS: the subject comes from the JSON's type and note.
  await client.inboxes.messages.reply(SHOP, w.messageId, {
    text: JSON.stringify({ v: "0.2.0", type: "methods", id: "mth_1", note: "SOL accepted",
      rails: [{ chain: "solana", token: "SOL", wallet: "6dL6n77jJFWq4bu3cQp57H8rMUPEXu7uYN1XApPxpUif", price: "500000000" }] }),
  });
  const m = await received(BOB, "methods");
  assert.equal(m.subject, "METHODS | SOL accepted");
  assert.equal(m.threadId, which.threadId);

  // ORDER, FULFILL.
  await client.inboxes.messages.reply(BOB, m.messageId, {
    text: JSON.stringify({ v: "0.2.0", type: "order", id: "ord_1", task: { description: "Review PR #417" } }),
  });
  const o = await received(SHOP, "order");
  await client.inboxes.messages.reply(SHOP, o.messageId, {
    text: JSON.stringify({ v: "0.2.0", type: "fulfill", id: "ful_1", order_ref: "ord_1", result: { summary: "Approved" } }),
  });
  const f = await received(BOB, "fulfill");

  // PAY, then the same proof again under a new id: envelopd refuses to
  // send it (400 naming duplicate_proof) unless forced, and the shop's
  // copy is marked duplicate.
  const pay = { v: "0.2.0", type: "pay", id: "pay_1", amount: "500000000", token: "SOL", chain: "solana", proof: { tx: "5xQ7sdkinterop" } };
  await client.inboxes.messages.reply(BOB, f.messageId, { text: JSON.stringify(pay) });
  const p1 = await received(SHOP, "pay");
  assert.equal(p1.envelopay.status, "accepted");
  const replay = { ...pay, id: "pay_2" };
  await assert.rejects(
    client.inboxes.messages.reply(BOB, f.messageId, { text: JSON.stringify(replay) }),
    (err) => {
      assert.ok(err instanceof AgentMail.ValidationError, String(err));
      assert.equal(err.statusCode, 400);
      assert.ok(err.body.errors.some((e) => e.code === "duplicate_proof"), JSON.stringify(err.body));
      return true;
    },
  );
  await client.inboxes.messages.reply(BOB, f.messageId, { text: JSON.stringify(replay) }, { queryParams: { force: "true" } });
  const p2 = await received(SHOP, "pay", 2);
  assert.equal(p2.envelopay.status, "duplicate");
  assert.ok(p2.labels.includes("duplicate"));
  assert.ok(p2.envelopay.errors.some((e) => e.code === "duplicate_proof"), JSON.stringify(p2.envelopay.errors));

  // Threads: one thread holds the whole exchange in each inbox.
  const threads = await client.inboxes.threads.list(SHOP);
  assert.equal(threads.count, 1);
  const t = await client.inboxes.threads.get(SHOP, threads.threads[0].threadId);
  // The duplicate proof was answered with a courtesy OOPS (to a verified
  // local sender), queued in the same transaction as the PAY's copy.
  assert.deepEqual(t.messages.map((x) => x.envelopay.type), ["which", "methods", "order", "fulfill", "pay", "pay", "oops"]);
  assert.equal(t.messageCount, 7);
  assert.deepEqual(t.senders.sort(), [BOB, SHOP]);
  assert.equal(t.messages[5].messageId, p2.messageId);
  assert.equal(t.lastMessageId, t.messages[6].messageId);
  assert.equal(t.messages[6].envelopay.body.error.code, "duplicate_proof");
  const org = await client.threads.list();
  assert.equal(org.count, 2); // the shop's and Bob's view of the thread
  assert.equal((await client.threads.get(t.threadId)).threadId, t.threadId);

  // The full message and its raw bytes: DKIM-signed by buyer.test and
  // verified on receipt.
  const full = await client.inboxes.messages.get(SHOP, p1.messageId);
  assert.equal(JSON.parse(full.text.trim()).id, "pay_1");
  assert.equal(full.envelopay.dkim[0].result, "pass");
  assert.equal(full.envelopay.dkim[0].domain, "buyer.test");
  const raw = await client.inboxes.messages.getRaw(SHOP, p1.messageId);
  assert.ok(raw.expiresAt instanceof Date);
  const bytes = Buffer.from(await (await fetch(raw.downloadUrl)).arrayBuffer());
  assert.equal(bytes.length, raw.size);
  assert.match(bytes.toString("latin1"), /^DKIM-Signature: .*d=buyer\.test/ms);

  // Labels.
  const upd = await client.inboxes.messages.update(SHOP, p1.messageId, { addLabels: ["paid"] });
  assert.ok(upd.labels.includes("paid"));
  const paid = await client.inboxes.messages.list(SHOP, { labels: ["paid"] });
  assert.deepEqual(paid.messages.map((x) => x.messageId), [p1.messageId]);
  const sent = await client.inboxes.messages.list(BOB, { labels: ["sent"], ascending: true });
  assert.deepEqual(sent.messages.map((x) => x.envelopay.type), ["which", "order", "pay", "pay"]);

  // Paging.
  const page1 = await client.inboxes.messages.list(SHOP, { limit: 4 });
  const page2 = await client.inboxes.messages.list(SHOP, { limit: 4, pageToken: page1.nextPageToken });
  assert.equal(page1.count, 4);
  assert.equal(page2.count, 3);
  assert.equal(page2.nextPageToken, undefined);

  // Batch calls: messages of one inbox by id, in the order asked; an id
  // the inbox does not hold is left out (count < limit).
  const bg = await client.inboxes.messages.batchGet(SHOP, { messageIds: [p2.messageId, "<nope@shop.test>", p1.messageId] });
  assert.equal(bg.limit, 3);
  assert.deepEqual(bg.messages.map((x) => x.messageId), [p2.messageId, p1.messageId]);
  assert.equal(bg.messages[0].text, undefined);
  const bu = await client.inboxes.messages.batchUpdate(SHOP, { messageIds: [p1.messageId, p2.messageId], addLabels: ["batch"] });
  assert.equal(bu.count, 2);
  assert.ok(bu.updates.every((x) => x.labels.includes("batch")), JSON.stringify(bu.updates));
  await assert.rejects(client.inboxes.messages.batchUpdate(SHOP, { messageIds: [p1.messageId, p1.messageId], addLabels: ["x"] }), AgentMail.ValidationError);

  // A draft's attachment, by the inbox, organisation and pod routes.
  const dr = await client.inboxes.drafts.create(SHOP, { to: [BOB], subject: "with a file", text: "see",
    attachments: [{ filename: "a.txt", contentType: "text/plain", content: Buffer.from("hello file").toString("base64") }] });
  assert.equal(dr.attachments[0].attachmentId, "att_1");
  for (const a of [await client.inboxes.drafts.getAttachment(SHOP, dr.draftId, "att_1"), await client.drafts.getAttachment(dr.draftId, "att_1"),
    await client.pods.drafts.getAttachment("envelopd", dr.draftId, "att_1")]) {
    assert.equal(a.size, 10);
    assert.equal(a.filename, "a.txt");
    assert.equal(await (await fetch(a.downloadUrl)).text(), "hello file");
  }
  await client.inboxes.drafts.delete(SHOP, dr.draftId);

  // Metrics from the event log (metrics.queryEvents: metrics.query's query and answer).
  const since = new Date(Date.now() - 86400e3);
  const me = await client.metrics.queryEvents({ eventTypes: ["message.sent"], start: since, period: "1d" });
  assert.ok(me["message.sent"].reduce((n, b) => n + b.count, 0) >= 4, JSON.stringify(me));
  assert.ok((await client.inboxes.metrics.queryEvents(SHOP, { eventTypes: ["message.sent"], start: since }))["message.sent"].length >= 1);
  assert.ok("message.sent" in (await client.pods.metrics.queryEvents("envelopd", { eventTypes: ["message.sent"], start: since })));

  // The one pod's webhooks are the organisation's.
  const ph = await client.pods.webhooks.create("envelopd", { url: "https://agent.test/hook", eventTypes: ["message.received"] });
  assert.equal((await client.webhooks.get(ph.webhookId)).secret, ph.secret);
  assert.equal((await client.pods.webhooks.get("envelopd", ph.webhookId)).webhookId, ph.webhookId);
  assert.ok((await client.pods.webhooks.list("envelopd")).webhooks.some((w) => w.webhookId === ph.webhookId));
  assert.deepEqual((await client.pods.webhooks.update("envelopd", ph.webhookId, { eventTypes: ["message.sent"] })).eventTypes, ["message.sent"]);
  await client.pods.webhooks.delete("envelopd", ph.webhookId);
  await assert.rejects(client.webhooks.get(ph.webhookId), AgentMail.NotFoundError);

  // Custom delivery headers (TypeScript only): names read back, values
  // never; set and removed on the organisation's, inbox's and pod's
  // routes; a reserved one refused with the SDK's ValidationError.
  assert.deepEqual(strict(serializers.webhooks.WebhookHeaderNamesResponse, await client.webhooks.getHeaders(hh.webhookId)).headerNames,
    ["Authorization", "X-Agent-Token"]);
  await client.webhooks.updateHeaders(hh.webhookId, { headers: { "X-Extra": "1" }, removeHeaders: ["authorization"] });
  assert.deepEqual((await client.inboxes.webhooks.getHeaders(SHOP, hh.webhookId)).headerNames, ["X-Agent-Token", "X-Extra"]);
  await client.inboxes.webhooks.updateHeaders(SHOP, hh.webhookId, { removeHeaders: ["X-Extra"] });
  await client.pods.webhooks.updateHeaders("envelopd", hh.webhookId, { headers: { "X-Pod": "p" } });
  assert.deepEqual((await client.pods.webhooks.getHeaders("envelopd", hh.webhookId)).headerNames, ["X-Agent-Token", "X-Pod"]);
  await assert.rejects(client.webhooks.updateHeaders(hh.webhookId, { headers: { Host: "evil.test" } }), (err) => {
    assert.ok(err instanceof AgentMail.ValidationError, String(err));
    assert.equal(err.body.errors[0].code, "reserved_header");
    return true;
  });
  // The deliveries of the shop's mail carry the headers given at create
  // (the first ones) and verify with svix and the secret.
  const hit = await waitFor("a webhook delivery", async () => listener.hits[0]);
  assert.equal(hit.headers["x-agent-token"], "tok-1");
  assert.equal(hit.headers.authorization, "Bearer shop");
  new SvixWebhook((await client.webhooks.get(hh.webhookId)).secret).verify(hit.body, hit.headers);
  assert.equal(JSON.parse(hit.body).event_type, "message.received");
  await client.webhooks.delete(hh.webhookId);
  listener.srv.close();

  // Usage (metrics.queryUsage; TypeScript only): cumulative counts at the
  // end of each period, per scope.
  const u = strict(serializers.QueryUsageResponse, await client.metrics.queryUsage({ start: since, period: 3600 }));
  assert.deepEqual(Object.keys(u).sort(), ["domain_count", "inbox_count", "message_count", "pod_count", "storage_bytes", "thread_count"]);
  const lastOf = (ps) => ps[ps.length - 1].value;
  assert.equal(u.message_count.length, 25); // 24 whole hours and the moments since
  assert.ok(lastOf(u.message_count) >= 13 && lastOf(u.storage_bytes) > 0 && lastOf(u.inbox_count) === 2 && lastOf(u.pod_count) === 1, JSON.stringify(u));
  const iu = strict(serializers.QueryUsageResponse, await client.inboxes.metrics.queryUsage(SHOP, { usageTypes: ["message_count", "thread_count"], descending: true, limit: 1 }));
  assert.deepEqual(Object.keys(iu).sort(), ["message_count", "thread_count"]);
  assert.ok(iu.message_count[0].value >= 7 && iu.thread_count[0].value === 1, JSON.stringify(iu));
  const pu = strict(serializers.QueryUsageResponse, await client.pods.metrics.queryUsage("envelopd", { usageTypes: ["inbox_count"] }));
  assert.equal(lastOf(pu.inbox_count), 2);
  await assert.rejects(client.inboxes.metrics.queryUsage(SHOP, { usageTypes: ["pod_count"] }), AgentMail.ValidationError);

  // The one pod's domains are the organisation's (pods.domains; update
  // is not implemented: envelopd has none of its three settings).
  const pd = strict(serializers.Domain, await client.pods.domains.create("envelopd", { domain: "pod.example.com" }));
  assert.equal(pd.domainId, "pod.example.com");
  assert.deepEqual(strict(serializers.ListDomainsResponse, await client.pods.domains.list("envelopd")).domains.map((d) => d.domainId), ["pod.example.com"]);
  assert.equal(strict(serializers.Domain, await client.pods.domains.get("envelopd", "pod.example.com")).status, "NOT_STARTED");
  assert.match(Buffer.from(await (await client.pods.domains.getZoneFile("envelopd", "pod.example.com")).arrayBuffer()).toString(), /pod\.example\.com/);
  assert.equal((await client.domains.get("pod.example.com")).domainId, "pod.example.com");
  await assert.rejects(client.pods.domains.update("envelopd", "pod.example.com", { feedbackEnabled: true }), (err) => err instanceof AgentMailError && err.statusCode === 501);
  await client.pods.domains.delete("envelopd", "pod.example.com");
  await assert.rejects(client.pods.domains.get("envelopd", "pod.example.com"), AgentMail.NotFoundError);
  await assert.rejects(client.pods.domains.list("other"), AgentMail.NotFoundError);

  // Search (the TypeScript SDK has it; the Python SDK 0.5.0 does not):
  // every word a prefix in a subject or note.
  const found = await client.inboxes.messages.search(SHOP, { q: "pay" });
  assert.equal(found.messages.filter((x) => x.envelopay.type === "pay").length, 2);
  assert.ok(found.messages.every((x) => /\bpay/i.test(x.subject + " " + (x.envelopay.note ?? ""))), JSON.stringify(found.messages.map((x) => x.subject)));
  const ft = await client.inboxes.threads.search(SHOP, { q: "SOL accepted" });
  assert.equal(ft.count, 1);
  assert.equal((await client.threads.search({ q: "methods" })).count, 2);
  assert.deepEqual((await client.inboxes.search({ q: "bo" })).inboxes.map((i) => i.inboxId), [BOB]);
  await assert.rejects(client.inboxes.messages.search(SHOP, { q: "***" }), AgentMail.ValidationError);

  // API keys: per-operation permissions, get, update and auth.me, each
  // answer re-checked by strict against the SDK's own schema.
  const ser = serializers;
  const keyed = (k) => new AgentMailClient({ apiKey: k, environment: { http: base, websockets: base.replace(/^http/, "ws") } });
  const ome = strict(ser.Identity, await client.auth.me());
  assert.deepEqual([ome.scopeType, ome.scopeId, ome.organizationId, ome.podId], ["organization", "envelopd", "envelopd", undefined]);
  const rk = strict(ser.CreateApiKeyResponse, await client.apiKeys.create({ name: "reader",
    permissions: { inboxRead: true, messageRead: true, apiKeyCreate: true, apiKeyUpdate: true } }));
  assert.equal(rk.permissions.messageRead, true);
  assert.equal(rk.permissions.messageSend, false);
  const reader = keyed(rk.apiKey);
  assert.equal((await reader.inboxes.get(SHOP)).inboxId, SHOP);
  const forbidden = (perm) => (err) => err instanceof AgentMailError && err.statusCode === 403 && err.body.name === "ForbiddenError" && err.body.message.includes(perm);
  await assert.rejects(reader.inboxes.messages.send(SHOP, { to: BOB, text: "x" }), forbidden("message_send"));
  await assert.rejects(reader.apiKeys.list(), forbidden("api_key_read"));
  await assert.rejects(reader.apiKeys.create({ permissions: { webhookRead: true } }), forbidden("webhook_read"));
  await assert.rejects(reader.apiKeys.update(rk.apiKeyId, { permissions: { messageSend: true } }), forbidden("message_send"));
  const gk = strict(ser.BearerApiKey, await client.apiKeys.get(rk.apiKeyId));
  assert.deepEqual([gk.type, gk.name, gk.permissions.messageRead, gk.permissions.draftRead], ["bearer", "reader", true, false]);
  const uk = strict(ser.BearerApiKey, await client.apiKeys.update(rk.apiKeyId, { name: "renamed", permissions: { inboxRead: true } }));
  assert.deepEqual([uk.name, uk.permissions.inboxRead, uk.permissions.messageRead], ["renamed", true, false]);
  await assert.rejects(reader.inboxes.messages.list(SHOP), forbidden("message_read"));
  const ik = strict(ser.CreateApiKeyResponse, await client.inboxes.apiKeys.create(SHOP, { name: "shop", permissions: { messageRead: true } }));
  const ime = strict(ser.Identity, await keyed(ik.apiKey).auth.me());
  assert.deepEqual([ime.scopeType, ime.scopeId, ime.podId, ime.inboxId, ime.apiKeyId], ["inbox", SHOP, "envelopd", SHOP, ik.apiKeyId]);
  strict(ser.BearerApiKey, await client.inboxes.apiKeys.update(SHOP, ik.apiKeyId, { name: "shop 2" }));
  const pk = strict(ser.CreateApiKeyResponse, await client.pods.apiKeys.create("envelopd", { name: "pod" }));
  const pme = strict(ser.Identity, await keyed(pk.apiKey).auth.me());
  assert.deepEqual([pme.scopeType, pme.scopeId, pme.podId, pme.inboxId], ["pod", "envelopd", "envelopd", undefined]);
  assert.equal(strict(ser.BearerApiKey, await client.pods.apiKeys.update("envelopd", pk.apiKeyId, { name: "pod 2" })).name, "pod 2");
  const kl = strict(ser.ListApiKeysResponse, await client.apiKeys.list());
  assert.ok([rk, ik, pk].every((k) => kl.apiKeys.some((x) => x.apiKeyId === k.apiKeyId && x.name !== undefined)), JSON.stringify(kl));
  await client.apiKeys.delete(rk.apiKeyId);
  await client.inboxes.apiKeys.delete(SHOP, ik.apiKeyId);
  await client.pods.apiKeys.delete("envelopd", pk.apiKeyId);
  await assert.rejects(client.apiKeys.get(rk.apiKeyId), AgentMail.NotFoundError);

  // Errors are the SDK's own.
  await assert.rejects(client.inboxes.messages.get(SHOP, "<nope@shop.test>"), AgentMail.NotFoundError);
  const bad = new AgentMailClient({ apiKey: "ek_000000000000_" + "A".repeat(43), environment: { http: base, websockets: base } });
  await assert.rejects(bad.inboxes.list(), (err) => err instanceof AgentMailError && err.statusCode === 401);
});
