// envelopd web inbox: a thin client of the HTTP API under /v0 (docs/api.md)
// and its websocket. No data is in the page: everything is fetched with
// the API key kept in this tab's sessionStorage.
import { el, fmtTime, verdictBadges, paymentTitle, typeBadge, amount, codes, fieldValue, isRef, htmlFrame, TYPES,
  setChains, money, moneyText, explorerURL, PAY_SAY, SAY } from "./view.js";

const KEY = "envelopd.api_key";
const $ = (id) => document.getElementById(id);
const S = {
  key: sessionStorage.getItem(KEY) || "",
  inbox: "", filters: {}, next: "", ids: new Set(), gen: 0,
  ws: null, wsInbox: "", poll: 0, retry: 0,
  // lastEvent: the event id (evt_N) of the last websocket event this page
  // has seen; a new connection resumes after it (?last_event_id=).
  lastEvent: "",
  // Live refreshes never run twice at once: an event that arrives while
  // one runs (or while a view loads, refresh null) marks them dirty, and
  // one more refresh runs when the current one (or the load) ends.
  running: false, dirty: false,
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

// call sends a request with a JSON body to /v0 (the actions: reply,
// label, hold/release) and answers {ok, status, body}; a refusal is an
// answer, not an exception, so the page can show it beside the action.
async function call(method, path, body) {
  const r = await fetch("/v0" + path, { method, cache: "no-store",
    headers: { Authorization: "Bearer " + S.key, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body) });
  if (r.status === 401) throw new Unauthorized("the API key was refused");
  let j = null;
  try { j = await r.json(); } catch { /* no body */ }
  return { ok: r.ok, status: r.status, body: j };
}

// refusal says why the API refused an action, with its codes.
function refusal(res) {
  const b = res.body || {};
  const errs = Array.isArray(b.errors) ? b.errors : [];
  return el("div", { class: "refused", role: "alert" },
    el("p", {}, "Refused (HTTP " + res.status + (b.name ? ", " + b.name : "") + "): " + (b.message || "")),
    errs.length ? el("ul", {}, errs.map((p) => el("li", {}, (SAY[p.code] || p.code) + " ", el("code", {}, p.code),
      (p.field ? " (" + p.field + ")" : "") + (p.message ? ": " + p.message : "")))) : null);
}

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

// Routing: #/i/INBOX?filters, #/t/INBOX/THREAD[/ROW], #/d/INBOX[/DRAFT|new]
// (drafts), #/l/INBOX (allow and block lists).

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
  if (!chainsLoaded) {
    // Token decimals and explorers (GET /v0/tokens); without them amounts
    // stay in smallest units.
    try { setChains(await api("/tokens")); chainsLoaded = true; } catch (e) { if (e instanceof Unauthorized) { fail(e); return; } }
    if (gen !== S.gen) return;
  }
  // Until the new view has loaded, events only mark the page dirty.
  S.refresh = null; S.dirty = false;
  try {
    await renderInboxes(parts[1] || "");
    if (gen !== S.gen) return;
    if (parts[0] === "t" && parts[1] && parts[2]) await renderThread(parts[1], parts[2], parts[3] || "", gen);
    else if (parts[0] === "m" && parts[1] && parts[2]) await renderMessageRef(parts[1], parts[2], gen);
    else if (parts[0] === "i" && parts[1]) await renderInbox(parts[1], q, gen);
    else if (parts[0] === "d" && parts[1]) await renderDrafts(parts[1], parts[2] || "", gen);
    else if (parts[0] === "l" && parts[1]) await renderLists(parts[1], gen);
    else {
      const first = document.querySelector("#inboxes a");
      if (first) location.replace(first.getAttribute("href"));
      else $("pane").replaceChildren(el("p", { class: "muted" }, "No inbox yet."));
    }
  } catch (e) { fail(e); }
}

window.addEventListener("hashchange", route);
let chainsLoaded = false;

