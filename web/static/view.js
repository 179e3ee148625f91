// Rendering helpers of the web inbox. Every piece of mail content goes
// into the page as text (textContent / attribute values), never as
// markup.

export const TYPES = ["which", "methods", "order", "fulfill", "pay", "invoice", "offer", "accept", "oops"];

// el builds an element: el("a", {href, class}, child, "text", …).
export function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(e.dataset, v);
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

export function fmtTime(iso) {
  const d = new Date(iso);
  if (isNaN(d)) return "";
  const now = new Date();
  const pad = (n) => String(n).padStart(2, "0");
  const hm = pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds());
  if (d.toDateString() === now.toDateString()) return hm;
  return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " + hm;
}

function badge(text, cls, title) {
  return el("span", { class: "badge " + (cls || ""), title: title || undefined }, text);
}

// codes are the error and warning codes of a message's verdict.
export function codes(ep) {
  return [...(ep?.errors || []), ...(ep?.warnings || [])].map((p) => p.code);
}

// The token registry and block explorers the server serves (GET
// /v0/tokens, docs/api.md): amounts are written in a token's units only
// when its decimals come from there.
let CHAINS = { tokens: [], explorers: {} };
export function setChains(c) { CHAINS = { tokens: c?.tokens || [], explorers: c?.explorers || {} }; }

// lookupToken finds the token a mail names on chain, as the server's
// registry does (payments/rail Resolve): the native coin, a contract
// address or mint, or a symbol only one token on that chain has.
export function lookupToken(chain, token) {
  if (typeof chain !== "string" || typeof token !== "string") return null;
  chain = chain.trim().toLowerCase(); token = token.trim();
  const on = CHAINS.tokens.filter((t) => t.chain === chain);
  const solana = chain.startsWith("solana");
  const byAddr = on.find((t) => t.address && (solana ? t.address === token : t.address.toLowerCase() === token.toLowerCase()));
  if (byAddr) return byAddr;
  const bySym = on.filter((t) => t.symbol.toUpperCase() === token.toUpperCase());
  return bySym.length === 1 ? bySym[0] : null;
}

// formatUnits writes a smallest-unit amount ("30000000") in whole units
// ("30") for decimals; "" when amount is not digits (at most 78: a uint256).
export function formatUnits(amount, decimals) {
  if (typeof amount !== "string" || !/^[0-9]{1,78}$/.test(amount) || !Number.isInteger(decimals) || decimals < 0 || decimals > 36) return "";
  let d = amount.replace(/^0+(?=.)/, "");
  if (decimals === 0) return d;
  if (d.length <= decimals) d = "0".repeat(decimals - d.length + 1) + d;
  const whole = d.slice(0, d.length - decimals), frac = d.slice(d.length - decimals).replace(/0+$/, "");
  return frac ? whole + "." + frac : whole;
}

// money is an amount for a person: "30 USDC on base", the raw smallest
// units on hover (title) and in data-raw; a token the registry does not
// know is shown raw ("30000000 0xabc… on base").
export function money(amount, token, chain) {
  const raw = String(amount ?? "") + " " + String(token ?? "");
  const t = lookupToken(chain, token);
  const units = t ? formatUnits(String(amount ?? ""), t.decimals) : "";
  const on = typeof chain === "string" && chain ? " on " + chain : "";
  if (units) return el("span", { class: "money", title: raw.trim() + " (smallest units" + on + ")", dataset: { raw: String(amount) } }, units + " " + t.symbol + on);
  return el("span", { class: "money raw", title: "token not in the registry: amount in smallest units", dataset: { raw: String(amount ?? "") } }, raw.trim() + on);
}

// moneyText is money's text.
export function moneyText(amount, token, chain) { return money(amount, token, chain).textContent; }

// amount is what a type carries: PAY, INVOICE, ACCEPT their amount; OFFER
// what it wants; null when none.
export function amount(ep) {
  const b = ep?.body;
  if (!b || typeof b !== "object") return null;
  if (b.amount !== undefined && b.token !== undefined) return money(b.amount, b.token, b.chain);
  if (b.want && typeof b.want === "object" && b.want.amount !== undefined) return el("span", {}, "wants ", money(b.want.amount, b.want.token, b.want.chain));
  return null;
}

// explorerURL is the block explorer's page of a transaction ("" when
// the server names no explorer for the chain).
export function explorerURL(chain, tx) {
  const u = CHAINS.explorers[chain];
  return u && tx ? u.split("{tx}").join(encodeURIComponent(tx)) : "";
}

