#!/usr/bin/env python3
"""Writes the AICP vectors with a second implementation: canonical bytes from
node (JSON.stringify of recursively sorted keys), Ed25519 from Python's
`cryptography`. Not run by the tests; its outputs are committed.

  NAME.json   a message document;  NAME.want   what Validate must report
  sign/NAME.json   {seed?, public_key, message, canonical, signature}

Keys are derived from fixed seeds (sha256 of "envelopd aicp test HANDLE").
keys.txt lists the public keys Validate knows, in the accepted encodings.
"""
import base64, copy, hashlib, json, os, subprocess
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives import serialization

os.chdir(os.path.dirname(os.path.abspath(__file__)))
NOW = 1735776000

def seed(h): return hashlib.sha256(b"envelopd aicp test " + h.encode()).digest()
def priv(h): return Ed25519PrivateKey.from_private_bytes(seed(h))
def raw_pub(h):
    return priv(h).public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
def spki_pub(h):
    return priv(h).public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)

CANON_JS = r'''
function canon(v) {
  if (v === null || typeof v !== "object") return JSON.stringify(v) ?? "null";
  if (Array.isArray(v)) return "[" + v.map(canon).join(",") + "]";
  return "{" + Object.keys(v).sort().map(k => JSON.stringify(k) + ":" + canon(v[k])).join(",") + "}";
}
process.stdout.write(canon(JSON.parse(require("fs").readFileSync(0, "utf8"))));
'''
def canonical(msg):
    return subprocess.run(["node", "-e", CANON_JS], input=json.dumps(msg).encode(),
                          capture_output=True, check=True).stdout

def sign(msg, h):
    m = {k: v for k, v in msg.items() if k != "signature"}
    c = canonical(m)
    return c, base64.b64encode(priv(h).sign(c)).decode()

with open("keys.txt", "w") as f:
    f.write("# handle key: the public keys Validate knows in the tests (ParseKey forms)\n")
    f.write("alice " + base64.b64encode(raw_pub("alice")).decode() + "\n")
    f.write("bob " + base64.b64encode(spki_pub("bob")).decode() + "\n")
    f.write("seth ed25519:" + base64.urlsafe_b64encode(raw_pub("seth")).decode().rstrip("=") + "\n")
    f.write("alex " + base64.urlsafe_b64encode(spki_pub("alex")).decode() + "\n")

def write(name, doc, errors, summary, raw=None, now=None, keys=None):
    with open(name + ".json", "wb") as f:
        f.write(raw if raw is not None else json.dumps(doc, indent=2, ensure_ascii=False).encode() + b"\n")
    want = {"errors": [{"code": c, "field": fl} for c, fl in errors], "summary": summary}
    if now is not None: want["now"] = now
    if keys is not None: want["keys"] = keys
    with open(name + ".want", "w") as f:
        f.write(json.dumps(want, indent=2) + "\n")

BASE = {"v": "0.1", "id": "msg_abc123xyz", "from": "alice", "to": "bob", "timestamp": NOW,
        "nonce": "n0nce-0123456789abcdef", "body": "Check out this game state"}
SUM = {"id": "msg_abc123xyz", "from": "alice", "to": "bob"}

def signed(doc, h="alice"):
    d = copy.deepcopy(doc); d["signature"] = sign(d, h)[1]; return d

def case(name, mutate, errors, summary=None, signer="alice", after=None, **kw):
    d = copy.deepcopy(BASE); mutate(d)
    d = signed(d, signer)
    if after: after(d)
    write(name, d, errors, SUM if summary is None else summary, **kw)

def set_(**kv):
    def f(d):
        for k, v in kv.items():
            if v is DEL: d.pop(k, None)
            else: d[k] = v
    return f
DEL = object()
nop = lambda d: None

# Valid messages.
case("valid_body", nop, [])
case("valid_payload", set_(body=DEL, payload={"type": "game:tictactoe", "data": {"board": ["X", "", "O", "", "X", "", "", "", ""], "turn": "O", "moves": 3, "winner": None}}), [], dict(SUM, type="game:tictactoe"))
case("valid_handshake", set_(from_=DEL, payload={"type": "handshake", "data": {"action": "request", "message": "Hey, want to connect?"}}), [], dict(SUM, type="handshake"))
case("valid_ack", set_(payload={"type": "ack", "data": {"ref": "msg_abc123", "status": "unsupported_payload", "reason": "Unknown payload type: game:chess"}}), [], dict(SUM, type="ack"))
case("valid_unicode", set_(body="<b>Tom & Jerry</b>\u2028line\u2029para Zoë 😀 \"q\" \\ \t",
     payload={"type": "context:code", "data": {"\ue000": "pua", "😀": "astral", "é": 1.5, "n": 1e21, "z": 0.000001, "line": 42}}),
     [], dict(SUM, type="context:code"))