// #/m/INBOX/MESSAGE-ID: the message a duplicate points to, shown in its
// thread.
async function renderMessageRef(inbox, mid, gen) {
  const m = await api("/inboxes/" + enc(inbox) + "/messages/" + enc(mid));
  if (gen !== S.gen) return;
  location.replace("#/t/" + enc(inbox) + "/" + enc(m.thread_id) + "/" + enc(String(m.envelopay?.id || "")));
}

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
  // Tapping the inbox shown loads it again (the hash does not change, so
  // no hashchange would).
  nav.replaceChildren(el("h2", {}, "Inboxes"), el("ul", {}, inboxList.map((b) =>
    el("li", {}, el("a", { href: "#/i/" + enc(b.inbox_id), class: b.inbox_id === current ? "current" : "",
      "aria-current": b.inbox_id === current ? "page" : undefined,
      onclick: (ev) => { if (ev.currentTarget.getAttribute("href") === location.hash) { ev.preventDefault(); route(); } } },
    b.display_name || b.inbox_id)))));
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
    sel("status", "Status", ["accepted", "quarantined", "duplicate", "blocked"]),
    inp("error", "Error", "any code"),
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
  S.refresh = null; S.thread = ""; S.dirty = false;
  $("crumb").textContent = inbox;
  window.scrollTo(0, 0);
  const list = el("ol", { id: "list", class: "msgs" });
  const more = el("button", { id: "more", type: "button", hidden: true }, "Older messages");
  const count = el("span", { id: "count", class: "muted" });
  $("pane").replaceChildren(viewTabs(inbox, "i"), filterForm(inbox, f), el("div", { class: "listhead" }, count), list, more);
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
  // Catch up: an event seen while the list loaded names mail the list's
  // answer may not hold (it was computed before): fetch the head again.
  if (S.dirty) onLive();
}

function append(list, msgs, top) {
  const rows = [];
  for (const m of msgs) {
    const id = m.envelopay?.id;
    if (id && S.ids.has(id)) {
      // Shown already: its verdicts may have moved (a payment verified).
      const old = list.querySelector('li[data-id="' + id + '"]');
      if (old && top) { const n = row(m, old.classList.contains("fresh")); if (!n.isEqualNode(old)) old.replaceWith(n); }
      continue;
    }
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
  append(list, l.messages, true);
}

// Live: the API's websocket (AgentMail's protocol: subscribe →
// subscribed, then events); when it is unavailable, polling every 2 s.

function setLive(text, cls) { const e = $("live"); e.hidden = false; e.textContent = text; e.className = "live " + cls; }

function stopLive() {
  if (S.ws) { S.ws.onclose = null; S.ws.close(); S.ws = null; }
  clearInterval(S.poll); S.poll = 0; S.wsInbox = "";
}

function onLive() {
  if (!S.refresh || S.running) { S.dirty = true; return; }
  S.running = true; S.dirty = false;
  S.refresh().catch(liveFail).finally(() => { S.running = false; if (S.dirty) onLive(); });
}

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
    ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/v0?api_key=" + enc(S.key) +
      (S.lastEvent ? "&last_event_id=" + enc(S.lastEvent) : ""));
  } catch { startPolling(); return; }
  S.ws = ws;
  let subscribed = false;
  ws.onopen = () => ws.send(JSON.stringify({ type: "subscribe", inbox_ids: [inbox], event_types: ["message.received", "message.sent", "payment.verified", "payment.rejected"] }));
  ws.onmessage = (ev) => {
    let m;
    try { m = JSON.parse(ev.data); } catch { return; }
    if (m.type === "subscribed") { subscribed = true; S.retry = 0; clearInterval(S.poll); S.poll = 0; setLive("live", "on"); onLive(); return; }
    if (m.type === "error") { startPolling(); return; }
    // message.received carries message, message.sent send,
    // message.delivered delivery, message.bounced bounce: each with
    // inbox_id and thread_id.
    // payment.verified and payment.rejected carry the message too.
    if (m.type === "event" && m.event_id) { S.lastEvent = m.event_id; document.body.dataset.lastEvent = m.event_id; }
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
  if (S.dirty) onLive();
}

// threadSig says what a thread's drawing depends on: its messages and
// their verdicts (a payment's state, labels).
function threadSig(msgs) {
  return msgs.map((m) => [m.envelopay?.id, m.envelopay?.status, m.envelopay?.payment?.state,
    m.envelopay?.payment?.confirmations, (m.labels || []).join(",")].join("/")).join(" ");
}

