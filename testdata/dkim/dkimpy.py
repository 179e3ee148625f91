#!/usr/bin/env python3
"""dkimpy as a DKIM peer for envelopd's interop tests (dkim/interop_test.go).

    dkimpy.py verify KEYS.txt MSG
        Verifies every DKIM-Signature of MSG, keys from KEYS.txt (the static
        key file: "name TXT-value" per line, # comments). Prints one word per
        signature, "pass" or "fail" (reasons on stderr); exit 0 when there
        are signatures and all pass.
    dkimpy.py sign KEY.pem DOMAIN SELECTOR ALGO CANON MSG OUT
        Signs MSG (ALGO rsa-sha256 or ed25519-sha256, CANON e.g.
        relaxed/simple; LF made CRLF first) and writes the signed message to
        OUT.
    dkimpy.py batch
        Reads commands as above, one per line, arguments separated by tabs,
        and prints one result line per command: the verdicts for verify,
        "ok" or "error: ..." for sign. One process for many messages (the
        dkim import alone takes half a second).

Needs python3-dkim (and python3-nacl for Ed25519).
"""
import base64
import re
import sys

import dkim


def load_keys(path):
    keys = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            name, value = re.split(r"\s+", line, maxsplit=1)
            keys.setdefault(name.lower().rstrip("."), []).append(value.strip())
    return keys


def verify(keyfile, msgfile):
    """Returns the verdicts, one per signature."""
    keys = load_keys(keyfile)

    def dnsfunc(name, timeout=5):
        txts = keys.get(name.decode().lower().rstrip("."), [])
        return txts[0].encode() if len(txts) == 1 else None

    msg = open(msgfile, "rb").read()
    header = re.split(rb"\r?\n\r?\n", msg, maxsplit=1)[0]
    n = len(re.findall(rb"(?im)^dkim-signature\s*:", header))
    d = dkim.DKIM(msg)
    verdicts = []
    for i in range(n):
        try:
            verdicts.append("pass" if d.verify(idx=i, dnsfunc=dnsfunc) else "fail")
        except dkim.DKIMException as e:
            sys.stderr.write("%s: signature %d: %s\n" % (msgfile, i, e))
            verdicts.append("fail")
    return verdicts


def sign(keyfile, domain, selector, algo, canon, msgfile, outfile):
    key = open(keyfile, "rb").read()
    if algo == "ed25519-sha256":
        # dkimpy wants the base64 raw 32-byte seed: the tail of the PKCS#8 DER.
        der = base64.b64decode(b"".join(l for l in key.splitlines() if not l.startswith(b"-----")))
        key = base64.b64encode(der[-32:])
    msg = open(msgfile, "rb").read()
    msg = re.sub(rb"(?<!\r)\n", b"\r\n", msg)
    hc, bc = canon.split("/")
    sig = dkim.sign(msg, selector.encode(), domain.encode(), key,
                    canonicalize=(hc.encode(), bc.encode()),
                    signature_algorithm=algo.encode(),
                    include_headers=[b"from", b"to", b"cc", b"subject", b"date", b"message-id"])
    with open(outfile, "wb") as f:
        f.write(sig + msg)


def batch():
    for line in sys.stdin:
        args = line.rstrip("\n").split("\t")
        try:
            if args[0] == "verify" and len(args) == 3:
                print(" ".join(verify(*args[1:])) or "none")
            elif args[0] == "sign" and len(args) == 8:
                sign(*args[1:])
                print("ok")
            else:
                print("error: bad command %r" % args)
        except Exception as e:  # report and go on with the next command
            print("error: %s" % str(e).replace("\n", " "))
        sys.stdout.flush()


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "verify":
        v = verify(*sys.argv[2:])
        print(" ".join(v))
        sys.exit(0 if v and all(x == "pass" for x in v) else 1)
    if len(sys.argv) == 9 and sys.argv[1] == "sign":
        sign(*sys.argv[2:])
        sys.exit(0)
    if len(sys.argv) == 2 and sys.argv[1] == "batch":
        batch()
        sys.exit(0)
    sys.stderr.write(__doc__)
    sys.exit(2)
