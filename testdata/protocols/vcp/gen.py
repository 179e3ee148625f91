#!/usr/bin/env python3
# Regenerates the vcp vectors in this directory (python3 gen.py). The .json
# files and their .expect files are what the Go tests read; this script is
# only how they were written; VCP claim values come from Python's own json.dumps and hashlib.
import os
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
import json, copy, os, hashlib
D = os.path.join(ROOT, "vcp")
os.makedirs(D, exist_ok=True)

search = '''{
  "protocol": "vcp",
  "version": "1.0",
  "msg_id": "msg_001",
  "ts": "2026-05-15T12:00:00Z",
  "from": "buyer:discovery",
  "to": "platform:aggregator",
  "session_id": "sess_abc",
  "in_reply_to": null,
  "idempotency_key": "idem_001",
  "signature": null,
  "action": {
    "kind": "commerce.search",
    "payload": {
      "query": "refurbished iphone 13 128gb",
      "constraints": { "delivery_days": 3 }
    }
  }
}
'''
offer = '''{
  "protocol": "vcp",
  "version": "1.0",
  "msg_id": "msg_042",
  "ts": "2026-05-15T12:03:11Z",
  "from": "merchant:pricing",
  "to": "buyer:negotiation",
  "session_id": "sess_abc",
  "in_reply_to": "msg_041",
  "idempotency_key": "idem_offer_7c1",
  "signature": null,
  "action": {
    "kind": "commerce.propose_offer",
    "payload": {
      "offer_id": "off_88",
      "merchant_id": "m_acme",
      "sku_id": "sku_iphone13_128",
      "qty": 1,
      "unit_price": 42900,
      "fulfillment": { "method": "courier", "eta_days": 2 },
      "claims": ["battery_health_88pct", "grade_a_refurb"],
      "expires_at": "2026-05-15T12:33:11Z",
      "idempotency_key": "idem_offer_7c1"
    }
  }
}
'''

def sumlines(env):
    out = []
    if not isinstance(env, dict):
        return out
    if isinstance(env.get("msg_id"), str): out.append("summary.id: " + env["msg_id"])
    for f in ("from", "to"):
        if isinstance(env.get(f), str): out.append("summary.%s: %s" % (f, env[f]))
    a = env.get("action")
    if isinstance(a, dict) and isinstance(a.get("kind"), str):
        out.append("summary.kind: " + a["kind"])
    return out

def goquote(s):
    out = '"'
    for ch in s:
        if ch == '"': out += '\\"'
        elif ch == '\\': out += '\\\\'
        elif ch == '\x00': out += '\\x00'
        elif ord(ch) < 0x20 or ch in '\u2028\u2029': raise ValueError(ch)
        else: out += ch
    return out + '"'

