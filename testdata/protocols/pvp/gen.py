#!/usr/bin/env python3
# Regenerates the pvp vectors in this directory (python3 gen.py). The .json
# files and their .expect files are what the Go tests read; this script is
# only how they were written.
import os
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
import json, copy, os
D = os.path.join(ROOT, "pvp")
os.makedirs(D, exist_ok=True)
for f in os.listdir(D):
    if f.endswith(".json") or f.endswith(".expect"): os.remove(os.path.join(D, f))

spec = [
("spec-a1-session-create", '''{
  "v": 1,
  "id": "01HX7K9P4QZCVD3N8MYW6R5T2B",
  "ts": "2026-01-30T20:00:00.000Z",
  "session": "ses_01HX7K9P4QZCVD3N8MYW6R5T2B",
  "sender": "alice_01",
  "type": "session.create",
  "payload": {
    "name": "Auth Feature",
    "config": {
      "require_approval_for": ["shell_execute", "file_write"],
      "default_gate_quorum": { "type": "any", "count": 1 },
      "allow_forks": true,
      "max_participants": 5,
      "ordering_mode": "causal",
      "on_participant_timeout": "skip",
      "heartbeat_interval_seconds": 30,
      "idle_timeout_seconds": 120,
      "away_timeout_seconds": 300
    }
  }
}
'''),
("spec-a2-session-join", '''{
  "v": 1,
  "id": "01HX7K9Q5RAEWF4SG9NX7S6U3C",
  "ts": "2026-01-30T20:00:01.000Z",
  "session": "ses_01HX7K9P4QZCVD3N8MYW6R5T2B",
  "sender": "claude_01",
  "type": "session.join",
  "payload": {
    "participant": {
      "id": "claude_01",
      "name": "Claude Assistant",
      "type": "agent",
      "roles": ["driver"],
      "capabilities": ["prompt"],
      "transport": "websocket"
    },
    "supported_versions": [1]
  }
}
'''),
("spec-a3-prompt-submit", '''{
  "v": 1,
  "id": "01HX7KAR6SBFXG5TH0PY8T7V4D",
  "ts": "2026-01-30T20:01:00.000Z",
  "session": "ses_01HX7K9P4QZCVD3N8MYW6R5T2B",
  "sender": "alice_01",
  "type": "prompt.submit",
  "payload": {
    "content": "Implement JWT authentication middleware",
    "target_agent": "claude_01",
    "contributors": ["alice_01"],
    "context_keys": ["requirements"]
  }
}
'''),
("spec-a4-tool-propose", '''{
  "v": 1,
  "id": "01HX7KBS7TCGYH6UI1QZ9U8W5E",
  "ts": "2026-01-30T20:01:30.000Z",
  "session": "ses_01HX7K9P4QZCVD3N8MYW6R5T2B",
  "sender": "claude_01",
  "type": "tool.propose",
  "payload": {
    "tool_name": "shell_execute",
    "arguments": { "command": ["npm", "install", "jsonwebtoken"] },
    "agent": "claude_01",
    "risk_level": "medium",
    "description": "Install jsonwebtoken package",
    "requires_approval": true,
    "category": "shell_execute"
  }
}
'''),
("spec-a5-tool-approve", '''{
  "v": 1,
  "id": "01HX7KCT8UDHZI7VJ2RA0V9X6F",
  "ts": "2026-01-30T20:01:45.000Z",
  "session": "ses_01HX7K9P4QZCVD3N8MYW6R5T2B",
  "sender": "alice_01",
  "type": "tool.approve",
  "ref": "01HX7KBS7TCGYH6UI1QZ9U8W5E",
  "payload": {
    "tool_proposal": "01HX7KBS7TCGYH6UI1QZ9U8W5E",
    "approver": "alice_01",
    "comment": "Go ahead"
  }
}
'''),
]

def sumlines(m):
    out = []
    if not isinstance(m, dict): return out
    for k in ("session", "sender", "type", "id"):
        if isinstance(m.get(k), str): out.append("summary.%s: %s" % (k, m[k]))
    s = m.get("seq")
    if isinstance(s, int) and not isinstance(s, bool): out.append("summary.seq: %d" % s)
    return out

