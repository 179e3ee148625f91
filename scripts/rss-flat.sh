#!/usr/bin/env bash
# Memory check: ingest N (default 100,000) DKIM-signed mails into
# `envelopd serve` and compare the server's resident memory after the first
# 10% with its resident memory at the end (read from its own Prometheus
# metrics, process_resident_memory_bytes). Prints both and the ratio.
set -euo pipefail
cd "$(dirname "$0")/.."
total="${1:-100000}"
first=$((total / 10))
dir=$(mktemp -d)
trap 'kill $load 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$dir"' EXIT
go build -o "$dir/envelopd" ./cmd/envelopd
go build -o "$dir/envelopd-load" ./cmd/envelopd-load
mport=$((20000 + RANDOM % 20000))
metric() { { curl -sf "http://127.0.0.1:$mport/metrics" || true; } | awk -v m="$1" '$1 ~ "^"m {s+=$2} END {printf "%.0f\n", s}'; }
# compare generates the signed mails first, starts envelopd serve with their
# keys (and our --metrics address), and drives it; we sample its metrics.
"$dir/envelopd-load" compare --messages "$total" --sessions 10 --envelopd-bin "$dir/envelopd" \
  --serve-args "--metrics 127.0.0.1:$mport" --json >"$dir/compare.json" 2>"$dir/compare.log" &
load=$!
rss_first=""
while kill -0 $load 2>/dev/null; do
  n=$(metric envelopd_messages_total)
  if [ -z "$rss_first" ] && [ "${n:-0}" -ge "$first" ]; then rss_first=$(metric process_resident_memory_bytes); n_first=$n; fi
  m=$(metric process_resident_memory_bytes); [ -n "$m" ] && [ "$m" != 0 ] && { rss_end=$m; n_end=$n; }
  sleep 0.5
done
wait $load || true
echo "stored $n_first: rss $((rss_first / 1048576)) MiB; stored $n_end: rss $((rss_end / 1048576)) MiB; ratio $(awk -v a="$rss_end" -v b="$rss_first" 'BEGIN {printf "%.2f", a/b}')"
