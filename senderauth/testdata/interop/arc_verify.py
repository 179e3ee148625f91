#!/usr/bin/python3
"""Reference ARC verdicts from dkimpy (Debian python3-dkim): argv[1] is the
DNS server host:port (dnspython), argv[2:] message files; stdout a JSON
object file → {"cv": ..., "sealers": [newest first]}."""
import json, sys
import dns.resolver
import dkim

host, port = sys.argv[1].rsplit(":", 1)
r = dns.resolver.Resolver(configure=False)
r.nameservers = [host]
r.port = int(port)
r.search = []

def dnsfunc(name, timeout=5):
    try:
        ans = r.resolve(name.decode().rstrip("."), "TXT")
    except Exception:
        return None
    return b"".join(b"".join(rr.strings) for rr in ans)

out = {}
for f in sys.argv[2:]:
    m = open(f, "rb").read()
    cv, results, reason = dkim.arc_verify(m, dnsfunc=dnsfunc)
    out[f] = {"cv": cv.decode(), "sealers": [x["as-domain"].decode() for x in results] if cv == b"pass" else []}
json.dump(out, sys.stdout)