def claimlines(m):
    # the store claims of gate messages (protocols/pvp/gatestate.go)
    if not isinstance(m, dict): return []
    t, p = m.get("type"), m.get("payload") or {}
    key = lambda *parts: '"' + "\\x00".join(parts) + '"'
    if t == "gate.request":
        q = p["quorum"]
        rule = {"any": lambda: "any:%d" % q["count"], "role": lambda: "role:%s:%d" % (q["role"], q["count"])}.get(q["type"], lambda: q["type"])()
        # the quorum as Go marshals Quorum: type, count, role, participants (omitempty)
        qj = {"type": q["type"]}
        for f in ("count", "role", "participants"):
            if q.get(f): qj[f] = q[f]
        quorum = "quorum:" + json.dumps(qj, separators=(",", ":"))
        return ["claim: pvp_gate_request %s %s - -" % (key(m["session"], m["id"]), rule),
                "claim: pvp_gate_vote %s %s - invalid_field" % (key(m["session"], m["id"], ""), quorum)]
    if t in ("gate.approve", "gate.reject"):
        vote = "approve" if t == "gate.approve" else "reject"
        return ["claim: pvp_gate_vote %s %s replay_detected replay_detected" % (key(m["session"], p["gate"], m["sender"]), vote)]
    return []

def write(name, body, valid, errors=(), comment=None, env=None):
    mode = "wb" if isinstance(body, bytes) else "w"
    with open(os.path.join(D, name + ".json"), mode) as f: f.write(body)
    lines = []
    if comment: lines.append("# " + comment)
    lines += ["protocol: pvp", "valid: " + ("true" if valid else "false")]
    lines += ["error: " + e for e in errors]
    lines += sumlines(env)
    if valid: lines += claimlines(env)
    with open(os.path.join(D, name + ".expect"), "w") as f: f.write("\n".join(lines) + "\n")

for name, body in spec:
    write(name, body, True, comment="pvp-v1.0.0-draft.md Appendix A, verbatim (the // comment line left out)", env=json.loads(body))

