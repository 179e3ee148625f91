// Package web serves envelopd's web inbox: a single page at /
// for people watching mail flows — inboxes, message lists with the
// verdicts (DKIM per signature, status, error codes, tunnelled
// protocols), threads as Envelopay timelines, raw source and .eml
// download — over the HTTP API under /v0, the same api.Service every
// front end uses (no query or rule of its own).
//
// The page and its assets (static/, embedded with embed, no CDN, no
// build step: plain ES modules) are public; they hold no data. Every
// piece of data comes from /v0 with the API key the person types into
// the login form, kept in the tab's sessionStorage and sent as a Bearer
// token (RFC 6750 §2.1); the live list uses the API's websocket at /v0
// with ?api_key= (AgentMail's websocket protocol).
//
// Every response carries a strict Content-Security-Policy (CSP Level 3:
// default-src 'self', no inline script or style, no third-party origin,
// frame-ancestors 'none'). Mail is shown as text (textContent, never
// innerHTML); an HTML part is rendered only in an iframe sandboxed
// without allow-scripts and without allow-same-origin, whose srcdoc
// carries its own CSP forbidding every remote load.
package web
