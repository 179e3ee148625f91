#!/usr/bin/python3
"""Reference SPF results from pyspf (Debian python3-spf) against one DNS
server: argv[1] is host:port; stdin is a JSON list of {ip, mailfrom,
helo}; stdout the JSON list of result words, in order."""
import json, sys
import dns.resolver
import spf

host, port = sys.argv[1].rsplit(":", 1)
r = dns.resolver.Resolver(configure=False)
r.nameservers = [host]
r.port = int(port)
r.search = []
r.timeout = r.lifetime = 2
dns.resolver.default_resolver = r
out = []
for c in json.load(sys.stdin):
    try:
        res, _ = spf.check2(i=c["ip"], s=c["mailfrom"], h=c["helo"], timeout=5)
    except Exception as e:  # a crash of the reference is recorded, not hidden
        res = "error: " + type(e).__name__
    out.append(res)
json.dump(out, sys.stdout)
