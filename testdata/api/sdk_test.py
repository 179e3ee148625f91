"""Interop test: AgentMail's official Python SDK (agentmail 0.5.0), unchanged,
against `envelopd serve --relay --http` (TestInteropAgentMailPythonSDK starts
the server and sets ENVELOPD_API_URL and ENVELOPD_API_KEY; the venv holds
agentmail, svix and mcp from ../shared/interop/python).

Every SDK method envelopd serves is called at least once, with strict
response validation: the SDK builds its models with construct_type, which
never validates, so every raw client's construct_type is replaced by pydantic
validation of the declared type (a missing required field or a wrong type
fails the call). Prints "ok" when everything passed.
"""

import base64
import datetime as dt
import http.server
import importlib
import json
import os
import pkgutil
import sys
import threading
import time
import typing

import pydantic

import agentmail
from agentmail import AgentMail
from agentmail.environment import AgentMailEnvironment
from agentmail.core.api_error import ApiError
from agentmail.core import unchecked_base_model
from agentmail.websockets.types.subscribe import Subscribe
from svix.webhooks import Webhook as SvixWebhook

VALIDATED: typing.Dict[str, int] = {}


def strict_construct(*, type_, object_):
    """Validates object_ as type_ (pydantic v2), counting the types seen."""
    v = pydantic.TypeAdapter(type_).validate_python(object_)
    VALIDATED[getattr(type_, "__name__", str(type_))] = VALIDATED.get(getattr(type_, "__name__", str(type_)), 0) + 1
    return v


def install_strict():
    for mi in pkgutil.walk_packages(agentmail.__path__, "agentmail."):
        if mi.name.endswith("raw_client") or mi.name.endswith("socket_client"):
            importlib.import_module(mi.name)
    n = 0
    for name, mod in list(sys.modules.items()):
        if name.startswith("agentmail.") and getattr(mod, "construct_type", None) is unchecked_base_model.construct_type:
            if name.endswith("raw_client") or name.endswith("socket_client") or name.endswith(".client"):
                mod.construct_type = strict_construct
                n += 1
    assert n >= 10, f"strict validation installed in {n} modules only"


BASE = os.environ["ENVELOPD_API_URL"]
KEY = os.environ["ENVELOPD_API_KEY"]
SHOP = "shop@shop.test"
BOB = "bob@buyer.test"


def client(key=KEY):
    return AgentMail(
        api_key=key,
        environment=AgentMailEnvironment(http=BASE, websockets=BASE.replace("http", "ws", 1)),
    )


def wait_for(what, fn, tries=400):
    for _ in range(tries):
        v = fn()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


def received(c, inbox, typ, n=1):
    def f():
        lst = c.inboxes.messages.list(inbox, labels=["received"], limit=100, ascending=True)
        ms = [m for m in lst.messages if (m.model_extra or {}).get("envelopay", {}).get("type") == typ]
        return ms[n - 1] if len(ms) >= n else None

    return wait_for(f"{typ} in {inbox}", f)


def expect_error(status, fn, name=None):
    try:
        fn()
    except ApiError as e:
        assert e.status_code == status, f"want {status}, got {e.status_code}: {e.body}"
        if name:
            assert type(e).__name__ == name, f"want {name}, got {type(e).__name__}"
        return e
    raise AssertionError(f"want an ApiError {status}")


class Hooks(http.server.BaseHTTPRequestHandler):
    got: typing.List[typing.Tuple[bytes, typing.Dict[str, str]]] = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        Hooks.got.append((body, {k.lower(): v for k, v in self.headers.items()}))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *a):
        pass