// refreshThread draws the thread again when it has new messages (live),
// the new steps highlighted, the page where it was.
async function refreshThread(inbox, thread, gen) {
  const t = await api("/inboxes/" + enc(inbox) + "/threads/" + enc(thread) + "?limit=1000");
  if (gen !== S.gen) return;
  const shown = new Set([...document.querySelectorAll("#timeline .step")].map((e) => e.id));
  if ($("timeline")?.dataset.sig === threadSig(t.messages || [])) return;
  const focus = document.querySelector(".step.focus")?.id.replace(/^step-/, "") || "";
  const y = window.scrollY;
  // An open panel (a reply being written, labels, the hand-off) stays as
  // it is across the redraw.
  const kept = [];
  for (const st of document.querySelectorAll("#timeline .step")) {
    const d = st.querySelector(".detail");
    if (d?.childNodes.length) kept.push([st.id, [...d.childNodes], st.querySelector('.actions [aria-pressed="true"]')?.dataset.action]);
  }
  drawThread(inbox, thread, t, focus, shown);
  for (const [id, nodes, pressed] of kept) {
    const st = document.getElementById(id);
    if (!st) continue;
    st.querySelector(".detail").replaceChildren(...nodes);
    st.querySelector('.actions [data-action="' + pressed + '"]')?.setAttribute("aria-pressed", "true");
  }
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
    el("div", { id: "timeline", class: "timeline", dataset: { sig: threadSig(msgs) } }, steps));
  if (shown) for (const e of document.querySelectorAll("#timeline .step")) if (!shown.has(e.id)) e.classList.add("fresh");
  const target = focus && document.getElementById("step-" + focus);
  if (target) {
    target.classList.add("focus");
    if (!shown) target.scrollIntoView({ block: "start" });
  }
}

// Actions, each one request of the HTTP API the SDKs use.

// TEMPLATE is a reply body to start from, per type; refs name the message
// answered (ORDER ← METHODS, FULFILL ← ORDER, ACCEPT ← OFFER, OOPS ← any).
function template(type, to) {
  const b = { v: "0.2.0", type, id: type.slice(0, 3) + "_" + Math.random().toString(36).slice(2, 8), note: "" };
  const eid = to.envelopay?.body?.id;
  const ref = { fulfill: "order_ref", accept: "offer_ref", oops: "ref", invoice: "order_ref", pay: "invoice_ref" }[type];
  if (ref && typeof eid === "string") b[ref] = eid;
  return JSON.stringify(b, null, 2);
}

// checkBody is the check made before sending: JSON, an object, the type
// picked, v and id present. The API checks the rest (refs, duplicates,
// amounts) and refuses an invalid message unless force is set.
function checkBody(text, type) {
  let b;
  try { b = JSON.parse(text); } catch (e) { return ["The body is not valid JSON (invalid_json): " + e.message]; }
  const out = [];
  if (!b || typeof b !== "object" || Array.isArray(b)) return ["The body must be a JSON object (invalid_json)"];
  if (b.type !== type) out.push("The body's type is " + JSON.stringify(b.type) + ", not the type picked (" + type + ") (type_mismatch)");
  if (typeof b.v !== "string") out.push("v is missing: the Envelopay version, e.g. \"0.2.0\" (missing_field)");
  if (typeof b.id !== "string" || !b.id) out.push("id is missing: this message's own id (missing_field)");
  return out;
}

