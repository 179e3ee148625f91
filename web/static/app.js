// envelopd web inbox: a thin client of the HTTP API under /v0 (docs/api.md)
// and its websocket. No data is in the page: everything is fetched with
// the API key kept in this tab's sessionStorage.
import { el, fmtTime, verdictBadges, paymentTitle, typeBadge, amount, codes, fieldValue, isRef, htmlFrame, TYPES } from "./view.js";

const KEY = "envelopd.api_key";
const $ = (id) => document.getElementById(id);
const S = {
  key: sessionStorage.getItem(KEY) || "",
  inbox: "", filters: {}, next: "", ids: new Set(), gen: 0,
  ws: null, wsInbox: "", poll: 0, retry: 0,
  // The view that live updates refresh: the list (refreshHead) or the
  // thread open (refreshThread), and that thread's id.
  refresh: null, thread: "",
};

class Unauthorized extends Error {}

// api calls /v0 with the Bearer key; JSON unless raw.
async function api(path, raw) {
  const r = await fetch("/v0" + path, { headers: { Authorization: "Bearer " + S.key }, cache: "no-store" });
  if (r.status === 401) throw new Unauthorized("the API key was refused");
  if (!r.ok) {
    let msg = "HTTP " + r.status;
    try { const j = await r.json(); msg = (j.name ? j.name + ": " : "") + (j.message || ""); } catch { /* not JSON */ }
    throw new Error(msg);
  }
  return raw ? r : r.json();
}

const enc = encodeURIComponent;

// Login.

function showLogin(msg) {
  stopLive();
  S.refresh = null;
  inboxList = null;
  S.key = "";
  sessionStorage.removeItem(KEY);
  $("shell").hidden = true; $("logout").hidden = true; $("live").hidden = true;
  $("crumb").textContent = "";
  $("login").hidden = false;
  $("login-error").textContent = msg || "";
  $("key").focus();
}

$("login").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  S.key = $("key").value.trim();
  try {
    await api("/inboxes?limit=1");
  } catch (e) {
    showLogin(e instanceof Unauthorized ? "That key was refused." : String(e.message || e));
    return;
  }
  sessionStorage.setItem(KEY, S.key);
  $("key").value = "";
  $("login").hidden = true;
  route();
});

$("logout").addEventListener("click", () => { location.hash = "#/"; showLogin(""); });

function fail(e) {
  if (e instanceof Unauthorized) { showLogin("The API key was refused; log in again."); return; }
  $("pane").replaceChildren(el("p", { class: "error", role: "alert" }, String(e.message || e)));
}

// Routing: #/i/INBOX?filters, #/t/INBOX/THREAD[/ROW].