def main():
    install_strict()
    c = client()

    # Inboxes: create (idempotent by client_id), list, get, update.
    shop = c.inboxes.create(request={"username": "shop", "domain": "shop.test", "client_id": "shop-1"})
    assert shop.inbox_id == SHOP, shop
    again = c.inboxes.create(request={"username": "shop", "domain": "shop.test", "client_id": "shop-1"})
    assert again.inbox_id == SHOP and again.created_at == shop.created_at
    c.inboxes.create(request={"username": "bob", "domain": "buyer.test", "display_name": "Bob"})
    tmp = c.inboxes.create(request={"username": "tmp", "domain": "shop.test"})
    assert sorted(i.inbox_id for i in c.inboxes.list().inboxes) == [BOB, SHOP, "tmp@shop.test"]
    assert c.inboxes.get(BOB).display_name == "Bob"
    assert c.inboxes.update(tmp.inbox_id, display_name="Temp").display_name == "Temp"
    c.inboxes.delete(tmp.inbox_id)
    expect_error(404, lambda: c.inboxes.get(tmp.inbox_id), "NotFoundError")

    # The one pod and organisation.
    assert [x.pod_id for x in c.pods.list().pods] == ["envelopd"]
    assert c.pods.get("envelopd").name == "envelopd"
    assert sorted(i.inbox_id for i in c.pods.inboxes.list("envelopd").inboxes) == [BOB, SHOP]
    assert c.pods.inboxes.get("envelopd", SHOP).pod_id == "envelopd"
    assert c.pods.inboxes.update("envelopd", BOB, display_name="Bob").display_name == "Bob"
    pi = c.pods.inboxes.create("envelopd", username="tmp2", domain="shop.test")
    c.pods.inboxes.delete("envelopd", pi.inbox_id)
    org = c.organizations.get()
    assert org.organization_id == "envelopd" and org.inbox_count == 2, org
    expect_error(400, lambda: c.pods.create(name="second"), "ValidationError")
    expect_error(404, lambda: c.pods.get("second"), "NotFoundError")
    expect_error(400, lambda: c.pods.delete("envelopd"))  # the SDK declares no 400 here: ApiError

    # A webhook for the shop's inbox; its secret comes back from get and
    # list (AgentMail's "Verifying webhooks" fetches it with get) and
    # verifies a delivery with svix.
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hooks)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    # The SDK's create has no headers argument (the TypeScript one has):
    # custom delivery headers go in as an extra body parameter.
    hook = c.webhooks.create(url=f"http://127.0.0.1:{srv.server_port}/hook", event_types=["message.received"],
                             inbox_ids=[SHOP], client_id="hook-1",
                             request_options={"additional_body_parameters": {"headers": {"X-Agent-Token": "tok-py"}}})
    got = c.webhooks.get(hook.webhook_id)
    assert got.secret == hook.secret and got.secret.startswith("whsec_"), got
    assert [w.secret for w in c.webhooks.list().webhooks if w.webhook_id == hook.webhook_id] == [hook.secret]
    upd = c.webhooks.update(hook.webhook_id, add_inbox_ids=[BOB])
    assert sorted(upd.inbox_ids) == [BOB, SHOP], upd
    upd = c.webhooks.update(hook.webhook_id, remove_inbox_ids=[BOB])
    assert upd.inbox_ids == [SHOP], upd

    # WHICH (bare) from Bob.
    # The websocket: subscribed, then the WHICH's message.received, both
    # strictly validated (an unvalidated answer would come back a dict).
    with c.websockets.connect() as ws:
        ws.send_subscribe(Subscribe(event_types=["message.received"], inbox_ids=[SHOP]))
        sub = ws.recv()
        assert type(sub).__name__ == "Subscribed", sub
        which = c.inboxes.messages.send(BOB, to=SHOP, subject="WHICH", text="")
        ev = ws.recv()
        assert type(ev).__name__ == "MessageReceivedEvent", ev
        assert ev.message.subject == "WHICH" and ev.message.inbox_id == SHOP, ev.message
    assert which.message_id.startswith("<") and which.message_id.endswith("@buyer.test>"), which
    w = received(c, SHOP, "which")
    assert w.thread_id == which.thread_id
    assert "received" in w.labels and "accepted" in w.labels

    # The webhook delivery of that WHICH, verified with the fetched secret.
    body, headers = wait_for("webhook delivery", lambda: Hooks.got[0] if Hooks.got else None)
    SvixWebhook(c.webhooks.get(hook.webhook_id).secret).verify(body, headers)
    assert json.loads(body)["event_type"] == "message.received"
    assert headers["x-agent-token"] == "tok-py", headers

    # METHODS: the subject from the JSON's type and note.
    c.inboxes.messages.reply(SHOP, w.message_id, text=json.dumps({
        "v": "0.2.0", "type": "methods", "id": "mth_1", "note": "SOL accepted",
        "rails": [{"chain": "solana", "token": "SOL", "wallet": "6dL6n77jJFWq4bu3cQp57H8rMUPEXu7uYN1XApPxpUif",
                   "price": "500000000"}]}))
    m = received(c, BOB, "methods")
    assert m.subject == "METHODS | SOL accepted", m.subject
    assert m.thread_id == which.thread_id

    # ORDER written the Envelopay reference's way: "TYPE | note" on the
    # first line of text, then the JSON.
    order = {"v": "0.2.0", "type": "order", "id": "ord_1", "task": {"description": "Review PR #417"}}
    c.inboxes.messages.reply(BOB, m.message_id, text="ORDER | Review PR #417\n" + json.dumps(order))
    o = received(c, SHOP, "order")
    assert o.subject == "ORDER | Review PR #417", o.subject

    # FULFILL with an attachment; reply_all.
    c.inboxes.messages.reply_all(SHOP, o.message_id, text=json.dumps({
        "v": "0.2.0", "type": "fulfill", "id": "ful_1", "order_ref": "ord_1", "result": {"summary": "Approved"}}),
        attachments=[{"filename": "review.txt", "content_type": "text/plain",
                      "content": base64.b64encode(b"LGTM\n").decode()}])
    f = received(c, BOB, "fulfill")
    full = c.inboxes.messages.get(BOB, f.message_id)
    assert len(full.attachments or []) == 1, full.attachments
    att = full.attachments[0]
    a = c.inboxes.messages.get_attachment(BOB, f.message_id, att.attachment_id)
    assert a.size == 5 and a.filename == "review.txt", a
    ta = c.inboxes.threads.get_attachment(BOB, f.thread_id, att.attachment_id)
    assert ta.attachment_id == att.attachment_id
    oa = c.threads.get_attachment(f.thread_id, att.attachment_id)
    assert oa.attachment_id == att.attachment_id

    # PAY, then the same proof under a new id: refused unless forced.
    pay = {"v": "0.2.0", "type": "pay", "id": "pay_1", "amount": "500000000", "token": "SOL", "chain": "solana",
           "proof": {"tx": "5xQ7pysdkinterop"}}
    c.inboxes.messages.reply(BOB, f.message_id, text=json.dumps(pay))
    p1 = received(c, SHOP, "pay")
    replay = dict(pay, id="pay_2")
    e = expect_error(400, lambda: c.inboxes.messages.reply(BOB, f.message_id, text=json.dumps(replay)),
                     "ValidationError")
    errs = e.body.model_dump()["errors"]
    assert any(x.get("code") == "duplicate_proof" for x in errs), errs
    c.inboxes.messages.reply(BOB, f.message_id, text=json.dumps(replay),
                             request_options={"additional_query_parameters": {"force": "true"}})
    p2 = received(c, SHOP, "pay", 2)
    assert "duplicate" in p2.labels

    # Forward to a second address of the shop's own domain.
    fw = c.inboxes.messages.forward(SHOP, p1.message_id, to=BOB, text="for your records")
    assert fw.message_id and fw.thread_id

    # Threads.
    threads = c.inboxes.threads.list(SHOP)
    assert threads.count >= 1, threads
    t = c.inboxes.threads.get(SHOP, p1.thread_id)
    assert t.message_count >= 6, t
    assert c.threads.get(t.thread_id).thread_id == t.thread_id
    assert c.threads.list().count >= 2
    c.inboxes.threads.update(SHOP, t.thread_id, add_labels=["deal"])
    c.threads.update(t.thread_id, add_labels=["deal2"], remove_labels=["deal"])
    assert c.pods.threads.get("envelopd", t.thread_id).thread_id == t.thread_id
    assert c.pods.threads.list("envelopd").count >= 2
    c.pods.threads.update("envelopd", t.thread_id, add_labels=["deal3"])
    assert c.pods.threads.get_attachment("envelopd", f.thread_id, att.attachment_id).attachment_id == att.attachment_id
    assert "deal" in c.inboxes.threads.get(SHOP, t.thread_id).labels
    assert "deal2" in c.threads.get(t.thread_id).labels  # the first inbox showing it

    # The raw bytes.
    raw = c.inboxes.messages.get_raw(SHOP, p1.message_id)
    assert raw.size > 0 and raw.download_url.startswith(BASE)

    # Labels, list filters and paging.
    assert "paid" in c.inboxes.messages.update(SHOP, p1.message_id, add_labels=["paid"]).labels
    assert [x.message_id for x in c.inboxes.messages.list(SHOP, labels=["paid"]).messages] == [p1.message_id]
    page1 = c.inboxes.messages.list(SHOP, limit=2)
    page2 = c.inboxes.messages.list(SHOP, limit=2, page_token=page1.next_page_token)
    assert page1.count == 2 and page2.count >= 1
    assert not {x.message_id for x in page1.messages} & {x.message_id for x in page2.messages}
    since = c.inboxes.messages.list(SHOP, after=dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc))
    assert since.count >= 5

    # Deletes.
    c.inboxes.messages.delete(SHOP, p2.message_id)
    expect_error(404, lambda: c.inboxes.messages.get(SHOP, p2.message_id), "NotFoundError")
    bt = c.inboxes.threads.list(BOB).threads[0]
    c.threads.delete(bt.thread_id)
    expect_error(404, lambda: c.inboxes.threads.get(BOB, bt.thread_id), "NotFoundError")
    c.inboxes.threads.delete(SHOP, t.thread_id)
    c.webhooks.delete(hook.webhook_id)
    expect_error(404, lambda: c.webhooks.get(hook.webhook_id), "NotFoundError")

    # Drafts: create, get, list (inbox, organisation, pod), update, send;
    # a scheduled one is sent by the server when due; bad input is a 4xx.
    d = c.inboxes.drafts.create(SHOP, to=[BOB], subject="draft", text="first", client_id="draft-1")
    assert d.draft_id.startswith("drf_") and d.inbox_id == SHOP, d
    assert c.inboxes.drafts.get(SHOP, d.draft_id).text == "first"
    assert c.inboxes.drafts.update(SHOP, d.draft_id, text="second").text == "second"
    assert [x.draft_id for x in c.inboxes.drafts.list(SHOP).drafts] == [d.draft_id]
    assert [x.draft_id for x in c.drafts.list().drafts] == [d.draft_id]
    assert c.drafts.get(d.draft_id).draft_id == d.draft_id
    assert [x.draft_id for x in c.pods.drafts.list("envelopd").drafts] == [d.draft_id]
    assert c.pods.drafts.get("envelopd", d.draft_id).draft_id == d.draft_id
    sent = c.inboxes.drafts.send(SHOP, d.draft_id, add_labels=["from-draft"])
    assert sent.message_id == "<draft." + d.draft_id[4:] + "@shop.test>", sent
    expect_error(404, lambda: c.inboxes.drafts.get(SHOP, d.draft_id), "NotFoundError")
    gone = c.inboxes.drafts.create(SHOP, to=[BOB], text="never")
    c.inboxes.drafts.delete(SHOP, gone.draft_id)
    expect_error(404, lambda: c.drafts.get(gone.draft_id), "NotFoundError")
    when = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=2)
    later = c.inboxes.drafts.create(SHOP, to=[BOB], subject="scheduled", text="later", send_at=when)
    assert later.send_status == "scheduled" and later.send_at is not None, later
    # drafts.create declares no 400 type: the SDK raises its ApiError with
    # envelopd's ValidationError body.
    e = expect_error(400, lambda: c.inboxes.drafts.create(SHOP, to=[BOB],
                                                          send_at=dt.datetime(2001, 1, 1, tzinfo=dt.timezone.utc)))
    assert e.body["name"] == "ValidationError" and "send_at" in e.body["message"], e.body
    e = expect_error(413, lambda: c.inboxes.drafts.create(SHOP, to=[BOB], text="x" * (30 << 20)))
    assert e.body["name"] == "PayloadTooLargeError", e.body
    # Nothing half-written: the scheduled draft, or none once it is sent
    # (its 2 s may be over on a loaded machine).
    assert [x.draft_id for x in c.drafts.list().drafts] in ([later.draft_id], []), c.drafts.list()
    wait_for("the scheduled draft sent", lambda: [m for m in c.inboxes.messages.list(BOB, labels=["received"]).messages
                                                  if m.subject == "scheduled"])
    expect_error(404, lambda: c.drafts.get(later.draft_id), "NotFoundError")

    # A draft's attachment (inbox, organisation and pod routes), sent with
    # the draft; a bad one is a 400 that writes nothing.
    fd = c.inboxes.drafts.create(SHOP, to=[BOB], subject="draft with a file", text="see",
                                 attachments=[{"filename": "a.txt", "content_type": "text/plain",
                                               "content": base64.b64encode(b"hello file").decode()}])
    assert [a.attachment_id for a in fd.attachments] == ["att_1"] and fd.attachments[0].size == 10, fd
    for a in [c.inboxes.drafts.get_attachment(SHOP, fd.draft_id, "att_1"), c.drafts.get_attachment(fd.draft_id, "att_1"),
              c.pods.drafts.get_attachment("envelopd", fd.draft_id, "att_1")]:
        assert a.size == 10 and a.filename == "a.txt" and a.download_url, a
    expect_error(404, lambda: c.drafts.get_attachment(fd.draft_id, "att_2"), "NotFoundError")
    e = expect_error(400, lambda: c.inboxes.drafts.create(SHOP, to=[BOB], attachments=[{"filename": "x", "content": "!!"}]))
    assert e.body["name"] == "ValidationError" and "attachments[0].content" in e.body["message"], e.body
    c.inboxes.drafts.send(SHOP, fd.draft_id)
    got = wait_for("the draft's attachment received", lambda: [m for m in c.inboxes.messages.list(BOB, labels=["received"]).messages
                                                              if m.subject == "draft with a file"])
    full = c.inboxes.messages.get(BOB, got[0].message_id)
    assert [(a.filename, a.size) for a in full.attachments] == [("a.txt", 10)], full.attachments

    # Lists: the organisation's (= the pod's) and an inbox's; a send to a
    # blocked recipient is the SDK's MessageRejectedError.
    le = c.lists.create("send", "block", entry="Blocked.TEST", reason="test")
    assert le.entry == "blocked.test" and le.entry_type == "domain", le
    assert c.lists.get("send", "block", "blocked.test").reason == "test"
    assert [x.entry for x in c.lists.list("send", "block").entries] == ["blocked.test"]
    assert [x.entry for x in c.pods.lists.list("envelopd", "send", "block").entries] == ["blocked.test"]
    assert c.pods.lists.get("envelopd", "send", "block", "blocked.test").entry == "blocked.test"
    # The refused send is a message.rejected event too (strictly validated).
    with c.websockets.connect() as ws:
        ws.send_subscribe(Subscribe(event_types=["message.rejected"], inbox_ids=[SHOP]))
        assert type(ws.recv()).__name__ == "Subscribed"
        expect_error(403, lambda: c.inboxes.messages.send(SHOP, to="x@blocked.test", subject="s", text="t"), "MessageRejectedError")
        ev = ws.recv()
        assert type(ev).__name__ == "MessageRejectedEvent", ev
        assert ev.reject.inbox_id == SHOP and "blocked.test" in ev.reject.reason and ev.reject.message_id.endswith("@shop.test>"), ev
    c.lists.delete("send", "block", "blocked.test")
    ie = c.inboxes.lists.create(SHOP, "receive", "allow", entry="friend@buyer.test")
    assert ie.entry_type == "email" and ie.inbox_id == SHOP, ie
    assert c.inboxes.lists.get(SHOP, "receive", "allow", "friend@buyer.test").entry == "friend@buyer.test"
    assert c.inboxes.lists.list(SHOP, "receive", "allow").count == 1
    c.inboxes.lists.delete(SHOP, "receive", "allow", "friend@buyer.test")
    pe = c.pods.lists.create("envelopd", "reply", "block", entry="x.test")
    c.pods.lists.delete("envelopd", "reply", "block", pe.entry)
    e = expect_error(400, lambda: c.lists.create("receive", "block", entry="*.wild.test"), "ValidationError")

    # Inbox events: the labels added and removed through the API.
    lm = c.inboxes.messages.list(SHOP, limit=1).messages[0]
    c.inboxes.messages.update(SHOP, lm.message_id, add_labels=["vip"])
    c.inboxes.messages.update(SHOP, lm.message_id, remove_labels=["vip"])
    evs = c.inboxes.events.list(SHOP, limit=10)
    assert [(x.event_type, x.label) for x in evs.events[:2]] == [("label.removed", "vip"), ("label.added", "vip")], evs
    assert evs.events[0].message_id == lm.message_id and evs.events[0].inbox_id == SHOP, evs
    assert c.inboxes.events.list(SHOP, ascending=True, limit=1).events[0].event_type == "label.added"

    # API keys: the secret once; delete revokes.
    k = c.api_keys.create(name="interop")
    assert k.api_key.startswith("ek_" + k.api_key_id + "_"), k
    assert client(k.api_key).inboxes.get(SHOP).inbox_id == SHOP
    assert k.api_key_id in [x.api_key_id for x in c.api_keys.list().api_keys]
    ik = c.inboxes.api_keys.create(SHOP, name="shop only")
    assert [x.api_key_id for x in c.inboxes.api_keys.list(SHOP).api_keys] == [ik.api_key_id]
    expect_error(404, lambda: client(ik.api_key).inboxes.get(BOB), "NotFoundError")
    c.inboxes.api_keys.delete(SHOP, ik.api_key_id)
    pk = c.pods.api_keys.create("envelopd", name="pod")
    assert pk.api_key_id in [x.api_key_id for x in c.pods.api_keys.list("envelopd").api_keys]
    c.pods.api_keys.delete("envelopd", pk.api_key_id)
    c.api_keys.delete(k.api_key_id)
    expect_error(401, lambda: client(k.api_key).inboxes.get(SHOP))

    # Per-operation permissions: the SDK's ApiKeyPermissions (0.5.0 also
    # has thread_read and thread_delete). The Python SDK 0.5.0 has no
    # api_keys.get, api_keys.update or auth.me: they are called as the
    # TypeScript SDK calls them (GET and PATCH /v0/api-keys/{id}, GET
    # /v0/auth/me) through this SDK's own HTTP client, and validated as
    # its ApiKey and as the TypeScript SDK's Identity (written out below).
    from agentmail.api_keys.types.api_key import ApiKey as ApiKeyModel
    from agentmail.api_keys.types.api_key_permissions import ApiKeyPermissions

    class Identity(pydantic.BaseModel):
        model_config = pydantic.ConfigDict(extra="allow")
        scope_type: typing.Literal["organization", "pod", "inbox"]
        scope_id: str
        organization_id: str
        pod_id: typing.Optional[str] = None
        inbox_id: typing.Optional[str] = None
        api_key_id: typing.Optional[str] = None

    def call(cl, method, path, body=None):
        w = cl._client_wrapper
        r = w.httpx_client.request(path, base_url=w.get_environment().http, method=method, json=body)
        assert r.status_code == 200, (method, path, r.status_code, r.text)
        return r.json()

    rk = c.api_keys.create(name="reader", permissions=ApiKeyPermissions(inbox_read=True, thread_read=True, api_key_create=True))
    assert rk.permissions.inbox_read and rk.permissions.thread_read and rk.permissions.message_read is False, rk
    reader = client(rk.api_key)
    assert reader.inboxes.get(SHOP).inbox_id == SHOP
    assert reader.inboxes.threads.list(SHOP).count >= 1
    e = expect_error(403, lambda: reader.inboxes.messages.list(SHOP))
    assert e.body["name"] == "ForbiddenError" and "message_read" in e.body["message"], e.body
    e = expect_error(403, lambda: reader.api_keys.create(permissions=ApiKeyPermissions(message_send=True)))
    assert "message_send" in e.body["message"], e.body
    expect_error(403, lambda: reader.api_keys.list())
    gk = strict_construct(type_=ApiKeyModel, object_=call(c, "GET", f"v0/api-keys/{rk.api_key_id}"))
    assert gk.name == "reader" and gk.permissions.thread_read and gk.permissions.message_send is False, gk
    uk = strict_construct(type_=ApiKeyModel, object_=call(c, "PATCH", f"v0/api-keys/{rk.api_key_id}",
                                                          {"name": "renamed", "permissions": {"inbox_read": True}}))
    assert uk.name == "renamed" and uk.permissions.inbox_read and uk.permissions.thread_read is False, uk
    expect_error(403, lambda: reader.inboxes.threads.list(SHOP))
    me = strict_construct(type_=Identity, object_=call(c, "GET", "v0/auth/me"))
    assert (me.scope_type, me.scope_id, me.organization_id, me.pod_id) == ("organization", "envelopd", "envelopd", None), me
    ik = c.inboxes.api_keys.create(SHOP, name="shop", permissions=ApiKeyPermissions(message_read=True))
    ime = strict_construct(type_=Identity, object_=call(client(ik.api_key), "GET", "v0/auth/me"))
    assert (ime.scope_type, ime.scope_id, ime.pod_id, ime.inbox_id, ime.api_key_id) == ("inbox", SHOP, "envelopd", SHOP, ik.api_key_id), ime
    pk = c.pods.api_keys.create("envelopd", name="pod")
    pme = strict_construct(type_=Identity, object_=call(client(pk.api_key), "GET", "v0/auth/me"))
    assert (pme.scope_type, pme.scope_id, pme.pod_id, pme.inbox_id) == ("pod", "envelopd", "envelopd", None), pme
    for x in (rk, ik, pk):
        c.api_keys.delete(x.api_key_id)

    # Metrics from the event log.
    start = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=1)
    m = c.metrics.query(event_types=["message.sent", "message.received"], start=start, period="1d")
    assert sum(b.count for b in m["message.sent"]) >= 8 and sum(b.count for b in m["message.received"]) >= 8, m
    assert sum(b.count for b in c.inboxes.metrics.query(SHOP, event_types=["message.sent"], start=start)["message.sent"]) >= 3
    assert set(c.pods.metrics.query("envelopd", start=start)) >= {"message.sent", "message.delivered", "message.bounced"}

    # The one pod's domains are the organisation's; update is not
    # implemented (envelopd has none of its settings), nor is another pod.
    pd = c.pods.domains.create("envelopd", domain="pod.example.com", feedback_enabled=False)
    assert pd.domain_id == "pod.example.com" and pd.feedback_enabled is False, pd
    assert [d.domain_id for d in c.pods.domains.list("envelopd").domains] == ["pod.example.com"]
    assert c.pods.domains.get("envelopd", "pod.example.com").status == "NOT_STARTED"
    assert b"pod.example.com" in b"".join(c.pods.domains.get_zone_file("envelopd", "pod.example.com"))
    expect_error(400, lambda: c.pods.domains.create("envelopd", domain="other.example.com", feedback_enabled=True), "ValidationError")
    expect_error(501, lambda: c.pods.domains.update("envelopd", "pod.example.com", feedback_enabled=False))
    c.pods.domains.delete("envelopd", "pod.example.com")
    expect_error(404, lambda: c.pods.domains.get("envelopd", "pod.example.com"), "NotFoundError")
    expect_error(404, lambda: c.pods.domains.list("other"), "NotFoundError")

    # Errors are the SDK's own.
    expect_error(404, lambda: c.inboxes.messages.get(SHOP, "<nope@shop.test>"), "NotFoundError")
    expect_error(401, lambda: client("ek_000000000000_" + "A" * 43).inboxes.list())

    for t in ["Inbox", "ListInboxesResponse", "Webhook", "ListWebhooksResponse", "SendMessageResponse",
              "ListMessagesResponse", "Message", "Thread", "ListThreadsResponse", "AttachmentResponse",
              "RawMessageResponse", "Pod", "ListPodsResponse", "Organization", "Draft", "ListDraftsResponse", "PodListEntry", "ListEntry", "CreateApiKeyResponse", "ListApiKeysResponse", "ListInboxEventsResponse", "ApiKey", "Identity",
              "Domain", "ListDomainsResponse"]:
        assert VALIDATED.get(t), f"{t} never validated: {VALIDATED}"
    print("ok")


if __name__ == "__main__":
    main()
