// Interop script: the official AgentMail TypeScript SDK (agentmail@0.5.27),
// unchanged, manages domains on a real envelopd (TestInteropDomainsKnot
// runs it and sets ENVELOPD_API_URL, ENVELOPD_API_KEY, ENVELOPD_NPM_DIR,
// DOMAINS and OUT).
//
//   PHASE=create: domains.create each of DOMAINS (comma-separated), then
//                 domains.getZoneFile into OUT/<domain>.zone;
//   PHASE=verify: domains.verify each, then domains.get into
//                 OUT/<domain>.json (the SDK's parsed Domain).
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { createRequire } from "node:module";

const require = createRequire(process.env.ENVELOPD_NPM_DIR + "/node_modules/");
const { AgentMailClient, AgentMail } = require("agentmail");

const base = process.env.ENVELOPD_API_URL;
const client = new AgentMailClient({
  apiKey: process.env.ENVELOPD_API_KEY,
  environment: { http: base, websockets: base.replace(/^http/, "ws") },
});
const domains = process.env.DOMAINS.split(",");
const out = process.env.OUT;

if (process.env.PHASE === "create") {
  for (const d of domains) {
    const created = await client.domains.create({ domain: d });
    assert.equal(created.domainId, d);
    assert.equal(created.status, "NOT_STARTED");
    assert.ok(created.records.length >= 7, "records");
    const zone = await client.domains.getZoneFile(d);
    writeFileSync(`${out}/${d}.zone`, Buffer.from(await zone.arrayBuffer()));
  }
  // A second create of the same domain: ConflictError is not in create's
  // list, so the SDK surfaces a 409 AgentMailError.
  await assert.rejects(client.domains.create({ domain: domains[0] }), (e) => e.statusCode === 409);
  await assert.rejects(client.domains.create({ domain: "co.uk" }), AgentMail.ValidationError);
  const list = await client.domains.list();
  assert.equal(list.count, domains.length);
} else {
  for (const d of domains) {
    await client.domains.verify(d);
    const got = await client.domains.get(d);
    writeFileSync(`${out}/${d}.json`, JSON.stringify(got));
  }
  await assert.rejects(client.domains.verify("nope.envelopd.test"), AgentMail.NotFoundError);
}
