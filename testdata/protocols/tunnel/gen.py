#!/usr/bin/env python3
# Regenerates the tunnel vectors in this directory (python3 gen.py). The .json
# files and their .expect files are what the Go tests read; this script is
# only how they were written.
import os
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
import json, os, shutil
T = os.path.join(ROOT, "tunnel")
V = os.path.join(ROOT, "vcp")
P = os.path.join(ROOT, "pvp")
A = os.path.join(ROOT, "aicp")
os.makedirs(T, exist_ok=True)

def case(name, body, inputs, expect, comment):
    mode = "wb" if isinstance(body, bytes) else "w"
    with open(os.path.join(T, name + ".json"), mode) as f: f.write(body)
    lines = ["# " + c for c in comment.split("\n")]
    lines += ["%s: %s" % kv for kv in inputs]
    lines += expect
    with open(os.path.join(T, name + ".expect"), "w") as f: f.write("\n".join(lines) + "\n")

def read(d, n): return open(os.path.join(d, n + ".json"), "rb").read()
def outcome(d, n):
    # protocol/valid/error/summary/claim lines of a validator vector
    return [l for l in open(os.path.join(d, n + ".expect")).read().splitlines() if l and not l.startswith("#")]

CT = ("content-type", "application/json")
# 1. VCP
case("vcp-by-content", read(V, "spec-commerce-propose-offer"), [CT, ("filename", "offer.json"), ("media-type", "application/vcp+json")],
     outcome(V, "spec-commerce-propose-offer"), 'rule 1: "protocol":"vcp" -> VCP')
case("vcp-label-disagrees", read(V, "spec-commerce-search"), [("content-type", "application/pvp+json"), ("media-type", "application/vcp+json")],
     outcome(V, "spec-commerce-search"), "content wins over a media type that names another protocol")
case("vcp-invalid", read(V, "money-unit-price-float"), [CT, ("media-type", "application/vcp+json")],
     outcome(V, "money-unit-price-float"), "a detected VCP envelope is validated: a float price")
s = json.loads(read(V, "spec-commerce-search")); del s["protocol"]
case("vcp-hint-only", json.dumps(s, indent=2) + "\n", [("content-type", "application/vcp+json; charset=utf-8"), ("media-type", "application/json")],
     ["protocol: vcp", "valid: false", "error: missing_field protocol", "summary.id: msg_001", "summary.from: buyer:discovery",
      "summary.to: platform:aggregator", "summary.kind: commerce.search"],
     "no protocol member: the content matches nothing, the media type says VCP, so it is checked as VCP")
s = json.loads(read(V, "spec-commerce-search")); s["protocol"] = "VCP"
case("vcp-wrong-case-plain", json.dumps(s, indent=2) + "\n", [CT, ("media-type", "application/json")],
     ["protocol: ", "valid: true"], '"protocol":"VCP" is not the marker "vcp": a plain JSON file')

# 5. PVP
case("pvp-by-content", read(P, "spec-a3-prompt-submit"), [CT, ("filename", "prompt.json"), ("media-type", "application/pvp+json")],
     outcome(P, "spec-a3-prompt-submit"), "rule 5: v, session, sender, type -> PVP")
case("pvp-version-2", read(P, "envelope-v-2"), [CT, ("media-type", "application/pvp+json")],
     outcome(P, "envelope-v-2"), "v 2 is still recognised as PVP, and reported unsupported_version")
case("pvp-label-disagrees", read(P, "spec-a1-session-create"), [("content-type", "application/vcp+json"), ("media-type", "application/pvp+json")],
     outcome(P, "spec-a1-session-create"), "content wins over the label")
case("pvp-missing-sender-hinted", read(P, "envelope-missing-sender"), [("content-type", "application/pvp+json"), ("media-type", "application/json")],
     outcome(P, "envelope-missing-sender"), "without sender the content is not detected; the label makes it PVP")
case("pvp-missing-sender-unlabelled", read(P, "envelope-missing-sender"), [CT, ("media-type", "application/json")],
     ["protocol: ", "valid: true"], "without sender and without a label: a plain JSON file")

# 4. AICP
KEY = ("aicp-key", "alice 2sOcyQ4gc2zTXCkuRnQfWq2zxPGff2gr9UuU/Wu1IYw=")
NOW = ("now", "2025-01-02T00:00:00Z")
case("aicp-signed", read(A, "valid_body"), [CT, KEY, NOW, ("media-type", "application/aicp+json")],
     ["protocol: aicp", "valid: true", "summary.id: msg_abc123xyz", "summary.from: alice", "summary.to: bob", "claims: 2"],
     "rule 4: v, nonce, from/to -> AICP; signed by alice, key known, inside the window\n(testdata/protocols/aicp/valid_body.json)")
case("aicp-unknown-key", read(A, "valid_body"), [CT, NOW, ("media-type", "application/aicp+json")],
     ["protocol: aicp", "valid: false", "error: unknown_key from", "summary.id: msg_abc123xyz", "summary.from: alice", "summary.to: bob"],
     "the same message with no key for alice")
case("aicp-stale", read(A, "valid_body"), [CT, KEY, ("now", "2025-01-02T00:05:01Z"), ("media-type", "application/aicp+json")],
     ["protocol: aicp", "valid: false", "error: stale_timestamp timestamp", "summary.id: msg_abc123xyz", "summary.from: alice", "summary.to: bob"],
     "received 5 min 1 s after its timestamp")
case("aicp-unsigned", read(A, "missing_signature"), [CT, KEY, NOW, ("media-type", "application/aicp+json")],
     ["protocol: aicp", "valid: false", "error: missing_field signature", "summary.id: msg_abc123xyz", "summary.from: alice", "summary.to: bob"],
     "no signature: still recognised as AICP (v, nonce, from/to), and reported")