function replyForm(inbox, m) {
  const type = el("select", { name: "type", "aria-label": "Envelopay type" },
    TYPES.map((t) => el("option", { value: t }, t.toUpperCase())), el("option", { value: "" }, "plain text"));
  const text = el("textarea", { name: "body", rows: "8", spellcheck: "false", "aria-label": "reply body" });
  const out = el("div", { class: "outcome", "aria-live": "polite" });
  const fill = () => { text.value = type.value ? template(type.value, m) : ""; out.replaceChildren(); };
  type.addEventListener("change", fill);
  fill();
  const path = "/inboxes/" + enc(inbox) + "/messages/" + enc(m.message_id) + "/reply";
  const send = async (force) => {
    out.replaceChildren();
    if (type.value) {
      const bad = checkBody(text.value, type.value);
      if (bad.length) { out.replaceChildren(el("div", { class: "refused", role: "alert" }, el("p", {}, "Not sent: fix these first."), el("ul", {}, bad.map((x) => el("li", {}, x))))); return; }
    }
    const res = await call("POST", path + (force ? "?force=true" : ""), { text: text.value });
    if (res.ok) {
      out.replaceChildren(el("p", { class: "sent-ok" }, "Sent " + (res.body?.envelopay?.type || "mail").toUpperCase() +
        (res.body?.envelopay?.forced ? " (forced: invalid, sent anyway)" : "") + " as " + (res.body?.message_id || "")));
      return;
    }
    out.replaceChildren(refusal(res));
    if (res.status === 400 && res.body?.name === "ValidationError" && Array.isArray(res.body.errors) && type.value) {
      // The API's force rule, shown: an invalid Envelopay message is
      // refused unless the request says force: true.
      out.append(el("p", { class: "force" }, "The API refuses an invalid Envelopay message unless the request sets ",
        el("code", {}, "force: true"), "; forced, it is sent as written and its recipient sees these errors. ",
        el("button", { type: "button", "data-action": "force", onclick: () => send(true).catch(fail) }, "Send anyway (force)")));
    }
  };
  // Save as draft: the same check, then a draft answering m (in_reply_to),
  // sent later from the Drafts view (where the API's force rule applies
  // again, at send time).
  const save = async () => {
    out.replaceChildren();
    if (type.value) {
      const bad = checkBody(text.value, type.value);
      if (bad.length) { out.replaceChildren(el("div", { class: "refused", role: "alert" }, el("p", {}, "Not saved: fix these first."), el("ul", {}, bad.map((x) => el("li", {}, x))))); return; }
    }
    const res = await call("POST", "/inboxes/" + enc(inbox) + "/drafts", { in_reply_to: m.message_id, text: text.value });
    if (!res.ok) { out.replaceChildren(refusal(res)); return; }
    out.replaceChildren(el("p", { class: "sent-ok" }, "Saved as draft ",
      el("a", { href: "#/d/" + enc(inbox) + "/" + enc(res.body.draft_id), class: "draftlink" }, res.body.draft_id), " (not sent)"));
  };
  return el("form", { class: "act reply", onsubmit: (ev) => { ev.preventDefault(); send(false).catch(fail); } },
    el("label", {}, "Type ", type), text,
    el("div", { class: "row" }, el("button", { type: "submit", "data-action": "send" }, "Check and send"),
      el("button", { type: "button", "data-action": "save-draft", onclick: () => save().catch(fail) }, "Save as draft"),
      el("span", { class: "muted" }, "replies from " + inbox + " to " + (m.from || ""))), out);
}

const COMPUTED = ["received", "sent", "accepted", "quarantined", "duplicate", "unread", "read", "blocked", "draft"];

function labelForm(inbox, m) {
  const path = "/inboxes/" + enc(inbox) + "/messages/" + enc(m.message_id);
  const list = el("span", { class: "labels" });
  const out = el("div", { class: "outcome", "aria-live": "polite" });
  const draw = (labels) => list.replaceChildren(...labels.filter((l) => !COMPUTED.includes(l)).map((l) =>
    el("span", { class: "badge label", dataset: { label: l } }, l, " ",
      el("button", { type: "button", class: "x", "aria-label": "remove label " + l, onclick: () => patch({ remove_labels: [l] }) }, "×"))));
  const patch = async (u) => {
    out.replaceChildren();
    const res = await call("PATCH", path, u).catch((e) => { fail(e); return null; });
    if (!res) return;
    if (!res.ok) { out.replaceChildren(refusal(res)); return; }
    m.labels = res.body.labels || [];
    draw(m.labels);
  };
  draw(m.labels || []);
  const name = el("input", { name: "label", placeholder: "new label", autocomplete: "off", spellcheck: "false", "aria-label": "label" });
  return el("form", { class: "act labels-form", onsubmit: (ev) => { ev.preventDefault(); if (name.value.trim()) patch({ add_labels: [name.value.trim()] }).then(() => { name.value = ""; }); } },
    list, name, el("button", { type: "submit", "data-action": "add-label" }, "Add label"), out);
}

// valueBearing: a message that carries value (a payment proof or an
// amount), whose hand-off a person may want to hold.
function valueBearing(ep) {
  const b = ep.body;
  return !!ep.payment || !!(b && typeof b === "object" && (b.proof !== undefined || b.amount !== undefined || b.give !== undefined));
}

