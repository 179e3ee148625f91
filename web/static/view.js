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

// amount is "AMOUNT TOKEN" of the types that carry one (PAY, INVOICE,
// ACCEPT: amount/token; OFFER: what it wants; ORDER: its amount if any).
export function amount(ep) {
  const b = ep?.body;
  if (!b || typeof b !== "object") return "";
  if (b.amount !== undefined && b.token !== undefined) return b.amount + " " + b.token;
  if (b.want && typeof b.want === "object" && b.want.amount !== undefined) return "wants " + b.want.amount + " " + (b.want.token || "");
  return "";
}

// verdictBadges are the badges of a message: status, DKIM per signature,
// the sender verdict (authenticated_as, or "unauthenticated"),
// error and warning codes, tunnelled protocols and their verdicts.
export function verdictBadges(m) {
  const ep = m.envelopay || {};
  const out = [];
  const st = ep.status || (m.labels || []).find((l) => ["accepted", "quarantined", "duplicate"].includes(l));
  if (st) out.push(badge(st, "st-" + st, "status"));
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
      out.push(badge("from " + ep.authenticated_as + " (" + ep.authenticated_by + ")", "auth-pass",
        "authenticated as " + ep.authenticated_as + " by " + ep.authenticated_by +
        "; SPF " + ep.spf + ", DMARC " + ep.dmarc.result + ", ARC " + (ep.arc ? ep.arc.result : "none")));
    } else {
      out.push(badge("unauthenticated", "auth-fail",
        "SPF " + ep.spf + ", DMARC " + ep.dmarc.result + (ep.dmarc.policy ? " (p=" + ep.dmarc.policy + ")" : "") +
        ", ARC " + (ep.arc ? ep.arc.result : "none") + (ep.dmarc.reason ? ": " + ep.dmarc.reason : "")));
    }
  }
  for (const p of ep.errors || []) out.push(badge(p.code, "err", (p.field ? p.field + ": " : "") + p.message));
  for (const p of ep.warnings || []) out.push(badge(p.code, "warn", (p.field ? p.field + ": " : "") + p.message));
  for (const a of ep.attachments || []) {
    if (!a.protocol) continue;
    const ok = a.valid && !(a.errors || []).length;
    out.push(badge(a.protocol + " " + (ok ? "valid" : "invalid"), ok ? "proto-ok" : "proto-bad",
      (a.filename || "") + (a.errors || []).map((p) => " " + p.code).join("")));
  }
  return out;
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