# plain JSON and broken JSON
case("plain-object", '{"name": "invoice", "lines": [1, 2, 3]}\n', [CT, ("filename", "invoice.json"), ("media-type", "application/json")],
     ["protocol: ", "valid: true"], "no rule matches: a plain JSON file")
case("plain-array", '[{"v": 1, "session": "s", "sender": "a", "type": "error"}]\n', [CT, ("media-type", "application/json")],
     ["protocol: ", "valid: true"], "only an object can be a protocol message")
case("plain-string", '"protocol: vcp"\n', [CT, ("media-type", "application/json")], ["protocol: ", "valid: true"], "a JSON string")
case("plain-jsonrpc-other-method", '{"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": "t1"}}\n', [CT, ("media-type", "application/json")],
     ["protocol: ", "valid: true"], "JSON-RPC, but neither message/send nor SendMessage nor Vacant metadata")
case("plain-duplicate-keys", '{"a": 1, "a": 2}\n', [CT, ("media-type", "application/json")], ["protocol: ", "valid: true"],
     "detection parses like JSON.parse and json.loads: a duplicate key in a plain file is not an error")
case("invalid-json", '{"protocol": "vcp", ', [CT, ("filename", "broken.json"), ("media-type", "application/json")],
     ["protocol: ", "valid: false", "error: invalid_json"], "does not parse")
case("invalid-json-labelled", '{"v": 1,,}', [("content-type", "application/pvp+json"), ("media-type", "application/json")],
     ["protocol: ", "valid: false", "error: invalid_json"], "does not parse: no protocol even with a protocol label")
case("empty", b"", [CT, ("media-type", "application/json")], ["protocol: ", "valid: false", "error: invalid_json"], "an empty part")
case("trailing-data", '{"a": 1} {"b": 2}', [CT, ("media-type", "application/json")], ["protocol: ", "valid: false", "error: invalid_json"], "two JSON values")

# 2. Vacant
VA = os.path.join(ROOT, "vacant")
C1 = json.loads(read(VA, "chain_1"))
vsum = ["summary.from: " + C1["params"]["message"]["metadata"]["urn:vacant:v1"]["from_vacant_id"],
        "summary.to: " + C1["params"]["message"]["metadata"]["urn:vacant:v1"]["to_vacant_id"], "summary.seq: 1", "summary.message_id: m-1"]
case("vacant-by-content", read(VA, "chain_1"), [CT, ("filename", "envelope.json"), ("media-type", "application/a2a+json")],
     ["protocol: vacant", "valid: true"] + vsum + ["links: 1"], "rule 2: jsonrpc + params.message.metadata[\"urn:vacant:v1\"] -> Vacant\n(testdata/protocols/vacant/chain_1.json)")
case("vacant-labelled-a2a", read(VA, "chain_1"), [("content-type", "application/a2a+json"), ("media-type", "application/a2a+json")],
     ["protocol: vacant", "valid: true"] + vsum + ["links: 1"], "labelled A2A (the MailA2A media type), detected as Vacant by its metadata")
case("vacant-jsonrpc-1", read(VA, "bad_jsonrpc"), [CT, ("media-type", "application/a2a+json")],
     ["protocol: vacant", "valid: false", "error: invalid_field jsonrpc"] + vsum, "a wrong jsonrpc version is still Vacant, and reported")

# 3. A2A
a2a_v03 = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": {"role": "user", "kind": "message", "messageId": "9229e770-767c-417b-a0b0-f0741243c589",
           "parts": [{"kind": "text", "text": "tell me a joke"}]}}}
a2a_v10 = {"jsonrpc": "2.0", "id": "req-1", "method": "SendMessage", "params": {"message": {"role": "ROLE_USER", "messageId": "msg-1",
           "parts": [{"text": "tell me a joke"}]}}}
case("a2a-message-send", json.dumps(a2a_v03, indent=2) + "\n", [CT, ("media-type", "application/a2a+json")],
     ["protocol: a2a", "valid: true", "summary.method: message/send", "summary.message_id: 9229e770-767c-417b-a0b0-f0741243c589", "summary.role: user", "summary.parts: 1"],
     "rule 3: JSON-RPC message/send without Vacant metadata -> A2A (v0.3 form)")
case("a2a-send-message", json.dumps(a2a_v10, indent=2) + "\n", [CT, ("media-type", "application/a2a+json")],
     ["protocol: a2a", "valid: true", "summary.method: SendMessage", "summary.message_id: msg-1", "summary.role: ROLE_USER", "summary.parts: 1"],
     "rule 3: JSON-RPC SendMessage -> A2A (v1.0 form)")
case("a2a-hint-only", '{"id": 1, "params": {"message": {"role": "user"}}}\n', [("content-type", "application/a2a+json"), ("media-type", "application/json")],
     ["protocol: a2a", "valid: false", "error: missing_field jsonrpc", "error: missing_field method", "error: missing_field params.message.messageId",
      "error: missing_field params.message.parts", "summary.role: user"],
     "no jsonrpc member: matches nothing, the label makes it A2A")
a2a_bad = dict(a2a_v03, jsonrpc="1.0")
case("a2a-jsonrpc-1", json.dumps(a2a_bad, indent=2) + "\n", [CT, ("media-type", "application/a2a+json")],
     ["protocol: a2a", "valid: false", "error: invalid_field jsonrpc", "summary.method: message/send", "summary.message_id: 9229e770-767c-417b-a0b0-f0741243c589", "summary.role: user", "summary.parts: 1"],
     "a wrong jsonrpc version is still A2A, and reported")