async function handoffPanel(inbox, m) {
  const path = "/inboxes/" + enc(inbox) + "/messages/" + enc(m.message_id);
  const box = el("div", { class: "act handoff" });
  const draw = (res) => {
    if (!res.ok) { box.replaceChildren(refusal(res), buttons()); return; }
    const hs = res.body.handoffs || [];
    box.replaceChildren(
      hs.length ? el("ul", { class: "handoffs" }, hs.map((h) => el("li", { dataset: { state: h.state, held: String(!!h.held) } },
        h.target + ": " + (h.held ? "held by " + h.held_by.replace(",", " and ") : h.state) +
        (h.held_by?.includes("payment") ? " (until the payment is verified)" : "") +
        (h.last_error ? " — " + h.last_error : "")))) : el("p", { class: "muted" }, "No hand-off: no agent is handed this message (serve --exec/--webhook)."),
      buttons());
  };
  const act = async (what) => draw(await call("POST", path + "/" + what));
  const buttons = () => el("div", { class: "row" },
    el("button", { type: "button", "data-action": "hold", onclick: () => act("hold").catch(fail) }, "Hold the hand-off"),
    el("button", { type: "button", "data-action": "release", onclick: () => act("release").catch(fail) }, "Release"));
  draw(await call("GET", path + "/handoffs"));
  return box;
}

// addrs are addresses, each kept whole on one line (style.css .addr).
function addrs(list) {
  return list.flatMap((a, i) => [i ? ", " : null, el("span", { class: "addr", title: a }, a)]);
}

