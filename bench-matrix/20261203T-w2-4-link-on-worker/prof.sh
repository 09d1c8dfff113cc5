#!/bin/bash
BIN=$1; P=${2:-1}
taskset -c 0 $BIN --bind 127.0.0.1:7101 --threads 1 --save "" >/dev/null 2>&1 &
PP=$!
sleep 0.5
taskset -c 1 $BIN --bind 127.0.0.1:7102 --threads 1 --save "" --replicaof 127.0.0.1:7101 >/dev/null 2>&1 &
RP=$!
sleep 1
perf stat -e task-clock,context-switches,cpu-migrations -p $RP -o /tmp/s28/stat.txt &
ST=$!
[ -n "$REC" ] && { perf record -F 4999 -g -p $RP -o /tmp/s28/perf.data 2>/dev/null & REC_PID=$!; }
taskset -c 1 redis-benchmark -p 7101 -t set -n ${N:-500000} -r 100000 -d 64 -P $P -c 50 -q 2>/dev/null | tr '\r' '\n' | tail -1
kill -INT $ST; [ -n "$REC" ] && kill -INT $REC_PID; sleep 1
redis-cli -p 7101 info replication | grep -E "master_repl_offset|repl_idle_flushes" | tr -d '\r' | tr '\n' ' '
grep -E "task-clock|context-switches" /tmp/s28/stat.txt
kill $PP $RP; wait 2>/dev/null
