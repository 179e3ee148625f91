#!/bin/sh
# Regenerates the expected outputs of the canonjson vectors from the two
# reference serialisers: node (JSON.stringify with recursively sorted keys)
# and python3 (json.dumps sort_keys=True, separators=(",", ":")). Not run by
# the tests: its outputs are committed. Inputs with a NAME.err file are ones
# that canonjson.Parse must reject; they are skipped here.
#   NAME.json        input document
#   NAME.js          expected canonjson.JS output
#   NAME.py          expected canonjson.Python(v, false) output
#   NAME.pyascii     expected canonjson.Python(v, true) output
#   NAME.py.err      Python would not print JSON (Infinity): Python must fail
#   NAME.err         Parse must fail; the file holds a substring of the error
set -e
cd "$(dirname "$0")"
for f in *.json; do
	n=${f%.json}
	[ -e "$n.err" ] && continue
	node -e '
const fs = require("fs");
function canon(v) {
  if (v === null || typeof v !== "object") return JSON.stringify(v) ?? "null";
  if (Array.isArray(v)) return "[" + v.map(canon).join(",") + "]";
  return "{" + Object.keys(v).sort().map(k => JSON.stringify(k) + ":" + canon(v[k])).join(",") + "}";
}
process.stdout.write(canon(JSON.parse(fs.readFileSync(process.argv[1], "utf8"))));
' "$f" > "$n.js"
	python3 - "$f" "$n" <<'PY'
import json, sys
f, n = sys.argv[1], sys.argv[2]
v = json.loads(open(f, "rb").read().decode("utf-8"))
for suffix, ascii in ((".py", False), (".pyascii", True)):
    s = json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=ascii)
    if "Infinity" in s or "NaN" in s:
        open(n + ".py.err", "w").write("non-finite float\n")
        break
    open(n + suffix, "wb").write(s.encode("utf-8"))
PY
done