function step(inbox, m, byEid, stepHref) {
  const ep = m.envelopay || {};
  const body = ep.body && typeof ep.body === "object" ? ep.body : null;
  const rows = [];
  if (body) {
    for (const [k, v] of Object.entries(body)) {
      if (k === "v" || k === "type") continue;
      let val = fieldValue(v);
      if (k === "amount" && body.token !== undefined) val = money(v, body.token, body.chain);
      if ((k === "want" || k === "give") && v && typeof v === "object" && v.amount !== undefined) {
        val = el("div", {}, money(v.amount, v.token, v.chain), fieldValue(v));
      }
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
    const paid = moneyText(body.amount, body.token, body.chain);
    const wanted = want ? moneyText(want.amount, want.token, want.chain) : "";
    if (cs.includes("amount_mismatch")) checks.push(el("p", { class: "check bad" }, "✗ " + SAY.amount_mismatch + " (amount_mismatch): pays " + paid + (wanted ? "; the OFFER wants " + wanted : "")));
    else if (offer) checks.push(el("p", { class: "check ok" }, "✓ pays " + paid + " = the OFFER's want " + wanted));
    else checks.push(el("p", { class: "check unknown" }, "? pays " + paid + "; its OFFER is not in this thread"));
  }
  const proof = body ? (body.proof ?? body.give?.proof) : undefined;
  if (proof !== undefined) {
    const dup = (ep.errors || []).find((p) => p.code === "duplicate_proof");
    checks.push(el("p", { class: "check " + (dup ? "bad" : "ok"), title: JSON.stringify(proof) },
      dup ? "✗ proof seen before (duplicate_proof)" : "✓ proof first seen here",
      dup?.ref ? [" — ", el("a", { class: "dupref", href: "#/m/" + enc(inbox) + "/" + enc(dup.ref) }, "the earlier message")] : null));
    // Seen first here is not paid: the payment's state says whether the
    // chain showed the money (docs/payments.md).
    const pay = ep.payment;
    if (pay) {
      const cls = pay.state === "verified" ? "ok" : ["pending", "unverified"].includes(pay.state) ? "unknown" : "bad";
      const mark = cls === "ok" ? "✓" : cls === "bad" ? "✗" : "?";
      const x = explorerURL(pay.chain, pay.tx);
      checks.push(el("p", { class: "check pay " + cls, title: paymentTitle(pay) },
        mark + " payment " + pay.state + ": " + PAY_SAY[pay.state] +
        (pay.confirmations ? " (" + pay.confirmations + " confirmations)" : "") + (pay.reason ? " — " + pay.reason : ""),
        pay.paid ? [" · paid ", money(pay.paid, pay.token, pay.chain)] : null,
        x ? [" · ", el("a", { class: "explorer", href: x, target: "_blank", rel: "noopener noreferrer" }, "transaction on " + pay.chain + " ↗")] : null));
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
    show("Reply", async () => replyForm(inbox, m)),
    show("Labels", async () => labelForm(inbox, m)),
    valueBearing(ep) ? show("Hand-off", async () => handoffPanel(inbox, m)) : null,
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
      el("span", { class: "who" }, addrs([m.from]), " → ", addrs(m.to || [])),
      el("time", { datetime: m.timestamp }, fmtTime(m.timestamp))),
    el("div", { class: "badges" }, verdictBadges(m)),
    rows.length ? el("dl", { class: "fields" }, rows) : null,
    checks, actions, detail);
}

// The views of an inbox: its messages, its drafts, its allow and block
// lists.
function viewTabs(inbox, cur) {
  return el("nav", { class: "views", "aria-label": "views of " + inbox }, [["i", "Messages"], ["d", "Drafts"], ["l", "Allow / block"]].map(([k, name]) =>
    el("a", { href: "#/" + k + "/" + enc(inbox), class: k === cur ? "current" : "", "aria-current": k === cur ? "page" : undefined, "data-view": k }, name)));
}

// Drafts: GET/POST/PATCH/DELETE /v0/inboxes/{inbox}/drafts[/{id}], POST
// …/{id}/send (docs/api.md#drafts). send_at is shown and typed in the
// person's local time and sent as RFC 3339 in UTC.

const ZONE = Intl.DateTimeFormat().resolvedOptions().timeZone || "local time";
const pad2 = (n) => String(n).padStart(2, "0");

// localInput writes an instant as a datetime-local value (local time).
function localInput(iso) {
  const d = new Date(iso);
  if (isNaN(d)) return "";
  return d.getFullYear() + "-" + pad2(d.getMonth() + 1) + "-" + pad2(d.getDate()) + "T" + pad2(d.getHours()) + ":" + pad2(d.getMinutes()) + ":" + pad2(d.getSeconds());
}

// utcOffset is the local zone's offset from UTC at d ("UTC+05:30").
function utcOffset(d) {
  const m = -d.getTimezoneOffset(), a = Math.abs(m);
  return "UTC" + (m < 0 ? "-" : "+") + pad2(Math.floor(a / 60)) + ":" + pad2(a % 60);
}

// localText writes an instant for a person: local date and time, the
// offset (the API keeps it in UTC: send_at, in the tooltip).
function localText(iso) {
  const d = new Date(iso);
  return isNaN(d) ? "" : localInput(iso).replace("T", " ") + " " + utcOffset(d);
}

function draftState(d) {
  if (d.send_status === "scheduled" && d.send_at) return el("span", { class: "badge sched", title: "send_at " + d.send_at }, "scheduled for " + localText(d.send_at));
  if (d.send_status === "failed") return el("span", { class: "badge err", title: d.error || "" }, "scheduled send refused: " + (d.error || ""));
  return el("span", { class: "badge" }, "not scheduled");
}

async function renderDrafts(inbox, id, gen) {
  $("crumb").textContent = inbox + " › drafts";
  window.scrollTo(0, 0);
  const base = "/inboxes/" + enc(inbox) + "/drafts";
  if (id) {
    const d = id === "new" ? null : await api(base + "/" + enc(id));
    if (gen !== S.gen) return;
    $("pane").replaceChildren(viewTabs(inbox, "d"), el("p", {}, el("a", { href: "#/d/" + enc(inbox), class: "back" }, "← drafts of " + inbox)), draftForm(inbox, d));
    return;
  }
  const l = await api(base + "?limit=100");
  if (gen !== S.gen) return;
  const ds = l.drafts || [];
  $("pane").replaceChildren(viewTabs(inbox, "d"),
    el("p", {}, el("a", { href: "#/d/" + enc(inbox) + "/new", class: "new-draft" }, "New draft")),
    ds.length ? el("ol", { id: "drafts", class: "msgs" }, ds.map((d) => el("li", { class: "msg draft", dataset: { id: d.draft_id } },
      el("a", { href: "#/d/" + enc(inbox) + "/" + enc(d.draft_id) },
        el("span", { class: "when" }, el("time", { datetime: d.updated_at, title: "last edited" }, fmtTime(d.updated_at))),
        el("span", { class: "who" }, d.in_reply_to ? "reply to " + d.in_reply_to : "→ " + (d.to || []).join(", ")),
        el("span", { class: "what" }, el("span", { class: "note" }, (d.subject || "") + (d.subject && d.preview ? " — " : "") + (d.preview || ""))),
        el("span", { class: "badges" }, draftState(d))))))
      : el("p", { id: "drafts-empty", class: "muted" }, "No drafts in " + inbox + "."),
    l.next_page_token ? el("p", { class: "muted" }, "The 100 newest drafts are shown.") : null);
}

function draftForm(inbox, d) {
  const base = "/inboxes/" + enc(inbox) + "/drafts";
  const id = () => d?.draft_id || "";
  const addrField = (name, label, v) => el("label", {}, label, el("input", { name, value: (v || []).join(", "), autocomplete: "off", spellcheck: "false", placeholder: "a@b.example, …" }));
  const form = el("form", { class: "act draft-form" },
    d?.in_reply_to ? el("p", { class: "muted" }, "A reply to ", el("code", {}, d.in_reply_to), ": sent to its sender, in its thread.") : null,
    d?.in_reply_to ? null : addrField("to", "To", d?.to),
    d?.in_reply_to ? null : addrField("cc", "Cc", d?.cc),
    d?.in_reply_to ? null : el("label", {}, "Subject", el("input", { name: "subject", value: d?.subject || "", autocomplete: "off" })),
    el("label", {}, "Text (an Envelopay message is its JSON)", el("textarea", { name: "text", rows: "8", spellcheck: "false" }, d?.text || "")),
    el("label", {}, "Send at (your time: " + ZONE + ", " + utcOffset(new Date()) + ")", el("span", { class: "row" },
      el("input", { name: "send_at", type: "datetime-local", step: "1", value: d?.send_at ? localInput(d.send_at) : "" }),
      el("span", { class: "muted" }, "empty: not scheduled"))),
    d ? el("p", { class: "state" }, draftState(d)) : null);
  const out = el("div", { class: "outcome", "aria-live": "polite" });
  const v = (n) => form.querySelector('[name="' + n + '"]')?.value.trim() ?? null;
  const list = (n) => { const s = v(n); return s === null ? undefined : s ? s.split(/[,;\s]+/).filter(Boolean) : []; };
  // body is the draft's fields as the API takes them; send_at typed in
  // local time becomes an instant (RFC 3339, UTC). Emptying it on a
  // scheduled draft unschedules it (the zero time: the API's "not
  // scheduled").
  const body = () => {
    const b = { text: form.querySelector('[name="text"]').value };
    if (!d?.in_reply_to) { b.to = list("to"); b.cc = list("cc"); b.subject = v("subject"); }
    const at = v("send_at");
    if (at) {
      const t = new Date(at);
      if (isNaN(t)) throw new Error("send_at: not a date and time");
      b.send_at = t.toISOString();
    } else if (d?.send_at) b.send_at = "0001-01-01T00:00:00Z";
    return b;
  };
  const save = async () => {
    out.replaceChildren();
    let b;
    try { b = body(); } catch (e) { out.replaceChildren(el("div", { class: "refused", role: "alert" }, e.message)); return null; }
    const res = id() ? await call("PATCH", base + "/" + enc(id()), b) : await call("POST", base, b);
    if (!res.ok) { out.replaceChildren(refusal(res)); return null; }
    return res.body;
  };
  const send = async (force) => {
    // The fields as shown are saved first, then sent.
    const saved = await save();
    if (!saved) return;
    d = saved;
    const res = await call("POST", base + "/" + enc(id()) + "/send" + (force ? "?force=true" : ""), {});
    if (res.ok) {
      out.replaceChildren(el("p", { class: "sent-ok" }, "Sent " + (res.body?.envelopay?.type || "mail").toUpperCase() +
        (res.body?.envelopay?.forced ? " (forced: invalid, sent anyway)" : "") + " as " + (res.body?.message_id || "") + "; the draft is gone."),
        el("p", {}, el("a", { href: "#/d/" + enc(inbox) }, "← drafts")));
      for (const b of form.querySelectorAll("button")) b.disabled = true;
      return;
    }
    out.replaceChildren(refusal(res));
    if (res.status === 400 && res.body?.name === "ValidationError" && Array.isArray(res.body.errors) && res.body.errors.length) {
      out.append(el("p", { class: "force" }, "The API refuses an invalid Envelopay message unless the send sets ",
        el("code", {}, "force: true"), "; forced, it is sent as written and its recipient sees these errors. ",
        el("button", { type: "button", "data-action": "force", onclick: () => send(true).catch(fail) }, "Send anyway (force)")));
    }
  };
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    try {
      const saved = await save();
      if (!saved) return;
      if (!id()) { location.replace("#/d/" + enc(inbox) + "/" + enc(saved.draft_id)); return; }
      d = saved;
      form.querySelector(".state")?.replaceChildren(draftState(d));
      out.replaceChildren(el("p", { class: "sent-ok" }, "Saved" + (d.send_status === "scheduled" ? ": scheduled for " + localText(d.send_at) : "") + "."));
    } catch (e) { fail(e); }
  });
  form.append(el("div", { class: "row" },
    el("button", { type: "submit", "data-action": "save" }, d ? "Save" : "Save draft"),
    d ? el("button", { type: "button", "data-action": "send-now", onclick: () => send(false).catch(fail) }, "Send now") : null,
    d ? el("button", { type: "button", "data-action": "delete", onclick: async () => {
      out.replaceChildren();
      const res = await call("DELETE", base + "/" + enc(id())).catch((e) => { fail(e); return null; });
      if (!res) return;
      if (!res.ok) { out.replaceChildren(refusal(res)); return; }
      location.hash = "#/d/" + enc(inbox);
    } }, "Delete") : null), out);
  return form;
}