def claimline(body):
    # The second implementation: Python itself, as the VCP runtime does.
    b = body if isinstance(body, bytes) else body.encode()
    env = json.loads(b)
    key = env.get("idempotency_key")
    if not isinstance(key, str): return []
    req = {k: v for k, v in env.items() if k not in ("msg_id", "ts", "signature")}
    canon = json.dumps(req, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return ["claim: vcp_idem %s %s - idempotency_conflict" % (goquote(env["from"] + "\x00" + key), hashlib.sha256(canon.encode()).hexdigest())]

def write(name, body, valid, errors=(), comment=None, env=None, raw=False):
    with open(os.path.join(D, name + ".json"), "w" if not isinstance(body, bytes) else "wb") as f:
        f.write(body)
    lines = []
    if comment: lines.append("# " + comment)
    lines.append("protocol: vcp")
    lines.append("valid: " + ("true" if valid else "false"))
    for e in errors: lines.append("error: " + e)
    lines += sumlines(env)
    if valid: lines += claimline(body)
    with open(os.path.join(D, name + ".expect"), "w") as f:
        f.write("\n".join(lines) + "\n")

S = json.loads(search); O = json.loads(offer)
write("spec-commerce-search", search, True, comment="vcp-envelope.txt \"Shape\": commerce.search.json, verbatim", env=S)
write("spec-commerce-propose-offer", offer, True, comment="vcp-envelope.txt \"Shape\": commerce.propose_offer.json, verbatim", env=O)

def mut(name, base, fn, valid, errors=(), comment=None):
    e = copy.deepcopy(base)
    r = fn(e)
    if r is not None and not isinstance(r, tuple): e = r
    write(name, json.dumps(e, indent=2, ensure_ascii=False) + "\n", valid, errors, comment, env=e)

def setp(path, val):
    def f(e):
        o = e
        for p in path[:-1]: o = o[p]
        o[path[-1]] = val
    return f
def delp(path):
    def f(e):
        o = e
        for p in path[:-1]: o = o[p]
        del o[path[-1]]
    return f

for fld in ["protocol","version","msg_id","ts","from","to","session_id","in_reply_to","idempotency_key","signature","action"]:
    mut("missing-"+fld.replace("_","-"), S, delp([fld]), False, ["missing_field "+fld], "Fields: every envelope carries every top-level field")
mut("missing-action-kind", S, delp(["action","kind"]), False, ["missing_field action.kind"], "Fields: action.kind")
mut("missing-action-payload", S, delp(["action","payload"]), False, ["missing_field action.payload"], "Fields: action.payload")

mut("protocol-not-vcp", S, setp(["protocol"], "acp"), False, ["invalid_field protocol"], "protocol is always \"vcp\"")
mut("version-not-major-minor", S, setp(["version"], "1"), False, ["invalid_field version"], "version is MAJOR.MINOR")
mut("version-major-2", S, setp(["version"], "2.0"), False, ["unsupported_version version"], "another major version is not this protocol")
mut("version-minor-bump", S, setp(["version"], "1.3"), True, [], "minor versions are wire-additive: accepted")
mut("version-number", S, setp(["version"], 1.0), False, ["invalid_field version"], "version is a string")
mut("msg-id-null", S, setp(["msg_id"], None), False, ["invalid_field msg_id"], "msg_id is not nullable")
mut("msg-id-empty", S, setp(["msg_id"], ""), False, ["invalid_field msg_id"], "msg_id is a non-empty string")
mut("msg-id-uuid", S, setp(["msg_id"], "0b6f2f0e-6a53-4c2e-9d4a-3f1a2b3c4d5e"), True, [], "UUID v4 msg_id, as recommended")
mut("session-id-number", S, setp(["session_id"], 7), False, ["invalid_field session_id"], "session_id is a string")
mut("ts-no-zone", S, setp(["ts"], "2026-05-15T12:00:00"), False, ["invalid_field ts"], "ts needs a timezone")
mut("ts-date-only", S, setp(["ts"], "2026-05-15"), False, ["invalid_field ts"], "ts is a full RFC 3339 timestamp")
mut("ts-offset-fraction", S, setp(["ts"], "2026-05-15T14:00:00.123456+02:00"), True, [], "RFC 3339 with offset and fraction (Python isoformat)")
mut("ts-space-separator", S, setp(["ts"], "2026-05-15 12:00:00+00:00"), False, ["invalid_field ts"], "RFC 3339 date-time uses T")
mut("from-no-side", S, setp(["from"], ":discovery"), False, ["invalid_field from"], "from is <side>[:<role>]")
mut("from-space", S, setp(["from"], "buyer discovery"), False, ["invalid_field from"], "from is <side>[:<role>]")
mut("from-side-only", S, setp(["from"], "buyer"), True, [], "the role is optional")
mut("from-star", S, setp(["from"], "*"), False, ["invalid_field from"], "* is reserved")
mut("to-star", S, setp(["to"], "*"), False, ["invalid_field to"], "* is reserved")
mut("to-world", S, setp(["to"], "world"), True, [], "the special value world addresses the world tables")
mut("to-two-colons", S, setp(["to"], "platform:agg:x"), False, ["invalid_field to"], "one optional :<role>")
mut("in-reply-to-number", S, setp(["in_reply_to"], 41), False, ["invalid_field in_reply_to"], "in_reply_to is a msg_id or null")
mut("idempotency-key-null", S, setp(["idempotency_key"], None), True, [], "null: an action that changes no state; no claim")
mut("idempotency-key-255", S, setp(["idempotency_key"], "k"*255), True, [], "255 characters is the limit")
mut("idempotency-key-255-non-ascii", S, setp(["idempotency_key"], "\u00e9"*255), True, [], "the limit counts characters, not bytes")
mut("idempotency-key-256", S, setp(["idempotency_key"], "k"*256), False, ["invalid_field idempotency_key"], "idempotency_key is at most 255 characters")
mut("idempotency-key-empty", S, setp(["idempotency_key"], ""), False, ["invalid_field idempotency_key"], "an empty key de-dupes nothing")
mut("idempotency-key-number", S, setp(["idempotency_key"], 1), False, ["invalid_field idempotency_key"], "idempotency_key is a string")
mut("signature-populated", S, setp(["signature"], "MEUCIQDx"), True, [], "a populated signature is accepted (its check is out of scope)")
mut("signature-empty", S, setp(["signature"], ""), False, ["invalid_field signature"], "signature is null or populated")
mut("signature-number", S, setp(["signature"], 5), False, ["invalid_field signature"], "signature is null or populated")
mut("action-array", S, setp(["action"], []), False, ["invalid_field action"], "action is an object")
mut("action-kind-no-dot", S, setp(["action","kind"], "search"), False, ["invalid_field action.kind"], "kind is <namespace>.<verb>")
mut("action-kind-empty-verb", S, setp(["action","kind"], "commerce."), False, ["invalid_field action.kind"], "kind is <namespace>.<verb>")
mut("action-kind-unknown-namespace", S, setp(["action","kind"], "shop.search"), False, ["unknown_type action.kind"], "namespaces: commerce, delegate, platform, world")
mut("action-kind-delegate", S, setp(["action","kind"], "delegate.set_budget"), True, [], "delegate namespace")
mut("action-kind-platform-dotted", S, setp(["action","kind"], "platform.cert.issue"), True, [], "the router splits on the first dot; the rest is the verb")
mut("action-kind-world", S, setp(["action","kind"], "world.write"), True, [], "world namespace")
mut("action-kind-number", S, setp(["action","kind"], 3), False, ["invalid_field action.kind"], "kind is a string")
mut("action-payload-array", S, setp(["action","payload"], []), False, ["invalid_field action.payload"], "payload is an object")
mut("action-payload-null", S, setp(["action","payload"], None), False, ["invalid_field action.payload"], "payload is an object")

# Money
mut("money-unit-price-float", O, setp(["action","payload","unit_price"], 429.0), False, ["invalid_field action.payload.unit_price"], "Money: a float in a money field is a malformed payload")
def expo(e):
    return e
write("money-unit-price-exponent", offer.replace('"unit_price": 42900', '"unit_price": 4.29e4'), False,
      ["invalid_field action.payload.unit_price"], "Money: 4.29e4 is a float to Python's json", env=O)
write("money-unit-price-integral-float", offer.replace('"unit_price": 42900', '"unit_price": 42900.0'), False,
      ["invalid_field action.payload.unit_price"], "Money: 42900.0 is a float even though integral", env=O)
mut("money-unit-price-string", O, setp(["action","payload","unit_price"], "42900"), False, ["invalid_field action.payload.unit_price"], "Money: integer minor units, not a string")
mut("money-unit-price-bool", O, setp(["action","payload","unit_price"], True), False, ["invalid_field action.payload.unit_price"], "Money: integer minor units")
mut("money-unit-price-null", O, setp(["action","payload","unit_price"], None), True, [], "null: no price given")
mut("money-budget-float", S, setp(["action","payload","budget"], 500.5), False, ["invalid_field action.payload.budget"], "Money: budget")
mut("money-budget-object", S, setp(["action","payload","budget"], {"max": 50000, "currency": "USD"}), True, [], "Money: integers and a currency string inside a budget object")
mut("money-budget-object-float", S, setp(["action","payload","budget"], {"max": 500.5, "currency": "USD"}), False, ["invalid_field action.payload.budget.max"], "Money: every number under a money key is an integer")
mut("money-floor-price-float", O, setp(["action","payload","floor_price"], 399.99), False, ["invalid_field action.payload.floor_price"], "Money: floor_price")
mut("money-any-price-float", O, setp(["action","payload","fulfillment","shipping_price"], 5.99), False, ["invalid_field action.payload.fulfillment.shipping_price"], "Money: any *_price, at any depth")
mut("money-amount-in-array-float", S, setp(["action","payload","lines"], [{"sku": "a", "amount": 100}, {"sku": "b", "amount": 1.5}]), False, ["invalid_field action.payload.lines[1].amount"], "Money: amount inside arrays")
mut("money-ledger-deltas-float", S, setp(["action","payload","ledger_deltas"], {"buyer": -300.5, "merchant": 300}), False, ["invalid_field action.payload.ledger_deltas.buyer"], "Money: ledger deltas")
mut("money-ledger-deltas-negative", S, setp(["action","payload","ledger_deltas"], {"buyer": -300, "merchant": 300}), True, [], "Money: negative integer deltas are fine")
mut("money-delta-float", S, setp(["action","payload","diffs"], [{"account": "buyer", "delta": -0.5}]), False, ["invalid_field action.payload.diffs[0].delta"], "Money: a ledger delta")
mut("money-two-floats", O, lambda e: (setp(["action","payload","unit_price"], 429.0)(e), setp(["action","payload","floor_price"], 1.5)(e)), False, ["invalid_field action.payload.floor_price", "invalid_field action.payload.unit_price"], "Money: every bad money field is reported")
mut("non-money-float", S, setp(["action","payload","constraints","min_rating"], 4.5), True, [], "floats outside money fields are fine")

# several problems at once
mut("several-problems", S, lambda e: (setp(["ts"], "yesterday")(e), setp(["from"], "*")(e), delp(["session_id"])(e)), False, ["invalid_field ts", "invalid_field from", "missing_field session_id"], "all problems are reported, not the first only")

# raw documents
write("not-json", b'{"protocol": "vcp", "version": ', False, ["invalid_json"], "truncated JSON")
write("not-object", b'["protocol", "vcp"]\n', False, ["invalid_field"], "an envelope is an object")
write("trailing-data", search.encode() + b'{}', False, ["invalid_json"], "one JSON value per attachment")
write("invalid-utf8", search.replace("refurbished", "refurb\xffished").encode("latin-1"), False, ["invalid_json"], "JSON is UTF-8")
write("bom", b"\xef\xbb\xbf" + search.encode(), True, [], "a UTF-8 byte order mark is skipped, as Python's json.loads does", env=S)
write("non-ascii-payload", search.replace("refurbished iphone", "iPhone reconditionn\u00e9 \U0001F4F1 <&>\u2028"), True, [], "non-ASCII, HTML-special and U+2028 characters", env=S)

# The canonical request leaves out msg_id, ts and signature: a retry is a replay.
retry = search.replace('"msg_001"', '"msg_001_retry"').replace('"2026-05-15T12:00:00Z"', '"2026-05-15T12:00:09.5+00:00"').replace('"signature": null', '"signature": "MEQCIBvcp"')
write("idem-retry", retry, True, comment="spec-commerce-search sent again: new msg_id, ts and signature, the same claim value (a replay)", env=json.loads(retry))
conflict = search.replace("refurbished iphone 13 128gb", "refurbished iphone 14 128gb").replace('"msg_001"', '"msg_002"')
write("idem-conflict", conflict, True, comment="same (from, idempotency_key) as spec-commerce-search, another query: another claim value (a conflict)", env=json.loads(conflict))
reply = search.replace('"in_reply_to": null', '"in_reply_to": "msg_000"')
write("idem-other-in-reply-to", reply, True, comment="in_reply_to is part of the request: another claim value", env=json.loads(reply))
floats = search.replace('"delivery_days": 3 }', '"delivery_days": 3, "min_rating": 1.10, "tolerance": 1E-5, "big": 1e16, "neg": -0.0 }')
write("canonical-float-repr", floats, True, comment="floats outside money, hashed in Python repr: 1.1, 1e-05, 1e+16, -0.0", env=json.loads(floats))