// SAY is every code as a short sentence for a person (the code is shown
// beside it).
export const SAY = {
  amount_mismatch: "The amount is not the one asked for",
  analysis_too_large: "Too large to analyse",
  bad_signature: "A signature does not verify",
  chain_fork: "Forks a chain of messages already seen",
  consent_blocked: "The recipient blocked this sender",
  consent_required: "The recipient has not agreed to hear from this sender",
  dkim_failed: "The DKIM signature does not verify: the mail may be forged",
  dmarc_failed: "The sender's domain disowns this mail (DMARC)",
  duplicate_id: "This Envelopay id was used before",
  duplicate_proof: "This payment proof was presented before",
  idempotency_conflict: "The same request key was used with other content",
  insufficient_funds: "Not enough funds",
  invalid_field: "A field has a value that is not allowed",
  invalid_json: "The body is not valid JSON",
  json_too_deep: "The JSON is nested too deeply",
  json_too_large: "The JSON is too large",
  missing_field: "A required field is missing",
  missing_wallet: "No wallet to pay is named",
  not_envelopay: "Not an Envelopay message",
  oops_suppressed: "An OOPS was owed to the sender but not sent",
  replay_detected: "Seen before: a replay",
  retry: "A resend of a message already stored",
  stale_timestamp: "The timestamp is too old",
  too_many_attachments: "Too many attachments",
  too_many_parts: "Too many MIME parts",
  proof_malformed: "The proof's transaction cannot exist on any chain",
  proof_unrecognised: "No transaction found in the proof",
  tx_not_found: "The transaction is not on the chain",
  type_mismatch: "Its type does not answer the message it refers to",
  unauthorized: "The sender may not do this",
  unknown_key: "Signed with a key not known here",
  unknown_ref: "Refers to a message not seen here",
  unknown_type: "Not an Envelopay type",
  unsupported_version: "A protocol version not supported",
};

// PAY_SAY says what each payment state means (docs/payments.md).
export const PAY_SAY = {
  unverified: "Payment not checked (no rail for this chain)",
  pending: "Payment being checked on the chain",
  verified: "Paid: the chain shows the money",
  mismatch: "The transaction does not pay what was asked",
  failed: "The transaction failed on the chain",
  not_found: "The transaction is not on the chain",
  duplicate: "Proof used before: not checked again",
};

// say is a sentence with its code beside it.
function say(sentence, code) {
  return [el("span", { class: "say" }, sentence || code), " ", el("code", { class: "code" }, code)];
}