// Allow and block lists of an inbox: /v0/inboxes/{inbox}/lists/{direction}/{type}
// (docs/api.md#allow-and-block-lists).

const DIRECTIONS = [
  ["receive", "Receiving", "mail from these senders"],
  ["send", "Sending", "mail to these recipients"],
  ["reply", "Replies", "mail in threads this inbox has written in"],
];

async function renderLists(inbox, gen) {
  $("crumb").textContent = inbox + " › allow / block";
  window.scrollTo(0, 0);
  const sections = await Promise.all(DIRECTIONS.map(async ([dir, title, what]) =>
    el("section", { class: "listdir", dataset: { direction: dir } }, el("h2", {}, title),
      el("div", { class: "listpair" }, await Promise.all(["allow", "block"].map((typ) => listBox(inbox, dir, typ, what)))))));
  if (gen !== S.gen) return;
  $("pane").replaceChildren(viewTabs(inbox, "l"),
    el("p", { class: "muted rule" }, "An entry is an address (name@example.com) or a domain (example.com). A block entry refuses what it matches; a non-empty allow list refuses everything it does not match. Refused sends are not sent; refused mail is kept, with the label ",
      el("code", {}, "blocked"), ". The inbox's lists decide when they hold any entry for the direction, the organisation's otherwise."),
    ...sections);
}

