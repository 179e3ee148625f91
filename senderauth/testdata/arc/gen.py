#!/usr/bin/python3
"""Makes the ARC test chains with dkimpy (Debian python3-dkim): run from
this directory with /usr/bin/python3 gen.py. It writes keys.txt (the DNS
key records, name TXT-value per line), the *.eml chains and expected.json
(dkimpy's own arc_verify verdict on each, cv and the sealers)."""
import json, subprocess, dkim, base64, os

def rsa_key(name):
    pem = subprocess.run(["openssl", "genrsa", "2048"], capture_output=True, check=True).stdout
    pub = subprocess.run(["openssl", "rsa", "-pubout", "-outform", "DER"], input=pem, capture_output=True, check=True).stdout
    return pem, "v=DKIM1; k=rsa; p=" + base64.b64encode(pub).decode()

def ed_key():
    from cryptography.hazmat.primitives.asymmetric import ed25519
    from cryptography.hazmat.primitives import serialization
    k = ed25519.Ed25519PrivateKey.generate()
    raw = k.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption())
    pub = k.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return base64.b64encode(raw), "v=DKIM1; k=ed25519; p=" + base64.b64encode(pub).decode()

keys = {}
origin_pem, keys["s1._domainkey.origin.test"] = rsa_key("origin")
list_pem, keys["arc._domainkey.list.test"] = rsa_key("list")
relay_pem, keys["arc2._domainkey.relay2.test"] = rsa_key("relay2")
evil_pem, keys["arc._domainkey.evil.test"] = rsa_key("evil")
forger_pem, _ = rsa_key("forger")  # never published: a forged list.test seal

def dnsfunc(name, timeout=5):
    n = name.decode().rstrip(".")
    return keys.get(n, "").encode() or None

msg = (b"From: Alice <alice@origin.test>\r\n"
       b"To: agent@shop.test\r\n"
       b"Subject: PAY | 30 USDC\r\n"
       b"Message-ID: <pay-1@origin.test>\r\n"
       b"Date: Fri, 27 Nov 2026 12:00:00 +0000\r\n"
       b"MIME-Version: 1.0\r\n"
       b"Content-Type: text/plain; charset=utf-8\r\n"
       b"\r\n"
       b'{"v":"0.2.0","type":"pay","id":"pay_p1","amount":"30000000","token":"USDC","chain":"base",'
       b'"proof":{"tx":"0x2e8fb1fc86185752427960708abce56e55c7511c82adcf4dd9dbfe30ccffdd34"}}\r\n')
signed = dkim.sign(msg, b"s1", b"origin.test", origin_pem, canonicalize=(b"relaxed", b"simple"),
                   include_headers=[b"from", b"to", b"subject", b"message-id", b"date", b"content-type", b"mime-version"]) + msg

def seal(m, sel, dom, key, arc_result, algo=b"rsa-sha256", ar_extra=b""):
    ar = b"Authentication-Results: " + dom + b"; dkim=pass header.d=origin.test header.s=s1; dmarc=pass header.from=origin.test" + ar_extra
    if arc_result:
        ar += b"; arc=" + arc_result
    m = ar + b"\r\n" + m
    sig = dkim.arc_sign(m, sel, dom, key, dom, signature_algorithm=algo, timestamp=1795000000,
                        include_headers=[b"from", b"to", b"subject", b"message-id", b"date", b"content-type", b"mime-version"])
    return b"".join(sig) + m

footer = b"-- \r\nSent through the list.test mailing list\r\n"
# A list adds a footer (DKIM breaks) and seals.
forwarded = seal(signed + footer, b"arc", b"list.test", list_pem, None)
# A second hop seals on top.
two_hop = seal(forwarded, b"arc2", b"relay2.test", relay_pem, b"pass")
# Broken in transit after the seal: the body changed again.
broken = forwarded.replace(b"Sent through", b"Sent thru")
# A forged list.test seal: signed with a key list.test never published.
forged = seal(signed + footer, b"arc", b"list.test", forger_pem, None)
# An untrusted sealer's valid chain.
evil = seal(signed + footer, b"arc", b"evil.test", evil_pem, None)
# Plain DKIM-signed, no ARC; and the signed mail broken without ARC.
cases = {"forwarded.eml": forwarded, "two_hop.eml": two_hop, "broken.eml": broken,
         "forged.eml": forged, "untrusted.eml": evil, "signed.eml": signed, "footer_no_arc.eml": signed + footer}
expected = {}
for name, m in cases.items():
    open(name, "wb").write(m)
    cv, results, reason = dkim.arc_verify(m, dnsfunc=dnsfunc)
    expected[name] = {"cv": cv.decode(), "sealers": [r["as-domain"].decode() for r in results] if cv == b"pass" else None,
                      "dkim": bool(dkim.verify(m, dnsfunc=dnsfunc))}
with open("keys.txt", "w") as f:
    for n, v in sorted(keys.items()):
        f.write(n + " " + v + "\n")
json.dump(expected, open("expected.json", "w"), indent=1, sort_keys=True)
print(json.dumps(expected, indent=1))