case("valid_uuid_id", set_(id="msg_3b241101-e2bb-4255-8caf-4136c566a962"), [], dict(SUM, id="msg_3b241101-e2bb-4255-8caf-4136c566a962"))
case("valid_version_02", set_(v="0.2"), [])
case("valid_extra_field", set_(thread="t1"), [])
case("valid_window_edge_past", set_(timestamp=NOW - 300), [])
case("valid_window_edge_future", set_(timestamp=NOW + 300), [])
case("valid_from_bob_spki", set_(**{"from": "bob", "to": "alice"}), [], {"id": "msg_abc123xyz", "from": "bob", "to": "alice"}, signer="bob")
case("valid_from_seth_prefixed_url_key", set_(**{"from": "seth", "to": "alex"}), [], {"id": "msg_abc123xyz", "from": "seth", "to": "alex"}, signer="seth")
def urlsig(d):
    d["signature"] = "ed25519:" + d["signature"].replace("+", "-").replace("/", "_").rstrip("=")
case("valid_signature_url_unpadded_prefixed", nop, [], after=urlsig)
case("valid_payload_empty_body", set_(body="", payload={"type": "game:chess", "data": {"move": "e4"}}), [], dict(SUM, type="game:chess"))

# One mutation per rule.
case("missing_v", set_(v=DEL), [("missing_field", "v")])
case("v_not_string", set_(v=0.1), [("invalid_field", "v")])
case("unsupported_version", set_(v="1.0"), [("unsupported_version", "v")])
case("missing_id", set_(id=DEL), [("missing_field", "id")], {"from": "alice", "to": "bob"})
case("bad_id", set_(id="abc123"), [("invalid_field", "id")], {"from": "alice", "to": "bob"})
case("missing_from", set_(**{"from": DEL}), [("missing_field", "from")], {"id": "msg_abc123xyz", "to": "bob"})
case("bad_from_handle", set_(**{"from": "Alice!"}), [("invalid_field", "from")], {"id": "msg_abc123xyz", "to": "bob"})
case("bad_to_handle_too_long", set_(to="b" * 33), [("invalid_field", "to")], {"id": "msg_abc123xyz", "from": "alice"})
case("missing_to", set_(to=DEL), [("missing_field", "to")], {"id": "msg_abc123xyz", "from": "alice"})
case("missing_timestamp", set_(timestamp=DEL), [("missing_field", "timestamp")])
case("timestamp_float", set_(timestamp=1735776000.5), [("invalid_field", "timestamp")])
case("timestamp_string", set_(timestamp="1735776000"), [("invalid_field", "timestamp")])
case("stale_timestamp_past", set_(timestamp=NOW - 301), [("stale_timestamp", "timestamp")])
case("stale_timestamp_future", set_(timestamp=NOW + 301), [("stale_timestamp", "timestamp")])
case("missing_nonce", set_(nonce=DEL), [("missing_field", "nonce")])
case("short_nonce", set_(nonce="0123456789abcde"), [("invalid_field", "nonce")])
case("nonce_not_string", set_(nonce=1234567890123456789), [("invalid_field", "nonce")])
case("body_not_string", set_(body=["x"]), [("invalid_field", "body"), ("missing_field", "body")])
case("no_body_no_payload", set_(body=DEL), [("missing_field", "body")])
case("empty_body_no_payload", set_(body=""), [("missing_field", "body")])
case("payload_not_object", set_(payload="game"), [("invalid_field", "payload")])
case("payload_missing_type", set_(payload={"data": {}}), [("missing_field", "payload.type")])
case("payload_missing_data", set_(payload={"type": "game:chess"}), [("missing_field", "payload.data")], dict(SUM, type="game:chess"))
case("payload_data_not_object", set_(payload={"type": "game:chess", "data": "e4"}), [("invalid_field", "payload.data")], dict(SUM, type="game:chess"))
case("handshake_bad_action", set_(payload={"type": "handshake", "data": {"action": "maybe"}}), [("invalid_field", "payload.data.action")], dict(SUM, type="handshake"))
case("ack_bad_status", set_(payload={"type": "ack", "data": {"ref": "msg_x", "status": "ok"}}), [("invalid_field", "payload.data.status")], dict(SUM, type="ack"))
case("missing_signature", nop, [("missing_field", "signature")], after=lambda d: d.pop("signature"))
case("signature_not_string", nop, [("invalid_field", "signature")], after=lambda d: d.update(signature=42))
case("signature_not_base64", nop, [("bad_signature", "signature")], after=lambda d: d.update(signature="not base64!"))
case("signature_wrong_length", nop, [("bad_signature", "signature")], after=lambda d: d.update(signature=base64.b64encode(b"x" * 63).decode()))
case("tampered_body", nop, [("bad_signature", "signature")], after=lambda d: d.update(body="Check out this game state!"))
case("tampered_added_field", nop, [("bad_signature", "signature")], after=lambda d: d.update(extra=None))
case("signed_by_other_key", nop, [("bad_signature", "signature")], signer="bob")
case("unknown_key", set_(**{"from": "mallory"}), [("unknown_key", "from")], {"id": "msg_abc123xyz", "from": "mallory", "to": "bob"}, signer="mallory")
write("invalid_json", None, [("invalid_json", "")], {}, raw=b'{"v":"0.1",')
write("not_object", None, [("invalid_json", "")], {}, raw=b'["v","0.1"]\n')
write("duplicate_key", None, [("invalid_json", "")], {}, raw=b'{"v":"0.1","from":"alice","from":"bob"}\n')

