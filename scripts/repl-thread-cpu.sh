#!/usr/bin/env bash
# CPU time per replicated write, thread by thread, of a primary and its replica: the figure that
# says where replication's cost sits (the worker, the pump, the links), less disturbed by a
# noisy host than throughput is.
#
# Usage: scripts/repl-thread-cpu.sh FC_SERVER_BINARY [WRITES=3000000] [PIPELINE=16]
#
# Starts a primary on CPU 0 and a replica of it on CPU 1 (one worker each, no snapshots), runs
# redis-benchmark's 64-byte SETs over 100k keys (50 connections) on CPU 1, waits a second for
# the replica, and prints each thread's user + system CPU time (from /proc/<pid>/task/*/stat)
# divided by the writes. Needs Linux, taskset, redis-benchmark and redis-cli.
set -euo pipefail
bin=$1
writes=${2:-3000000}
pipeline=${3:-16}
port=$((20000 + RANDOM % 10000))
replica_port=$((port + 1))
taskset -c 0 "$bin" --bind "127.0.0.1:$port" --threads 1 --save "" >/dev/null 2>&1 &
primary=$!
trap 'kill $primary ${replica:-} 2>/dev/null || true' EXIT
sleep 0.5
taskset -c 1 "$bin" --bind "127.0.0.1:$replica_port" --threads 1 --save "" \
  --replicaof "127.0.0.1:$port" >/dev/null 2>&1 &
replica=$!
for _ in $(seq 100); do
  redis-cli -p "$replica_port" info replication 2>/dev/null |
    grep -q "master_link_status:up" && break
  sleep 0.1
done
# CPU ticks per thread name of process $1.
ticks() {
  for task in /proc/"$1"/task/*; do
    echo "$(cat "$task/comm") $(awk '{print $14 + $15}' "$task/stat")"
  done | awk '{t[$1] += $2} END {for (k in t) print k, t[k]}' | sort
}
ticks $primary >/tmp/repl-thread-cpu.p0
ticks $replica >/tmp/repl-thread-cpu.r0
taskset -c 1 redis-benchmark -p "$port" -t set -n "$writes" -P "$pipeline" -c 50 -r 100000 \
  -d 64 -q >/dev/null 2>&1
sleep 1
ticks $primary >/tmp/repl-thread-cpu.p1
ticks $replica >/tmp/repl-thread-cpu.r1
hz=$(getconf CLK_TCK)
for side in primary:p replica:r; do
  echo "${side%%:*} (ns of CPU per write, pipeline $pipeline, $writes writes):"
  join "/tmp/repl-thread-cpu.${side##*:}0" "/tmp/repl-thread-cpu.${side##*:}1" |
    awk -v w="$writes" -v hz="$hz" '$3 > $2 {printf "  %-16s %6.0f\n", $1, ($3 - $2) * 1e9 / hz / w}'
done