// go is a link inside a badge (the list's rows are links themselves, and
// links do not nest): a span acting as one.
function go(text, href, external) {
  const open = (ev) => {
    ev.preventDefault(); ev.stopPropagation();
    if (external) window.open(href, "_blank", "noopener,noreferrer"); else location.hash = href.replace(/^#/, "");
  };
  return el("span", { class: "golink", role: "link", tabindex: "0", "data-href": href, onclick: open,
    onkeydown: (ev) => { if (ev.key === "Enter") open(ev); } }, text);
}

// verdictBadges are the badges of a message: status, DKIM per signature,
// the sender verdict (authenticated_as, or "unauthenticated"),
// error and warning codes, tunnelled protocols and their verdicts.
export function verdictBadges(m) {
  const ep = m.envelopay || {};
  const out = [];
  const st = ep.status || (m.labels || []).find((l) => ["accepted", "quarantined", "duplicate"].includes(l));
  if (st) out.push(badge(st, "st-" + st, "status"));
  // Refused by the inbox's allow/block lists: kept, labelled blocked
  // (docs/api.md#allow-and-block-lists).
  if ((m.labels || []).includes("blocked")) {
    const b = badge("", "blocked err", "label blocked: the sender is refused by the inbox's (or the organisation's) allow/block lists");
    b.append(...say("Blocked: the allow/block lists refuse this sender", "blocked"));
    out.push(b);
  }
  const pay = ep.payment;
  if (pay) {
    const b = badge("", "pay pay-" + pay.state, paymentTitle(pay));
    b.append(...say(PAY_SAY[pay.state] + (pay.state === "pending" && pay.confirmations ? " (" + pay.confirmations + " confirmations)" : ""), "payment " + pay.state));
    const x = explorerURL(pay.chain, pay.tx);
    if (x) b.append(" ", go("tx ↗", x, true));
    out.push(b);
  }
  const sigs = ep.dkim || [];
  if (ep.direction === "out") out.push(badge("sent", "sent", "sent by envelopd (signed on the way out)"));
  else if (sigs.length === 0) out.push(badge("no DKIM", "dkim-none", "no DKIM signature"));
  for (const s of sigs) {
    const ok = s.result === "pass";
    out.push(badge("DKIM " + (s.domain || "?") + " " + s.result, ok ? "dkim-pass" : "dkim-fail",
      "d=" + s.domain + " s=" + s.selector + " a=" + s.algorithm + (s.error ? ": " + s.error : "")));
  }
  // The sender verdict: who the message is authenticated as, or why not.
  if (ep.direction !== "out" && ep.dmarc) {
    if (ep.authenticated_as) {
      const v = badge("", "auth-pass",
        "authenticated as " + ep.authenticated_as + " by " + ep.authenticated_by +
        "; SPF " + ep.spf + ", DMARC " + ep.dmarc.result + ", ARC " + (ep.arc ? ep.arc.result : "none"));
      v.append(...say("Sender authenticated as " + ep.authenticated_as, ep.authenticated_by + " · SPF " + ep.spf + " · DMARC " + ep.dmarc.result + " · ARC " + (ep.arc ? ep.arc.result : "none")));
      out.push(v);
    } else {
      const v = badge("", "auth-fail",
        "SPF " + ep.spf + ", DMARC " + ep.dmarc.result + (ep.dmarc.policy ? " (p=" + ep.dmarc.policy + ")" : "") +
        ", ARC " + (ep.arc ? ep.arc.result : "none") + (ep.dmarc.reason ? ": " + ep.dmarc.reason : ""));
      v.append(...say("Sender not authenticated", "SPF " + ep.spf + " · DMARC " + ep.dmarc.result + " · ARC " + (ep.arc ? ep.arc.result : "none")));
      out.push(v);
    }
  }
  for (const [p, cls] of [...(ep.errors || []).map((p) => [p, "err"]), ...(ep.warnings || []).map((p) => [p, "warn"])]) {
    const b = badge("", "code-" + p.code + " " + cls, (p.field ? p.field + ": " : "") + p.message);
    b.append(...say(SAY[p.code], p.code));
    // A duplicate links to the message it repeats.
    if (p.ref && m.inbox_id) b.append(" ", go("→ earlier message", "#/m/" + encodeURIComponent(m.inbox_id) + "/" + encodeURIComponent(p.ref)));
    out.push(b);
  }
  for (const a of ep.attachments || []) {
    if (!a.protocol) continue;
    const ok = a.valid && !(a.errors || []).length;
    out.push(badge(a.protocol + " " + (ok ? "valid" : "invalid"), ok ? "proto-ok" : "proto-bad",
      (a.filename || "") + (a.errors || []).map((p) => " " + p.code).join("")));
  }
  return out;
}

// paymentTitle says in a line what a payment object (docs/json.md) holds.
export function paymentTitle(p) {
  const facts = [p.chain, p.tx];
  if (p.amount) facts.push("asks " + moneyText(p.amount, p.token, p.chain) + " (" + p.amount + ")");
  if (p.paid) facts.push("paid " + moneyText(p.paid, p.token, p.chain) + " (" + p.paid + ")" + (p.to ? " to " + p.to : ""));
  if (p.from) facts.push("from " + p.from);
  if (p.confirmations) facts.push(p.confirmations + " confirmations");
  facts.push(p.authenticated ? "sender authenticated" : "sender not authenticated");
  return facts.filter(Boolean).join("; ") + (p.reason ? " — " + p.reason : "");
}

export function typeBadge(type) {
  return type ? badge(type.toUpperCase(), "type t-" + type) : badge("mail", "type t-none");
}

// fieldValue renders a body field: strings as text, objects as JSON.
export function fieldValue(v) {
  if (v === null || v === undefined) return el("span", { class: "muted" }, "null");
  if (typeof v === "object") return el("pre", { class: "json" }, JSON.stringify(v, null, 2));
  return el("span", {}, String(v));
}

// isRef tells the typed-ref fields of an Envelopay body (order_ref,
// offer_ref, invoice_ref, …, and OOPS's ref).
export function isRef(key) {
  return key === "ref" || key.endsWith("_ref");
}

// htmlFrame renders an HTML part in an iframe sandboxed without
// allow-scripts and allow-same-origin; its own CSP forbids every remote
// load (images only as data: URLs).
export function htmlFrame(html) {
  const f = el("iframe", { class: "html", sandbox: "", referrerpolicy: "no-referrer", title: "HTML part (sandboxed)" });
  f.srcdoc = "<!doctype html><meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data:; style-src 'unsafe-inline'\">" + html;
  return f;
}