async function listBox(inbox, dir, typ, what) {
  const path = "/inboxes/" + enc(inbox) + "/lists/" + dir + "/" + typ;
  const ul = el("ul", { class: "entries" });
  const out = el("div", { class: "outcome", "aria-live": "polite" });
  const item = (e) => el("li", { dataset: { entry: e.entry } }, el("span", { class: "addr", title: e.entry }, e.entry),
    e.reason ? el("span", { class: "muted" }, " — " + e.reason) : null, " ",
    el("button", { type: "button", class: "x", "aria-label": "remove " + e.entry, "data-action": "remove-entry", onclick: async (ev) => {
      out.replaceChildren();
      const li = ev.currentTarget.closest("li");
      const res = await call("DELETE", path + "/" + enc(e.entry)).catch((err) => { fail(err); return null; });
      if (!res) return;
      if (!res.ok) { out.replaceChildren(refusal(res)); return; }
      li.remove();
    } }, "×"));
  const res = await call("GET", path + "?limit=100");
  if (res.ok) ul.replaceChildren(...(res.body.entries || []).map(item));
  else out.replaceChildren(refusal(res));
  const entry = el("input", { name: "entry", placeholder: "address or domain", autocomplete: "off", spellcheck: "false", "aria-label": dir + " " + typ + " entry" });
  const reason = el("input", { name: "reason", placeholder: "reason (optional)", autocomplete: "off", "aria-label": "reason" });
  const form = el("form", { class: "act list-form", dataset: { list: dir + "-" + typ }, onsubmit: async (ev) => {
    ev.preventDefault();
    out.replaceChildren();
    if (!entry.value.trim()) return;
    const r = await call("POST", path, { entry: entry.value.trim(), reason: reason.value.trim() || undefined }).catch((e) => { fail(e); return null; });
    if (!r) return;
    if (!r.ok) { out.replaceChildren(refusal(r)); return; }
    ul.querySelector('li[data-entry="' + CSS.escape(r.body.entry) + '"]')?.remove();
    ul.append(item(r.body));
    entry.value = ""; reason.value = "";
  } },
  el("h3", {}, typ === "allow" ? "Allow" : "Block", el("span", { class: "muted" }, " — " + what)),
  ul, el("div", { class: "row" }, entry, reason, el("button", { type: "submit", "data-action": "add-entry" }, typ === "allow" ? "Allow" : "Block")), out);
  return form;
}

route();
