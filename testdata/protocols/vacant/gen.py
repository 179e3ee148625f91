#!/usr/bin/env python3
"""Writes the Vacant P6 vectors with a second implementation: the reference's
signing_dict / json.dumps(sort_keys=True, separators=(",", ":"),
ensure_ascii=False) / Ed25519 (`cryptography`) / hashlib.blake2b(digest_size=32)
/ to_a2a_jsonrpc, as vacant-p6-protocol.txt and implementation-notes.md show
them. Not run by the tests; its outputs are committed.

  NAME.json   a wire document;   NAME.want   what Validate must report
  sign/NAME.json   inputs of vacant.Sign and the expected bytes, signature, hash
"""
import copy, hashlib, json, os
from datetime import datetime, timezone, timedelta
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives import serialization

os.chdir(os.path.dirname(os.path.abspath(__file__)))
ZERO = "00" * 32
UTC = timezone.utc

def seed(n): return hashlib.sha256(b"envelopd vacant test " + n.encode()).digest()
def priv(n): return Ed25519PrivateKey.from_private_bytes(seed(n))
def vid(n): return priv(n).public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw).hex()
A, B, M = vid("alice"), vid("bob"), vid("mallory")

def utc_iso(dt): return dt.astimezone(UTC).isoformat()

def signing_bytes(f, t, seq, ts, prev, idem, msg):
    payload = {"role": msg["role"], "parts": [{"type": p["type"], "text": p["text"]} for p in msg["parts"]],
               "contextId": msg.get("contextId"), "messageId": msg.get("messageId"),
               "selfEval": ({k: float(v) for k, v in msg["selfEval"].items()} if msg.get("selfEval") is not None else None)}
    d = {"from": f, "to": t, "seq": seq, "ts": utc_iso(ts), "prev": prev, "idem": idem, "payload": payload}
    return json.dumps(d, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")

def envelope(signer, to, seq, ts, prev, idem, msg, wire_ts=None):
    f = vid(signer)
    sb = signing_bytes(f, to, seq, ts, prev, idem, msg)
    sig = priv(signer).sign(sb).hex()
    h = hashlib.blake2b(sb, digest_size=32).hexdigest()
    m = {"role": msg["role"], "parts": [{"type": p["type"], "text": p["text"]} for p in msg["parts"]],
         "contextId": msg.get("contextId"), "messageId": msg.get("messageId"),
         "metadata": {"urn:vacant:v1": {"from_vacant_id": f, "to_vacant_id": to, "sequence_no": seq,
                      "timestamp": wire_ts or utc_iso(ts), "prev_envelope_hash": prev,
                      "idempotency_key": idem, "caller_signature": sig}}}
    if "selfEval" in msg:
        m["selfEval"] = msg["selfEval"]
    wire = {"jsonrpc": "2.0", "id": idem or h, "method": "message/send", "params": {"message": m}}
    return wire, sb, sig, h

T0 = datetime(2026, 5, 6, 12, 0, 0, tzinfo=UTC)
MSG = {"role": "ROLE_USER", "parts": [{"type": "text", "text": "summarise the attached report"}],
       "contextId": "ctx-1", "messageId": "m-1"}

def write(name, doc, errors, summary, link=None, raw=None):
    with open(name + ".json", "wb") as f:
        f.write(raw if raw is not None else json.dumps(doc, indent=2, ensure_ascii=False).encode() + b"\n")
    want = {"errors": [{"code": c, "field": fl} for c, fl in errors], "summary": summary}
    if link: want["link"] = link
    with open(name + ".want", "w") as f:
        f.write(json.dumps(want, indent=2) + "\n")

def summ(f, t, seq, mid="m-1"):
    s = {"from": f, "to": t, "seq": seq}
    if mid is not None: s["message_id"] = mid
    return s

def valid(name, signer=("alice"), to=B, seq=1, ts=T0, prev=ZERO, idem="idem-1", msg=MSG, wire_ts=None):
    w, sb, sig, h = envelope(signer, to, seq, ts, prev, idem, msg, wire_ts)
    write(name, w, [], summ(vid(signer), to, seq, msg.get("messageId")),
          {"chain": vid(signer) + ">" + to, "seq": seq, "prev": prev, "hash": h})
    return w, h

# A chain of three alice→bob, and the first bob→alice.
_, h1 = valid("chain_1")
_, h2 = valid("chain_2", seq=2, prev=h1, idem="idem-2", ts=T0 + timedelta(seconds=30), msg=dict(MSG, messageId="m-2"))
valid("chain_3", seq=3, prev=h2, idem="idem-3", ts=T0 + timedelta(seconds=60), msg=dict(MSG, messageId="m-3"))
valid("reverse_1", signer="bob", to=A, msg=dict(MSG, role="ROLE_AGENT", messageId="r-1"))
valid("valid_unicode", msg=dict(MSG, parts=[{"type": "text", "text": "<b>Tom & Jerry</b>\u2028Zoë 😀 \"q\" \\ \x01"}, {"type": "text", "text": "日本語"}]))
valid("valid_selfeval", msg=dict(MSG, selfEval={"accuracy": 0.9, "completeness": 1, "clarity": 0.75, "safety": 1.0, "latency": 1e-05, "cost": 0.1}))
valid("valid_microseconds", ts=datetime(2026, 5, 6, 12, 0, 0, 123456, tzinfo=UTC))
valid("valid_wire_z", wire_ts="2026-05-06T12:00:00Z")
valid("valid_wire_offset", wire_ts="2026-05-06T14:00:00.000+02:00")
valid("valid_null_ids", msg={"role": "ROLE_USER", "parts": [{"type": "text", "text": "hi"}], "contextId": None, "messageId": None})
valid("valid_empty_idem", idem="")
valid("valid_no_parts", msg=dict(MSG, parts=[]))

# One mutation per rule, applied to chain_1 after signing (re-signed where
# the rule is not the signature).
base, _, _, _ = envelope("alice", B, 1, T0, ZERO, "idem-1", MSG)
def meta(d): return d["params"]["message"]["metadata"]["urn:vacant:v1"]
MP = "params.message.metadata.urn:vacant:v1."
S1 = summ(A, B, 1)
def mut(name, f, errors, summary=S1):
    d = copy.deepcopy(base); f(d); write(name, d, errors, summary)
def resign(name, signer, to, seq, prev, errors, summary, ts=T0, msg=MSG, after=None):
    w, _, _, _ = envelope(signer, to, seq, ts, prev, "idem-x", msg)
    if after: after(w)
    write(name, w, errors, summary)

mut("missing_jsonrpc", lambda d: d.pop("jsonrpc"), [("missing_field", "jsonrpc")])
mut("bad_jsonrpc", lambda d: d.update(jsonrpc="1.0"), [("invalid_field", "jsonrpc")])
mut("bad_method", lambda d: d.update(method="tasks/send"), [("invalid_field", "method")])
mut("missing_id", lambda d: d.pop("id"), [("missing_field", "id")])
mut("id_object", lambda d: d.update(id={}), [("invalid_field", "id")])
mut("missing_params", lambda d: d.pop("params"), [("missing_field", "params")], {})
mut("missing_metadata", lambda d: d["params"]["message"].pop("metadata"), [("missing_field", "params.message.metadata")], {"message_id": "m-1"})
mut("missing_from", lambda d: meta(d).pop("from_vacant_id"), [("missing_field", MP + "from_vacant_id")], {"to": B, "seq": 1, "message_id": "m-1"})
mut("from_uppercase", lambda d: meta(d).update(from_vacant_id=A.upper()), [("invalid_field", MP + "from_vacant_id")], {"to": B, "seq": 1, "message_id": "m-1"})
mut("from_short", lambda d: meta(d).update(from_vacant_id=A[:62]), [("invalid_field", MP + "from_vacant_id")], {"to": B, "seq": 1, "message_id": "m-1"})
mut("to_not_hex", lambda d: meta(d).update(to_vacant_id="z" * 64), [("invalid_field", MP + "to_vacant_id")], {"from": A, "seq": 1, "message_id": "m-1"})
mut("seq_float", lambda d: meta(d).update(sequence_no=1.0), [("invalid_field", MP + "sequence_no")], {"from": A, "to": B, "message_id": "m-1"})
mut("seq_string", lambda d: meta(d).update(sequence_no="1"), [("invalid_field", MP + "sequence_no")], {"from": A, "to": B, "message_id": "m-1"})
mut("missing_seq", lambda d: meta(d).pop("sequence_no"), [("missing_field", MP + "sequence_no")], {"from": A, "to": B, "message_id": "m-1"})
resign("seq_zero", "alice", B, 0, ZERO, [("invalid_field", MP + "sequence_no")], {"from": A, "to": B, "message_id": "m-1"})
resign("seq_negative", "alice", B, -1, ZERO, [("invalid_field", MP + "sequence_no")], {"from": A, "to": B, "seq": -1, "message_id": "m-1"})
resign("seq1_nonzero_prev", "alice", B, 1, "ab" * 32, [("invalid_field", MP + "prev_envelope_hash")], S1)
mut("prev_bad_hex", lambda d: meta(d).update(prev_envelope_hash="0" * 63), [("invalid_field", MP + "prev_envelope_hash")])
mut("ts_naive", lambda d: meta(d).update(timestamp="2026-05-06T12:00:00"), [("invalid_field", MP + "timestamp")])
mut("ts_garbage", lambda d: meta(d).update(timestamp="yesterday"), [("invalid_field", MP + "timestamp")])
mut("ts_bad_date", lambda d: meta(d).update(timestamp="2026-02-30T12:00:00+00:00"), [("invalid_field", MP + "timestamp")])
mut("missing_signature", lambda d: meta(d).pop("caller_signature"), [("missing_field", MP + "caller_signature")])
mut("sig_short", lambda d: meta(d).update(caller_signature=meta(d)["caller_signature"][:126]), [("invalid_field", MP + "caller_signature")])
mut("idem_not_string", lambda d: meta(d).update(idempotency_key=None), [("invalid_field", MP + "idempotency_key")])
mut("tampered_text", lambda d: d["params"]["message"]["parts"][0].update(text="summarise the attached report!"), [("bad_signature", MP + "caller_signature")])
mut("tampered_idem", lambda d: meta(d).update(idempotency_key="idem-2"), [("bad_signature", MP + "caller_signature")])
mut("tampered_ts", lambda d: meta(d).update(timestamp="2026-05-06T12:00:01+00:00"), [("bad_signature", MP + "caller_signature")])
mut("tampered_message_id", lambda d: d["params"]["message"].update(messageId="m-9"), [("bad_signature", MP + "caller_signature")], summ(A, B, 1, "m-9"))
mut("added_selfeval", lambda d: d["params"]["message"].update(selfEval={"accuracy": 1}), [("bad_signature", MP + "caller_signature")])
def forge(d):  # mallory signs but claims to be alice
    w, _, sig, _ = envelope("mallory", B, 1, T0, ZERO, "idem-1", MSG)
    meta(d)["caller_signature"] = sig
mut("signed_by_other_key", forge, [("bad_signature", MP + "caller_signature")])
mut("missing_role", lambda d: d["params"]["message"].pop("role"), [("missing_field", "params.message.role")])
mut("missing_parts", lambda d: d["params"]["message"].pop("parts"), [("missing_field", "params.message.parts")])
mut("part_kind_not_type", lambda d: d["params"]["message"].update(parts=[{"kind": "text", "text": "x"}]),
    [("invalid_field", "params.message.parts[0].kind"), ("missing_field", "params.message.parts[0].type")])
mut("part_extra_field", lambda d: d["params"]["message"]["parts"][0].update(metadata={}), [("invalid_field", "params.message.parts[0].metadata")])
mut("part_not_text", lambda d: d["params"]["message"]["parts"][0].update(type="image"), [("invalid_field", "params.message.parts[0].type")])
mut("context_not_string", lambda d: d["params"]["message"].update(contextId=7), [("invalid_field", "params.message.contextId")])
mut("selfeval_not_object", lambda d: d["params"]["message"].update(selfEval=[0.5]), [("invalid_field", "params.message.selfEval")])
mut("selfeval_not_number", lambda d: d["params"]["message"].update(selfEval={"accuracy": "high"}), [("invalid_field", "params.message.selfEval.accuracy")])
write("invalid_json", None, [("invalid_json", "")], {}, raw=b'{"jsonrpc":"2.0",\n')
write("duplicate_key", None, [("invalid_json", "")], {}, raw=b'{"jsonrpc":"2.0","jsonrpc":"2.0"}\n')
write("not_object", None, [("invalid_json", "")], {}, raw=b'"message/send"\n')

# Sign vectors: what vacant.Sign must produce from these inputs.
def signvec(name, signer, to, seq, ts, prev, idem, msg):
    w, sb, sig, h = envelope(signer, to, seq, ts, prev, idem, msg)
    v = {"seed": seed(signer).hex(), "to": to, "seq": seq, "ts": utc_iso(ts), "prev": prev, "idem": idem,
         "message": msg, "signing_bytes": sb.decode("utf-8"), "signature": sig, "hash": h}
    with open("sign/" + name + ".json", "w") as f:
        f.write(json.dumps(v, indent=2, ensure_ascii=False) + "\n")
signvec("first", "alice", B, 1, T0, ZERO, "idem-1", MSG)
signvec("second", "alice", B, 2, T0 + timedelta(seconds=30), h1, "idem-2", dict(MSG, messageId="m-2"))
signvec("unicode_selfeval", "bob", A, 1, datetime(2026, 5, 6, 12, 0, 0, 500, tzinfo=UTC), ZERO, "",
        {"role": "ROLE_AGENT", "parts": [{"type": "text", "text": "<ok> & done\u2028 ✓ 😀"}], "contextId": None, "messageId": "r-1",
         "selfEval": {"accuracy": 0.9, "completeness": 1.0, "clarity": 0.75, "safety": 1e-05, "latency": 1e16, "cost": 0.1}})
