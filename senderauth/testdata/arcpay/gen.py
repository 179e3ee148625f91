#!/usr/bin/python3
"""Makes the ARC-forwarded PAY: a valid Envelopay v0.2.0 PAY from
alice@payer.test, DKIM-signed by payer.test with dkimpy's `dkimsign`, its
body given a footer by the forwarder forward.test (DKIM breaks), then
ARC-sealed by forward.test with dkimpy's `arcsign` (Debian python3-dkim);
and the same forwarded mail with a forged ARC set.

    /usr/bin/python3 gen.py [--out DIR] [--tx HASH --amount N --token SYM --chain NAME]

Without arguments it rewrites this directory's files for plain go test (the
proof is the transaction payments/rail/testdata/evm/usdc-transfer.json
answers for); the interop test runs it with its own transaction and --out.
It writes:

- records.txt: the DNS records to serve, "name TXT-value" per line (the
  keys' DKIM records, SPF of forward.test, DMARC of payer.test);
- forwarded.eml: the sealed forwarded PAY (DKIM fails, ARC passes);
- forged.eml: the same, the AMS and AS signed with ../keys/forger.pem,
  a key forward.test never published;
- cv_tampered.eml: forwarded.eml with the ARC-Seal's cv=none changed to
  cv=pass (the seal no longer verifies, and instance 1 must say none).

The RSA keys are ../keys/*.pem (made with openssl when missing).
"""
import argparse, base64, os, subprocess, sys

here = os.path.dirname(os.path.abspath(__file__))
keydir = os.path.join(here, "..", "keys")

ap = argparse.ArgumentParser()
ap.add_argument("--out", default=here)
ap.add_argument("--tx", default="0x2e8fb1fc86185752427960708abce56e55c7511c82adcf4dd9dbfe30ccffdd34")
ap.add_argument("--amount", default="30000000")
ap.add_argument("--token", default="USDC")
ap.add_argument("--chain", default="base")
a = ap.parse_args()


def key(name):
    path = os.path.join(keydir, name + ".pem")
    if not os.path.exists(path):
        pem = subprocess.run(["openssl", "genrsa", "2048"], capture_output=True, check=True).stdout
        with open(path, "wb") as f:
            f.write(pem)
    der = subprocess.run(["openssl", "rsa", "-in", path, "-pubout", "-outform", "DER"],
                         capture_output=True, check=True).stdout
    return path, "v=DKIM1; k=rsa; p=" + base64.b64encode(der).decode()


def run(cmd, data):
    p = subprocess.run(cmd, input=data, capture_output=True)
    if p.returncode != 0:
        sys.exit("%s: exit %d: %s" % (cmd[0], p.returncode, p.stderr.decode(errors="replace")))
    return p.stdout


payer_key, payer_rec = key("payer.test")
forward_key, forward_rec = key("forward.test")
forger_key, _ = key("forger")  # never published

body = ('{"v":"0.2.0","type":"pay","id":"pay_arc1","note":"forwarded by forward.test",'
        '"amount":"%s","token":"%s","chain":"%s","proof":{"tx":"%s"}}' % (a.amount, a.token, a.chain, a.tx))
msg = ("From: Alice <alice@payer.test>\r\n"
       "To: shop@forward.test\r\n"
       "Subject: PAY | %s %s\r\n"
       "Message-ID: <pay-arc1@payer.test>\r\n"
       "Date: Fri, 27 Nov 2026 12:00:00 +0000\r\n"
       "MIME-Version: 1.0\r\n"
       "Content-Type: text/plain; charset=utf-8\r\n"
       "\r\n%s\r\n" % (a.amount, a.token, body)).encode()
# payer.test signs (relaxed/simple: any body change breaks it).
signed = run(["/usr/bin/dkimsign", "s1", "payer.test", payer_key], msg)
# forward.test (an alias shop@forward.test → the shop) checks it, adds a
# footer and its Authentication-Results, and seals.
footer = b"-- \r\nForwarded by forward.test for shop@forward.test\r\n"
ar = (b"Authentication-Results: forward.test; spf=pass smtp.mailfrom=payer.test;"
      b" dkim=pass header.d=payer.test header.s=s1; dmarc=pass header.from=payer.test\r\n")
changed = ar + signed + footer
forwarded = run(["/usr/bin/arcsign", "arc", "forward.test", forward_key, "forward.test"], changed)
forged = run(["/usr/bin/arcsign", "arc", "forward.test", forger_key, "forward.test"], changed)
if forwarded.count(b"cv=none") != 1:
    sys.exit("arcsign's seal has no single cv=none")
tampered = forwarded.replace(b"cv=none", b"cv=pass")

os.makedirs(a.out, exist_ok=True)
for name, data in [("forwarded.eml", forwarded), ("forged.eml", forged), ("cv_tampered.eml", tampered)]:
    with open(os.path.join(a.out, name), "wb") as f:
        f.write(data)
with open(os.path.join(a.out, "records.txt"), "w") as f:
    f.write("s1._domainkey.payer.test " + payer_rec + "\n")
    f.write("arc._domainkey.forward.test " + forward_rec + "\n")
    f.write("forward.test v=spf1 ip4:127.0.0.0/8 -all\n")
    f.write("_dmarc.payer.test v=DMARC1; p=reject\n")