function parseHash() {
  const h = location.hash.replace(/^#\/?/, "");
  const [p, qs] = h.split("?");
  const parts = p.split("/").map(decodeURIComponent);
  return { parts, q: new URLSearchParams(qs || "") };
}

async function route() {
  if (!S.key) { showLogin(""); return; }
  $("login").hidden = true; $("shell").hidden = false; $("logout").hidden = false;
  const { parts, q } = parseHash();
  const gen = ++S.gen;
  try {
    await renderInboxes(parts[1] || "");
    if (gen !== S.gen) return;
    if (parts[0] === "t" && parts[1] && parts[2]) await renderThread(parts[1], parts[2], parts[3] || "", gen);
    else if (parts[0] === "i" && parts[1]) await renderInbox(parts[1], q, gen);
    else {
      const first = document.querySelector("#inboxes a");
      if (first) location.replace(first.getAttribute("href"));
      else $("pane").replaceChildren(el("p", { class: "muted" }, "No inbox yet."));
    }
  } catch (e) { fail(e); }
}

window.addEventListener("hashchange", route);

let inboxList = null;
async function renderInboxes(current) {
  if (!inboxList) {
    const all = [];
    let tok = "";
    do {
      const l = await api("/inboxes?limit=1000" + (tok ? "&page_token=" + enc(tok) : ""));
      all.push(...l.inboxes);
      tok = l.next_page_token || "";
    } while (tok && all.length < 10000);
    inboxList = all;
  }
  const nav = $("inboxes");
  nav.replaceChildren(el("h2", {}, "Inboxes"), el("ul", {}, inboxList.map((b) =>
    el("li", {}, el("a", { href: "#/i/" + enc(b.inbox_id), class: b.inbox_id === current ? "current" : "",
      "aria-current": b.inbox_id === current ? "page" : undefined }, b.display_name || b.inbox_id)))));
}

// Inbox: filters, the list (newest first, keyset-paged), live updates.

const FILTERS = ["type", "status", "error", "sender", "q"];

function listQuery(f, tok) {
  const p = new URLSearchParams({ limit: "50" });
  for (const k of ["type", "error", "sender", "q"]) if (f[k]) p.set(k, f[k]);
  if (f.status) p.set("labels", f.status);
  if (tok) p.set("page_token", tok);
  return p.toString();
}

function filterForm(inbox, f) {
  const sel = (name, label, opts) => el("label", {}, label, el("select", { name, "data-filter": name },
    el("option", { value: "" }, "any"), opts.map((o) => el("option", { value: o, selected: f[name] === o }, o))));
  const inp = (name, label, ph, type) => el("label", {}, label, el("input", { name, "data-filter": name, type: type || "text",
    value: f[name] || "", placeholder: ph, autocomplete: "off", spellcheck: "false" }));
  const form = el("form", { id: "filters", class: "filters", role: "search" },
    sel("type", "Type", TYPES),
    sel("status", "Status", ["accepted", "quarantined", "duplicate"]),
    inp("error", "Error", "duplicate_proof"),
    inp("sender", "Sender", "a@b.example"),
    inp("q", "Search", "subject, note", "search"),
    el("button", { type: "submit" }, "Filter"),
    el("a", { href: "#/i/" + enc(inbox), class: "clear" }, "clear"));
  const apply = () => {
    const p = new URLSearchParams();
    for (const e of form.querySelectorAll("[data-filter]")) if (e.value.trim()) p.set(e.name, e.value.trim());
    const qs = p.toString();
    location.hash = "#/i/" + enc(inbox) + (qs ? "?" + qs : "");
  };
  form.addEventListener("submit", (ev) => { ev.preventDefault(); apply(); });
  for (const s of form.querySelectorAll("select")) s.addEventListener("change", apply);
  return form;
}

function row(m, fresh) {
  setTimeout(() => { for (const e of document.querySelectorAll("#list li.fresh")) e.classList.remove("fresh"); }, 3000);
  const ep = m.envelopay || {};
  const note = ep.type ? (ep.note || "") : (m.subject || "");
  return el("li", { class: "msg" + (fresh ? " fresh" : ""), dataset: { id: String(ep.id || ""), status: ep.status || "" } },
    el("a", { href: "#/t/" + enc(m.inbox_id) + "/" + enc(m.thread_id) + "/" + enc(String(ep.id || "")) },
      el("span", { class: "when" }, el("time", { datetime: m.timestamp }, fmtTime(m.timestamp))),
      el("span", { class: "who" }, (m.labels || []).includes("sent") ? "→ " + (m.to || []).join(", ") : m.from),
      el("span", { class: "what" }, typeBadge(ep.type), el("span", { class: "note" }, note),
        amount(ep) ? el("span", { class: "amount" }, amount(ep)) : null),
      el("span", { class: "badges" }, verdictBadges(m))));
}

async function renderInbox(inbox, q, gen) {
  const t0 = performance.now();
  const f = {};
  for (const k of FILTERS) f[k] = q.get(k) || "";
  S.inbox = inbox; S.filters = f; S.next = ""; S.ids = new Set();
  S.refresh = null; S.thread = "";
  $("crumb").textContent = inbox;
  window.scrollTo(0, 0);
  const list = el("ol", { id: "list", class: "msgs" });
  const more = el("button", { id: "more", type: "button", hidden: true }, "Older messages");
  const count = el("span", { id: "count", class: "muted" });
  $("pane").replaceChildren(filterForm(inbox, f), el("div", { class: "listhead" }, count), list, more);
  const l = await api("/inboxes/" + enc(inbox) + "/messages?" + listQuery(f, ""));
  if (gen !== S.gen) return;
  append(list, l.messages, false);
  S.next = l.next_page_token || "";
  more.hidden = !S.next;
  count.textContent = l.messages.length ? "" : "No messages" + (Object.values(f).some(Boolean) ? " match these filters." : ".");
  more.addEventListener("click", async () => {
    more.disabled = true;
    try {
      const p = await api("/inboxes/" + enc(inbox) + "/messages?" + listQuery(f, S.next));
      if (gen !== S.gen) return;
      append(list, p.messages, false);
      S.next = p.next_page_token || "";
      more.hidden = !S.next;
    } catch (e) { fail(e); } finally { more.disabled = false; }
  });
  // First paint of the inbox: measured by the browser test.
  performance.mark("inbox-painted");
  document.body.dataset.inboxMs = String(Math.round(performance.now() - t0));
  S.refresh = refreshHead;
  startLive(inbox);
}

function append(list, msgs, top) {
  const rows = [];
  for (const m of msgs) {
    const id = m.envelopay?.id;
    if (id && S.ids.has(id)) continue;
    if (id) S.ids.add(id);
    rows.push(row(m, top));
  }
  if (top) list.prepend(...rows); else list.append(...rows);
  if (rows.length) { const c = $("count"); if (c) c.textContent = ""; }
}

// refreshHead fetches the first page again and puts the rows not shown
// yet on top (the server applies the filters: no second copy of them).
async function refreshHead() {
  const list = $("list");
  if (!list || !S.inbox) return;
  const gen = S.gen, inbox = S.inbox;
  const l = await api("/inboxes/" + enc(inbox) + "/messages?" + listQuery(S.filters, ""));
  if (gen !== S.gen) return;
  const newer = l.messages.filter((m) => !S.ids.has(m.envelopay?.id));
  append(list, newer, true);
}

// Live: the API's websocket (AgentMail's protocol: subscribe →
// subscribed, then events); when it is unavailable, polling every 2 s.

function setLive(text, cls) { const e = $("live"); e.hidden = false; e.textContent = text; e.className = "live " + cls; }

function stopLive() {
  if (S.ws) { S.ws.onclose = null; S.ws.close(); S.ws = null; }
  clearInterval(S.poll); S.poll = 0; S.wsInbox = "";
}

function onLive() { if (S.refresh) S.refresh().catch(liveFail); }

// liveFail: a refused key logs out; a passing network error is retried
// by the next poll or event, without replacing the list.
function liveFail(e) { if (e instanceof Unauthorized) fail(e); }

function startPolling() {
  if (S.poll) return;
  setLive("polling", "poll");
  S.poll = setInterval(onLive, 2000);
}

function startLive(inbox) {
  if (S.ws && S.wsInbox === inbox && S.ws.readyState <= 1) return;
  stopLive();
  S.wsInbox = inbox;
  let ws;
  try {
    ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/v0?api_key=" + enc(S.key));
  } catch { startPolling(); return; }
  S.ws = ws;
  let subscribed = false;
  ws.onopen = () => ws.send(JSON.stringify({ type: "subscribe", inbox_ids: [inbox], event_types: ["message.received", "message.sent"] }));
  ws.onmessage = (ev) => {
    let m;
    try { m = JSON.parse(ev.data); } catch { return; }
    if (m.type === "subscribed") { subscribed = true; S.retry = 0; clearInterval(S.poll); S.poll = 0; setLive("live", "on"); onLive(); return; }
    if (m.type === "error") { startPolling(); return; }
    // message.received carries message, message.sent send,
    // message.delivered delivery, message.bounced bounce: each with
    // inbox_id and thread_id.
    const d = m.type === "event" && (m.message || m.send || m.delivery || m.bounce);
    if (d && d.inbox_id === S.wsInbox && (!S.thread || d.thread_id === S.thread)) onLive();
  };
  ws.onclose = () => {
    S.ws = null;
    startPolling();
    if (subscribed && S.retry < 10) { S.retry++; setTimeout(() => { if (S.wsInbox === inbox && !S.ws && S.refresh) startLive(inbox); }, 2000 * S.retry); }
  };
}

// Thread: a timeline of its Envelopay steps.

async function renderThread(inbox, thread, focus, gen) {
  const t = await api("/inboxes/" + enc(inbox) + "/threads/" + enc(thread) + "?limit=1000");
  if (gen !== S.gen) return;
  $("crumb").textContent = inbox + " › thread";
  drawThread(inbox, thread, t, focus, null);
  S.thread = thread;
  S.refresh = () => refreshThread(inbox, thread, gen);
  startLive(inbox);
}

// refreshThread draws the thread again when it has new messages (live),
// the new steps highlighted, the page where it was.
async function refreshThread(inbox, thread, gen) {
  const t = await api("/inboxes/" + enc(inbox) + "/threads/" + enc(thread) + "?limit=1000");
  if (gen !== S.gen) return;
  const shown = new Set([...document.querySelectorAll("#timeline .step")].map((e) => e.id));
  if ((t.messages || []).every((m) => shown.has("step-" + m.envelopay?.id))) return;
  const focus = document.querySelector(".step.focus")?.id.replace(/^step-/, "") || "";
  const y = window.scrollY;
  drawThread(inbox, thread, t, focus, shown);
  window.scrollTo(0, y);
}

function drawThread(inbox, thread, t, focus, shown) {
  const msgs = t.messages || [];
  const byEid = new Map();
  for (const m of msgs) {
    const id = m.envelopay?.body?.id;
    if (typeof id === "string" && !byEid.has(id)) byEid.set(id, m);
  }
  const stepHref = (m) => "#/t/" + enc(inbox) + "/" + enc(thread) + "/" + enc(String(m.envelopay?.id || ""));
  const chain = el("ol", { class: "chain", "aria-label": "steps" }, msgs.map((m) =>
    el("li", {}, el("a", { href: stepHref(m) }, (m.envelopay?.type || "mail").toUpperCase()))));
  const steps = msgs.map((m) => step(inbox, m, byEid, stepHref));
  $("pane").replaceChildren(
    el("p", {}, el("a", { href: "#/i/" + enc(inbox), class: "back" }, "← " + inbox)),
    el("h1", { class: "subject" }, t.subject || "(no subject)"),
    chain,
    el("div", { id: "timeline", class: "timeline" }, steps));
  if (shown) for (const e of document.querySelectorAll("#timeline .step")) if (!shown.has(e.id)) e.classList.add("fresh");
  const target = focus && document.getElementById("step-" + focus);
  if (target) {
    target.classList.add("focus");
    if (!shown) target.scrollIntoView({ block: "start" });
  }
}

function step(inbox, m, byEid, stepHref) {
  const ep = m.envelopay || {};
  const body = ep.body && typeof ep.body === "object" ? ep.body : null;
  const rows = [];
  if (body) {
    for (const [k, v] of Object.entries(body)) {
      if (k === "v" || k === "type") continue;
      let val = fieldValue(v);
      if (isRef(k) && typeof v === "string") {
        const to = byEid.get(v);
        val = to ? el("a", { href: stepHref(to), class: "ref", "data-ref": k }, v + " → " + (to.envelopay?.type || "").toUpperCase())
          : el("span", { class: "ref missing", title: "not in this thread" }, v + " (not in this thread)");
      }
      rows.push(el("dt", {}, k), el("dd", {}, val));
    }
  }
  const cs = codes(ep);
  const checks = [];
  if (ep.type === "accept" && body) {
    const offer = typeof body.offer_ref === "string" ? byEid.get(body.offer_ref) : null;
    const want = offer?.envelopay?.body?.want;
    const paid = [body.amount, body.token, body.chain].join(" ");
    const wanted = want ? [want.amount, want.token, want.chain].join(" ") : "";
    if (cs.includes("amount_mismatch")) checks.push(el("p", { class: "check bad" }, "✗ amount_mismatch: pays " + paid + (wanted ? "; the OFFER wants " + wanted : "")));
    else if (offer) checks.push(el("p", { class: "check ok" }, "✓ pays " + paid + " = the OFFER's want " + wanted));
    else checks.push(el("p", { class: "check unknown" }, "? pays " + paid + "; its OFFER is not in this thread"));
  }
  const proof = body ? (body.proof ?? body.give?.proof) : undefined;
  if (proof !== undefined) {
    const dup = cs.includes("duplicate_proof");
    checks.push(el("p", { class: "check " + (dup ? "bad" : "ok"), title: JSON.stringify(proof) },
      dup ? "✗ proof seen before (duplicate_proof)" : "✓ proof first seen here"));
    // Seen first here is not paid: the payment's state says whether the
    // chain showed the money (docs/payments.md).
    const pay = ep.payment;
    if (pay) {
      const cls = pay.state === "verified" ? "ok" : ["pending", "unverified"].includes(pay.state) ? "unknown" : "bad";
      const mark = cls === "ok" ? "✓" : cls === "bad" ? "✗" : "?";
      checks.push(el("p", { class: "check " + cls, title: paymentTitle(pay) },
        mark + " payment " + pay.state + (pay.reason ? ": " + pay.reason : "")));
    }
  }
  const detail = el("div", { class: "detail" });
  const show = (name, fn) => el("button", { type: "button", "data-action": name, onclick: async (ev) => {
    const b = ev.currentTarget;
    if (b.getAttribute("aria-pressed") === "true") { detail.replaceChildren(); b.setAttribute("aria-pressed", "false"); return; }
    for (const o of b.parentNode.querySelectorAll("[aria-pressed]")) o.setAttribute("aria-pressed", "false");
    try { detail.replaceChildren(await fn()); b.setAttribute("aria-pressed", "true"); } catch (e) { fail(e); }
  } }, name);
  const path = "/inboxes/" + enc(inbox) + "/messages/" + enc(String(ep.id));
  const full = () => api(path);
  const actions = el("div", { class: "actions" },
    show("Text", async () => { const f = await full(); return el("pre", { class: "text" }, f.text || f.extracted_text || "(no text part)"); }),
    show("Headers", async () => {
      const f = await full();
      return el("dl", { class: "headers" }, Object.entries(f.headers || {}).flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
    }),
    show("Source", async () => { const r = await api(path + "/raw?format=raw", true); return el("pre", { class: "source" }, new TextDecoder().decode(await r.arrayBuffer())); }),
    show("HTML", async () => { const f = await full(); return f.html ? htmlFrame(f.html) : el("p", { class: "muted" }, "No HTML part."); }),
    el("button", { type: "button", "data-action": "download", onclick: async () => {
      try {
        const r = await api(path + "/raw?format=raw", true);
        const url = URL.createObjectURL(new Blob([await r.arrayBuffer()], { type: "message/rfc822" }));
        const a = el("a", { href: url, download: "message-" + ep.id + ".eml" });
        document.body.append(a); a.click(); a.remove();
        setTimeout(() => URL.revokeObjectURL(url), 60000);
      } catch (e) { fail(e); }
    } }, "Download .eml"));
  return el("article", { class: "step t-" + (ep.type || "none"), id: "step-" + ep.id, dataset: { eid: body?.id || "" } },
    el("header", {}, typeBadge(ep.type), el("span", { class: "note" }, ep.type ? (ep.note || "") : (m.subject || "")),
      el("span", { class: "who" }, m.from + " → " + (m.to || []).join(", ")),
      el("time", { datetime: m.timestamp }, fmtTime(m.timestamp))),
    el("div", { class: "badges" }, verdictBadges(m)),
    rows.length ? el("dl", { class: "fields" }, rows) : null,
    checks, actions, detail);
}

route();