# Spec examples (aicp-v0.1.md §2.3 and §3.1) as printed: placeholder signatures.
spec23 = {"v": "0.1", "id": "msg_abc123xyz", "from": "seth", "to": "alex", "timestamp": 1735776000,
          "nonce": "random_16_char_string", "body": "Check out this game state",
          "payload": {"type": "game:tictactoe", "data": {"board": ["X", "", "O", "", "X", "", "", "", ""], "turn": "O"}},
          "signature": "base64_ed25519_signature"}
write("spec_2_3_message", spec23, [("bad_signature", "signature")], {"id": "msg_abc123xyz", "from": "seth", "to": "alex", "type": "game:tictactoe"})
spec31 = {"v": "0.1", "id": "msg_abc123", "from": "seth", "to": "alex", "timestamp": 1735776000,
          "nonce": "random123456789", "body": "Hello", "payload": {"type": "game:chess", "data": {"move": "e4"}}, "signature": "..."}
write("spec_3_1_message", spec31, [("invalid_field", "nonce"), ("bad_signature", "signature")], {"id": "msg_abc123", "from": "seth", "to": "alex", "type": "game:chess"})
# The same message properly signed by seth: the nonce (15 characters) is still short.
s31 = dict(spec31); s31["signature"] = sign(s31, "seth")[1]
write("spec_3_1_signed", s31, [("invalid_field", "nonce")], {"id": "msg_abc123", "from": "seth", "to": "alex", "type": "game:chess"})

# Published AIRC vector (implementation-notes.md): verifies; its 12-character nonce is short.
AIRC_KEY = "MCowBQYDK2VwAyEAhT4X7iWhZhMldR4fJmQMYhqSUKQdFbYgV1SZkvwiJQo="
AIRC_SIG = "JY/Bvn8DpKOhCYYjaAlSvU+o/7eDzkHzpzmtAQbzZkrxddkU+O4W0iF/rgQEbcFCbo6Su18ohHM7LvYRtzs5Cw=="
airc = {"v": "0.2", "id": "msg_test123", "from": "alice", "to": "bob", "timestamp": 1704672000, "nonce": "abc123xyz789", "body": "Hello, Bob!"}
write("airc_published", dict(airc, signature=AIRC_SIG), [("invalid_field", "nonce")],
      {"id": "msg_test123", "from": "alice", "to": "bob"}, now=1704672000, keys={"alice": AIRC_KEY})

# Sign vectors: canonical bytes and the deterministic Ed25519 signature.
def signvec(name, msg, h=None, pub=None, sig=None):
    c = canonical({k: v for k, v in msg.items() if k != "signature"})
    v = {"message": msg, "canonical": c.decode("utf-8")}
    if h:
        v["seed"] = base64.b64encode(seed(h)).decode()
        v["public_key"] = base64.b64encode(raw_pub(h)).decode()
        v["signature"] = base64.b64encode(priv(h).sign(c)).decode()
    else:
        v["public_key"], v["signature"] = pub, sig
    with open("sign/" + name + ".json", "w") as f:
        f.write(json.dumps(v, indent=2, ensure_ascii=False) + "\n")
signvec("airc_published", airc, pub=AIRC_KEY, sig=AIRC_SIG)
signvec("basic", BASE, "alice")
signvec("unicode", {**BASE, "body": "<b>Tom & Jerry</b>\u2028 Zoë 😀", "payload": {"type": "x", "data": {"\ue000": 1, "😀": 2, "f": 0.1, "g": 1e-7, "big": 12345678901234567890}}}, "seth")
signvec("spec_3_1", {k: v for k, v in spec31.items() if k != "signature"}, "seth")
