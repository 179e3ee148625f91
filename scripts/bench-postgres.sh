#!/bin/bash
# bench-postgres.sh: SMTP ingest of 1, 2 and 3 `envelopd serve` nodes on one
# Postgres database, and of one node on SQLite, in the same run.
#
# For each configuration it starts the nodes, runs one `envelopd-load run`
# per node at the same time (SESSIONS split among them, MESSAGES in total,
# 2 KB mails, sessions kept open), and prints msg/s (all messages ÷ the
# slowest client's time) and the CPU per message of the nodes and of the
# Postgres server, read from /proc before and after.
#
# The load's DKIM keys are made by each client run, so the nodes cannot
# verify them (--dkim-txt /dev/null): mails are stored quarantined
# (dkim_failed); the store work is the same, DKIM verification is skipped.
#
# Environment: PG_DSN (required: a database with fsync on, e.g. the recipe
# of shared/interop/README.md without -F; it is written to), SESSIONS (12),
# MESSAGES (6000), OUT (build directory).
set -euo pipefail
cd "$(dirname "$0")/.."
: "${PG_DSN:?set PG_DSN to a postgres:// URL of a scratch database}"
sessions=${SESSIONS:-12}
messages=${MESSAGES:-6000}
out=${OUT:-$(mktemp -d)}
go build -o "$out/envelopd" ./cmd/envelopd
go build -o "$out/envelopd-load" ./cmd/envelopd-load

cpu_of() { # total utime+stime (clock ticks) of the given pids
	local t=0 p
	for p in "$@"; do
		[ -r "/proc/$p/stat" ] || continue
		t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat")))
	done
	echo $t
}
pg_pids() { pgrep -d ' ' -x postgres || true; }
hz=$(getconf CLK_TCK)

# start_node DB LOG: starts serve, prints "PID ADDR".
start_node() {
	"$out/envelopd" serve --smtp 127.0.0.1:0 --db "$1" --dkim-txt /dev/null --oops=false 2>"$2" &
	local pid=$! addr=""
	for _ in $(seq 100); do
		addr=$(grep -o '"smtp":"[^"]*"' "$2" | head -1 | cut -d'"' -f4 || true)
		[ -n "$addr" ] && break
		sleep 0.1
	done
	echo "$pid $addr"
}

run_config() { # NAME NODES DB
	local name=$1 n=$2 db=$3 pids=() addrs=() i
	for i in $(seq "$n"); do
		read -r pid addr < <(start_node "$db" "$out/serve-$name-$i.log")
		pids+=("$pid"); addrs+=("$addr")
	done
	local c0 p0
	c0=$(cpu_of "${pids[@]}"); p0=$(cpu_of $(pg_pids))
	local start end
	start=$(date +%s.%N)
	local loads=()
	for i in $(seq 0 $((n - 1))); do
		"$out/envelopd-load" run --addr "${addrs[$i]}" --sessions $((sessions / n)) --messages $((messages / n)) \
			--json >"$out/load-$name-$i.json" 2>/dev/null &
		loads+=($!)
	done
	for j in "${loads[@]}"; do wait "$j" || true; done
	end=$(date +%s.%N)
	local c1 p1
	c1=$(cpu_of "${pids[@]}"); p1=$(cpu_of $(pg_pids))
	kill "${pids[@]}"; wait "${pids[@]}" 2>/dev/null || true
	local total=$(( (messages / n) * n ))
	awk -v name="$name" -v n="$total" -v s="$start" -v e="$end" -v c=$((c1 - c0)) -v p=$((p1 - p0)) -v hz="$hz" 'BEGIN {
		printf "%-14s %8.0f msg/s  nodes %6.0f cpu-µs/msg  postgres %6.0f cpu-µs/msg\n", name, n / (e - s), c * 1e6 / hz / n, p * 1e6 / hz / n }'
}

echo "# $(nproc) CPUs, $sessions sessions, $messages messages of 2 KB"
run_config sqlite 1 "$out/bench.db"
for n in 1 2 3; do
	psql "$PG_DSN" -qc "SET client_min_messages = warning; DROP SCHEMA public CASCADE; CREATE SCHEMA public" >/dev/null
	
	run_config "postgres-$n" "$n" "$PG_DSN"
done