CR = {"hash": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", "size_bytes": 4, "mime_type": "text/plain", "storage": "local"}
CONFIG = json.loads(spec[0][1])["payload"]["config"]
ANN = {"id": "bob_01", "name": "Bob", "type": "human", "roles": ["navigator", "approver"], "transport": "websocket"}
# one valid payload per type: (payload, required fields, {enum field: bad value})
P = {
 "session.create": ({"config": CONFIG}, ["config"], {}),
 "session.join": ({"participant": ANN, "supported_versions": [1]}, ["participant", "supported_versions"], {}),
 "session.leave": ({}, [], {}),
 "session.end": ({"reason": "done", "final_state": "completed"}, ["reason", "final_state"], {"final_state": "finished"}),
 "session.config_update": ({"changes": {"allow_forks": False}, "reason": "focus"}, ["changes", "reason"], {}),
 "participant.announce": (ANN, ["id", "name", "type", "roles", "transport"], {"type": "robot"}),
 "participant.role_change": ({"participant": "bob_01", "old_roles": ["observer"], "new_roles": ["approver"], "changed_by": "alice_01"}, ["participant", "old_roles", "new_roles", "changed_by"], {}),
 "heartbeat.ping": ({}, [], {}),
 "heartbeat.pong": ({}, [], {}),
 "presence.update": ({"participant": "bob_01", "status": "idle", "last_active": "2026-01-30T20:05:00.000Z"}, ["participant", "status", "last_active"], {"status": "busy"}),
 "context.add": ({"key": "requirements", "content_type": "text", "content": "Use RS256."}, ["key", "content_type"], {"content_type": "video"}),
 "context.update": ({"key": "requirements", "new_content": "Use RS256 and ES256.", "reason": "ES256 too"}, ["key", "reason"], {}),
 "context.remove": ({"key": "requirements", "reason": "obsolete"}, ["key", "reason"], {}),
 "secret.share": ({"key": "db", "scope": ["claude_01"], "value_ref": "vault://db/url", "secret_type": "database_url"}, ["key", "scope", "value_ref"], {"secret_type": "password"}),
 "secret.revoke": ({"key": "db", "reason": "rotated"}, ["key", "reason"], {}),
 "prompt.draft": ({"content": "Implement JWT", "contributors": ["alice_01", "bob_01"]}, ["content", "contributors"], {}),
 "prompt.submit": ({"content": "Implement JWT", "target_agent": "claude_01", "contributors": ["alice_01"], "context_keys": [], "config": {"temperature": 0.2, "max_tokens": 4096}}, ["content", "target_agent", "contributors", "context_keys"], {}),
 "prompt.amend": ({"original_prompt": "01HX7KAR6SBFXG5TH0PY8T7V4D", "amendment": "Also refresh tokens", "reason": "forgot"}, ["original_prompt", "amendment", "reason"], {}),
 "thinking.start": ({"agent": "claude_01", "prompt_ref": "01HX7KAR6SBFXG5TH0PY8T7V4D", "visible_to": "approvers_only"}, ["agent", "prompt_ref", "visible_to"], {"visible_to": "everyone"}),
 "thinking.chunk": ({"text": "Considering middleware order"}, ["text"], {}),
 "thinking.end": ({"summary": "Plan ready", "duration_ms": 1200}, [], {}),
 "response.start": ({"agent": "claude_01", "prompt_ref": "01HX7KAR6SBFXG5TH0PY8T7V4D"}, ["agent", "prompt_ref"], {}),
 "response.chunk": ({"text": "I will add"}, ["text"], {}),
 "response.end": ({"finish_reason": "tool_use", "usage": {"input_tokens": 1200, "output_tokens": 300, "cost_usd": 0.0123}}, ["finish_reason"], {"finish_reason": "done"}),
 "tool.propose": (json.loads(spec[3][1])["payload"], ["tool_name", "arguments", "agent", "risk_level", "description", "requires_approval", "category"], {"risk_level": "extreme", "category": "email"}),
 "tool.approve": (json.loads(spec[4][1])["payload"], ["tool_proposal", "approver"], {}),
 "tool.reject": ({"tool_proposal": "01HX7KBS7TCGYH6UI1QZ9U8W5E", "rejector": "bob_01", "reason": "pin the version"}, ["tool_proposal", "rejector", "reason"], {}),
 "tool.execute": ({"tool_proposal": "01HX7KBS7TCGYH6UI1QZ9U8W5E", "approved_by": ["alice_01"]}, ["tool_proposal", "approved_by"], {}),
 "tool.output": ({"tool_proposal": "01HX7KBS7TCGYH6UI1QZ9U8W5E", "stream": "stdout", "text": "added 1 package", "complete": False}, ["tool_proposal", "stream", "text", "complete"], {"stream": "stdlog"}),
 "tool.result": ({"tool_proposal": "01HX7KBS7TCGYH6UI1QZ9U8W5E", "success": True, "result": {"exit_code": 0}, "duration_ms": 2300}, ["tool_proposal", "success", "duration_ms"], {}),
 "gate.request": ({"action_type": "tool", "action_ref": "01HX7KBS7TCGYH6UI1QZ9U8W5E", "quorum": {"type": "role", "role": "approver", "count": 2}, "timeout_seconds": 300, "message": "claude_01 wants to execute shell_execute"}, ["action_type", "action_ref", "quorum", "timeout_seconds", "message"], {"action_type": "email"}),
 "gate.approve": ({"gate": "01HX7KD00000000000000000G1", "approver": "bob_01"}, ["gate", "approver"], {}),
 "gate.reject": ({"gate": "01HX7KD00000000000000000G1", "rejector": "bob_01", "reason": "too risky"}, ["gate", "rejector", "reason"], {}),
 "gate.timeout": ({"gate": "01HX7KD00000000000000000G1", "approvals_received": 1, "approvals_required": 2, "resolution": "escalated"}, ["gate", "approvals_received", "approvals_required", "resolution"], {"resolution": "ignored"}),
 "interrupt.raise": ({"urgency": "stop", "message": "Wrong branch!", "inject_context_ref": CR}, ["urgency", "message"], {"urgency": "urgent"}),
 "interrupt.acknowledge": ({"interrupt": "01HX7KE00000000000000000I1", "by": "claude_01", "action_taken": "stopped"}, ["interrupt", "by", "action_taken"], {"action_taken": "refused"}),
 "fork.create": ({"name": "explore-auth-approach", "from_point": "01HX7KAR6SBFXG5TH0PY8T7V4D", "reason": "try sessions", "participants": ["alice_01", "claude_01"], "copy_context": True}, ["name", "from_point", "reason", "participants", "copy_context"], {}),
 "fork.switch": ({"target_fork": "explore-auth-approach"}, ["target_fork"], {}),
 "merge.propose": ({"source_fork": "explore-auth-approach", "target_fork": "main", "strategy": "append", "summary": "sessions work better"}, ["source_fork", "target_fork", "strategy", "summary"], {"strategy": "squash"}),
 "merge.execute": ({"merge_proposal": "01HX7KF00000000000000000M1", "resolved_conflicts": [{"conflict_id": "c1", "resolution": "use_source"}]}, ["merge_proposal"], {}),
 "error": ({"code": "GATE_FAILED", "message": "gate rejected", "recoverable": True, "related_to": "01HX7KD00000000000000000G1"}, ["code", "message", "recoverable"], {"code": "OOPS"}),
}
assert len(P) == 41, len(P)

n = [0]
def env(t, payload, sender="claude_01"):
    n[0] += 1
    return {"v": 1, "id": "01HX7KZ%019d" % n[0], "ts": "2026-01-30T20:10:00.000Z", "session": "ses_01HX7K9P4QZCVD3N8MYW6R5T2B",
            "sender": sender, "type": t, "payload": payload}

def dump(e): return json.dumps(e, indent=2, ensure_ascii=False) + "\n"
def slug(t): return t.replace(".", "-").replace("_", "-")

for t, (p, reqs, enums) in P.items():
    e = env(t, copy.deepcopy(p))
    write("type-" + slug(t), dump(e), True, comment="a valid %s" % t, env=e)
    for f in reqs:
        m = copy.deepcopy(e); del m["payload"][f]
        errs = ["missing_field payload." + f]
        if t == "context.add": pass
        write("type-%s--missing-%s" % (slug(t), f.replace("_", "-")), dump(m), False, errs, comment="%s: %s is REQUIRED" % (t, f), env=m)
    for f, bad in enums.items():
        m = copy.deepcopy(e); m["payload"][f] = bad
        write("type-%s--bad-%s" % (slug(t), f.replace("_", "-")), dump(m), False, ["invalid_field payload." + f], comment="%s: %s %r is not in its enumeration" % (t, f, bad), env=m)

base = json.loads(spec[2][1])
def mut(name, fn, valid, errors=(), comment=None, b=None):
    m = copy.deepcopy(b or base); r = fn(m)
    if isinstance(r, dict): m = r
    write(name, dump(m), valid, errors, comment, env=m)
def setk(k, v):
    def f(m): m[k] = v
    return f
def delk(k):
    def f(m): del m[k]
    return f
def setp(k, v):
    def f(m): m["payload"][k] = v
    return f

# envelope §4.1
for k in ["v", "id", "ts", "session", "sender", "type", "payload"]:
    mut("envelope-missing-" + k, delk(k), False, ["missing_field " + k], "§4.1: %s is REQUIRED" % k)
mut("envelope-v-2", setk("v", 2), False, ["unsupported_version v"], "§3.3: servers MUST reject unsupported versions")
mut("envelope-v-0", setk("v", 0), False, ["unsupported_version v"], "§3.3")
mut("envelope-v-string", setk("v", "1"), False, ["invalid_field v"], "§4.1: v is an integer")
write("envelope-v-1.0", spec[2][1].replace('"v": 1,', '"v": 1.0,'), True, comment="1.0 is the number 1 to the JavaScript reference", env=base)
mut("envelope-type-unknown", setk("type", "prompt.delete"), False, ["unknown_type type"], "§4.3: one of the 41 primitives")
mut("envelope-type-capitalised", setk("type", "Prompt.Submit"), False, ["unknown_type type"], "§4.3: type names are exact")
mut("envelope-type-number", setk("type", 11), False, ["invalid_field type"], "§4.1: type is a string")
mut("envelope-id-empty", setk("id", ""), False, ["invalid_field id"], "§4.1: id is a message id")
mut("envelope-session-number", setk("session", 42), False, ["invalid_field session"], "§4.1: session is a SessionId string")
mut("envelope-ts-bad", setk("ts", "30/01/2026 20:01"), False, ["invalid_field ts"], "§4.1: ts is ISO 8601")
mut("envelope-ts-no-zone", setk("ts", "2026-01-30T20:01:00.000"), True, [], "§4.2: UTC is a SHOULD; an ISO 8601 local time is accepted")
mut("envelope-ts-offset", setk("ts", "2026-01-30T21:01:00+01:00"), True, [], "ISO 8601 with an offset")
mut("envelope-payload-array", setk("payload", []), False, ["invalid_field payload"], "§4.1: payload is an object")
mut("envelope-payload-null", setk("payload", None), False, ["invalid_field payload"], "§4.1: payload is an object")
mut("envelope-seq", setk("seq", 17), True, [], "§4.2: seq in total ordering mode")
mut("envelope-seq-negative", setk("seq", -1), False, ["invalid_field seq"], "§4.2: seq is a monotonically increasing non-negative integer")
mut("envelope-seq-fraction", setk("seq", 1.5), False, ["invalid_field seq"], "§4.2: seq is an integer")
mut("envelope-ref-number", setk("ref", 5), False, ["invalid_field ref"], "§4.1: ref is a MessageId")
mut("envelope-causal-refs", setk("causal_refs", ["01HX7K9P4QZCVD3N8MYW6R5T2B", "01HX7K9Q5RAEWF4SG9NX7S6U3C"]), True, [], "§4.1: causal_refs")
mut("envelope-causal-refs-string", setk("causal_refs", "01HX7K9P4QZCVD3N8MYW6R5T2B"), False, ["invalid_field causal_refs"], "§4.1: causal_refs is an array")
mut("envelope-causal-refs-number-item", setk("causal_refs", ["a", 2]), False, ["invalid_field causal_refs[1]"], "§4.1: causal_refs holds MessageIds")
mut("envelope-fork", setk("fork", "explore-auth-approach"), True, [], "§4.2: fork scope")
mut("envelope-fork-bool", setk("fork", True), False, ["invalid_field fork"], "§4.1: fork is a ForkId")
mut("envelope-unknown-member", setk("x_trace", {"span": 1}), True, [], "unknown members are ignored")
mut("envelope-several", lambda m: (m.update({"v": 3, "ts": 0}), m["payload"].pop("content")), False, ["unsupported_version v", "invalid_field ts", "missing_field payload.content"], "every problem is reported")
mut("envelope-unknown-type-payload-unchecked", lambda m: (m.update({"type": "prompt.delete", "payload": {"anything": 1}})), False, ["unknown_type type"], "an unknown type's payload is not checked")

# payload types and rules
mut("prompt-submit-contributors-string", setp("contributors", "alice_01"), False, ["invalid_field payload.contributors"], "§11.2: contributors is ParticipantId[]")
mut("prompt-submit-config-max-tokens-fraction", setp("config", {"max_tokens": 10.5}), False, ["invalid_field payload.config.max_tokens"], "§11.2: max_tokens is an integer")
mut("prompt-submit-config-temperature-string", setp("config", {"temperature": "hot"}), False, ["invalid_field payload.config.temperature"], "§11.2: temperature is a number")
mut("prompt-submit-optional-null", setp("config", None), True, [], "an optional member set to null counts as absent")
mut("prompt-submit-required-null", setp("target_agent", None), False, ["invalid_field payload.target_agent"], "a REQUIRED member may not be null")

A = json.loads(spec[0][1])
mut("session-create-config-bad-category", lambda m: m["payload"]["config"].__setitem__("require_approval_for", ["shell_execute", "teleport"]), False, ["invalid_field payload.config.require_approval_for[1]"], "§6.2: tool categories", A)
mut("session-create-config-missing-ordering", lambda m: m["payload"]["config"].pop("ordering_mode"), False, ["missing_field payload.config.ordering_mode"], "§6.2: ordering_mode is REQUIRED", A)
mut("session-create-config-bad-ordering", lambda m: m["payload"]["config"].__setitem__("ordering_mode", "fifo"), False, ["invalid_field payload.config.ordering_mode"], "§6.2: causal | total", A)
mut("session-create-config-bad-timeout-policy", lambda m: m["payload"]["config"].__setitem__("on_participant_timeout", "kick"), False, ["invalid_field payload.config.on_participant_timeout"], "§6.2: wait | skip | pause_session", A)
mut("session-create-config-forks-string", lambda m: m["payload"]["config"].__setitem__("allow_forks", "yes"), False, ["invalid_field payload.config.allow_forks"], "§6.2: allow_forks is a boolean", A)
mut("session-create-config-max-negative", lambda m: m["payload"]["config"].__setitem__("max_participants", -5), False, ["invalid_field payload.config.max_participants"], "§6.2: max_participants is a count", A)
for qname, q, ok, errs in [
    ("all", {"type": "all"}, True, []),
    ("majority", {"type": "majority"}, True, []),
    ("specific", {"type": "specific", "participants": ["alice_01", "bob_01"]}, True, []),
    ("role", {"type": "role", "role": "approver", "count": 1}, True, []),
    ("any-zero", {"type": "any", "count": 0}, False, ["invalid_field payload.config.default_gate_quorum.count"]),
    ("any-no-count", {"type": "any"}, False, ["missing_field payload.config.default_gate_quorum.count"]),
    ("role-bad-role", {"type": "role", "role": "boss", "count": 1}, False, ["invalid_field payload.config.default_gate_quorum.role"]),
    ("specific-empty", {"type": "specific", "participants": []}, False, ["invalid_field payload.config.default_gate_quorum.participants"]),
    ("specific-missing", {"type": "specific"}, False, ["missing_field payload.config.default_gate_quorum.participants"]),
    ("unknown-type", {"type": "unanimous"}, False, ["invalid_field payload.config.default_gate_quorum.type"]),
    ("string", "majority", False, ["invalid_field payload.config.default_gate_quorum"]),
]:
    mut("session-create-quorum-" + qname, (lambda q: lambda m: m["payload"]["config"].__setitem__("default_gate_quorum", q))(q), ok, errs, "§14.2 quorum rule " + json.dumps(q), A)
mut("session-config-update-partial", lambda m: m.update({"type": "session.config_update", "payload": {"changes": {"max_participants": 8}, "reason": "more people"}}), True, [], "§6.6: changes is a Partial<SessionConfig>")
mut("session-config-update-bad-change", lambda m: m.update({"type": "session.config_update", "payload": {"changes": {"ordering_mode": "random"}, "reason": "x"}}), False, ["invalid_field payload.changes.ordering_mode"], "§6.6: changed fields keep their types")

J = json.loads(spec[1][1])
mut("session-join-no-v1", lambda m: m["payload"].__setitem__("supported_versions", [2, 3]), False, ["unsupported_version payload.supported_versions"], "§6.3: the server MUST verify the version is supported", J)
mut("session-join-versions-empty", lambda m: m["payload"].__setitem__("supported_versions", []), False, ["unsupported_version payload.supported_versions"], "§6.3: supporting no version", J)
mut("session-join-bad-role", lambda m: m["payload"]["participant"].__setitem__("roles", ["driver", "pilot"]), False, ["invalid_field payload.participant.roles[1]"], "§7.2: roles", J)
mut("session-join-bad-capability", lambda m: m["payload"]["participant"].__setitem__("capabilities", ["deploy"]), False, ["invalid_field payload.participant.capabilities[0]"], "§7.3: capabilities", J)
mut("session-join-participant-missing-name", lambda m: m["payload"]["participant"].pop("name"), False, ["missing_field payload.participant.name"], "§7.1: name is REQUIRED", J)
mut("session-join-transport-email", lambda m: m["payload"]["participant"].__setitem__("transport", "email"), True, [], "§7.1: TransportType is not enumerated by the spec", J)

def retype(t, payload):
    def f(m): m.update({"type": t, "payload": payload})
    return f
mut("context-add-neither-content", retype("context.add", {"key": "k", "content_type": "text"}), False, ["missing_field payload.content"], "§9.1: either content or content_ref MUST be provided")
mut("context-add-content-ref", retype("context.add", {"key": "spec", "content_type": "file", "content_ref": CR, "visible_to": ["alice_01"], "tags": ["auth"]}), True, [], "§9.1/§9.2: external content")
mut("context-add-content-object", retype("context.add", {"key": "session:tasks", "content_type": "structured", "content": {"tasks": []}}), True, [], "§9.1: content may be an object")
mut("context-add-content-number", retype("context.add", {"key": "k", "content_type": "text", "content": 5}), False, ["invalid_field payload.content"], "§9.1: content is string | object")
mut("context-add-ref-bad-storage", retype("context.add", {"key": "k", "content_type": "file", "content_ref": dict(CR, storage="ftp")}), False, ["invalid_field payload.content_ref.storage"], "§9.2: storage enum")
mut("context-add-ref-missing-hash", retype("context.add", {"key": "k", "content_type": "file", "content_ref": {k: v for k, v in CR.items() if k != "hash"}}), False, ["missing_field payload.content_ref.hash"], "§9.2: hash is REQUIRED")
mut("secret-share-with-value", retype("secret.share", {"key": "db", "scope": ["claude_01"], "value_ref": "vault://db", "value": "postgres://u:p@h/db"}), False, ["invalid_field payload.value"], "§20.3: secret values MUST NOT be included in message history")
mut("secret-share-bad-expiry", retype("secret.share", {"key": "db", "scope": ["claude_01"], "value_ref": "vault://db", "expires_at": "tomorrow"}), False, ["invalid_field payload.expires_at"], "§10: expires_at is ISO 8601")
mut("thinking-start-visible-list", retype("thinking.start", {"agent": "claude_01", "prompt_ref": "p1", "visible_to": ["alice_01"]}), True, [], "§12.1: visible_to may list participants")
mut("thinking-start-visible-number", retype("thinking.start", {"agent": "claude_01", "prompt_ref": "p1", "visible_to": 3}), False, ["invalid_field payload.visible_to"], "§12.1: visible_to")
mut("response-end-usage-missing-tokens", retype("response.end", {"finish_reason": "complete", "usage": {"input_tokens": 5}}), False, ["missing_field payload.usage.output_tokens"], "§12.2: UsageStats.output_tokens is REQUIRED")
mut("tool-result-duration-string", retype("tool.result", {"tool_proposal": "t", "success": False, "error": "exit 1", "duration_ms": "2s"}), False, ["invalid_field payload.duration_ms"], "§13.3: duration_ms is an integer")
mut("tool-propose-arguments-array", retype("tool.propose", dict(P["tool.propose"][0], arguments=["npm"])), False, ["invalid_field payload.arguments"], "§13.1: arguments is an object")
mut("tool-propose-requires-approval-string", retype("tool.propose", dict(P["tool.propose"][0], requires_approval="true")), False, ["invalid_field payload.requires_approval"], "§13.1: requires_approval is a boolean")
mut("gate-timeout-count-fraction", retype("gate.timeout", dict(P["gate.timeout"][0], approvals_received=0.5)), False, ["invalid_field payload.approvals_received"], "§14.3: counts are integers")
mut("merge-execute-bad-resolution", retype("merge.execute", {"merge_proposal": "m1", "resolved_conflicts": [{"conflict_id": "c1", "resolution": "theirs"}]}), False, ["invalid_field payload.resolved_conflicts[0].resolution"], "§16.3: conflict resolutions")

# §15.2 interrupt / ignore
ack = {"interrupt": "01HX7KE00000000000000000I1", "by": "claude_01"}
mut("interrupt-ack-ignored-with-reason", retype("interrupt.acknowledge", dict(ack, action_taken="ignored", ignore_reason="finishing the current write")), True, [], "§15.2: a pause may be ignored with a stated reason")
mut("interrupt-ack-ignored-no-reason", retype("interrupt.acknowledge", dict(ack, action_taken="ignored")), False, ["missing_field payload.ignore_reason"], "§15.2: ignore_reason is required if action_taken is ignored")
mut("interrupt-ack-ignored-empty-reason", retype("interrupt.acknowledge", dict(ack, action_taken="ignored", ignore_reason="")), False, ["missing_field payload.ignore_reason"], "§15.2: a stated reason is not empty")
mut("interrupt-ack-paused-no-reason", retype("interrupt.acknowledge", dict(ack, action_taken="paused")), True, [], "§15.2: no reason needed unless ignored")

# raw
write("not-json", b'{"v": 1, "type": ', False, ["invalid_json"], "truncated JSON")
write("not-object", b'[1, "session.create"]', False, ["invalid_field"], "a message is an object")
write("trailing-data", spec[2][1].encode() + b"\n{}", False, ["invalid_json"], "one message per attachment (stdio NDJSON is not an attachment)")
write("invalid-utf8", spec[2][1].replace("Implement", "Impl\xe9ment").encode("latin-1"), False, ["invalid_json"], "JSON is UTF-8")
