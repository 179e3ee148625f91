#!/bin/sh
# bench-ingest.sh: durable ingest throughput of `envelopd serve` against the
# no-op go-smtp baseline, measured in the same run.
#
# Builds envelopd and envelopd-load, then runs `envelopd-load compare`:
#   1. envelopd-load's own client, 10 sessions kept open (PIPELINING, RSET
#      between messages), distinct 2 KB DKIM-signed Envelopay mails;
#   2. Postfix's smtp-source -s 10 -l 2048 (a new connection per message).
# and prints `envelopd X msg/s, baseline Y msg/s, ratio R` for each run,
# then the medians of the RUNS runs (loopback figures on a shared machine
# vary by ±15 % from run to run; the median is the figure to quote).
#
# Environment: SESSIONS (10), MESSAGES (20000), RUNS (3), OUT (build directory,
# default a temporary one), GOTAGS (build tags for envelopd). Extra
# arguments go to `envelopd-load compare` (e.g. --json, --dir DIR,
# --serve-args "--cpuprofile /tmp/cpu.out").
set -eu
cd "$(dirname "$0")/.."
sessions=${SESSIONS:-10}
messages=${MESSAGES:-20000}
runs=${RUNS:-3}
out=${OUT:-$(mktemp -d)}
go build ${GOTAGS:+-tags "$GOTAGS"} -o "$out/envelopd" ./cmd/envelopd
go build -o "$out/envelopd-load" ./cmd/envelopd-load
source_bin=$(command -v smtp-source || echo /usr/sbin/smtp-source)
if [ ! -x "$source_bin" ]; then
	echo "bench-ingest: smtp-source not found (apt-get install postfix)" >&2
	exit 2
fi
echo "# $(nproc) CPUs, $sessions sessions, $messages messages of 2 KB" >&2
exec "$out/envelopd-load" compare --envelopd-bin "$out/envelopd" \
	--sessions "$sessions" --messages "$messages" --size 2048 --runs "$runs" \
	--smtp-source --smtp-source-bin "$source_bin" "$@"
