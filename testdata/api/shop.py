"""The Envelopay reference shop's AgentMail calls, with the Python standard
library only (urllib.request), against `envelopd serve --relay --http`
(TestInteropPythonURLLib sets ENVELOPD_API_URL and ENVELOPD_API_KEY).
Prints "ok" when every check passed; raises otherwise."""
import json
import os
import time
import urllib.parse
import urllib.request

BASE = os.environ["ENVELOPD_API_URL"]
KEY = os.environ["ENVELOPD_API_KEY"]


def call(method, path, body=None, raw=False):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(BASE + path, data=data, method=method, headers={
        "Authorization": "Bearer " + KEY, "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        b = resp.read()
        return b if raw else json.loads(b)


def q(s):
    return urllib.parse.quote(s, safe="")


def wait(fn, what):
    for _ in range(200):
        v = fn()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


shop = call("POST", "/v0/inboxes", {"username": "store"})["inbox_id"]
buyer = call("POST", "/v0/inboxes", {"username": "alice", "domain": "buyer.test"})["inbox_id"]
assert shop == "store@shop.test", shop

order = {"v": "0.2.0", "type": "order", "id": "ord_py", "task": {"description": "The Encrypted Commons, epub"}}
sent = call("POST", "/v0/inboxes/%s/messages/send" % q(buyer), {
    "to": shop, "subject": "ORDER | The Encrypted Commons", "text": json.dumps(order),
    "headers": {"X-Shop-Client": "python"}})
assert sent["message_id"].startswith("<"), sent

threads = wait(lambda: call("GET", "/v0/inboxes/%s/threads" % q(shop))["threads"], "the ORDER thread")
thread = call("GET", "/v0/inboxes/%s/threads/%s" % (q(shop), q(threads[0]["thread_id"])))
msg = thread["messages"][0]
assert msg["subject"] == "ORDER | The Encrypted Commons", msg["subject"]
assert msg["envelopay"]["type"] == "order" and msg["envelopay"]["valid"], msg["envelopay"]
assert msg["headers"]["X-Shop-Client"] == "python"

fulfill = {"v": "0.2.0", "type": "fulfill", "id": "ful_py", "order_ref": "ord_py", "result": {"summary": "Done"}}
rep = call("POST", "/v0/inboxes/%s/messages/%s/reply" % (q(shop), q(msg["message_id"])), {
    "to": buyer, "text": json.dumps(fulfill), "headers": {"X-Shop-Client": "python"}})
assert rep["thread_id"] == thread["thread_id"], (rep, thread["thread_id"])

got = wait(lambda: [m for m in call("GET", "/v0/inboxes/%s/messages" % q(buyer))["messages"]
                    if m["envelopay"]["type"] == "fulfill"], "the FULFILL")
assert got[0]["subject"] == "FULFILL", got[0]["subject"]
assert got[0]["in_reply_to"] == msg["message_id"], got[0]

raw = call("GET", "/v0/inboxes/%s/messages/%s/raw" % (q(shop), q(msg["message_id"])))
with urllib.request.urlopen(raw["download_url"], timeout=30) as resp:
    eml = resp.read()
assert len(eml) == raw["size"], (len(eml), raw["size"])
assert eml.startswith(b"DKIM-Signature:") and b"d=buyer.test" in eml.split(b"\r\n\r\n")[0], eml[:200]
direct = call("GET", "/v0/inboxes/%s/messages/%s/raw?format=raw" % (q(shop), q(msg["message_id"])), raw=True)
assert direct == eml

try:
    call("GET", "/v0/inboxes/%s/messages/%s" % (q(shop), q("<nope@x>")))
    raise AssertionError("no 404")
except urllib.error.HTTPError as e:
    assert e.code == 404 and json.loads(e.read())["name"] == "NotFoundError"
print("ok")
