#!/bin/bash
# BIN P REPLICAS(0/1) OUT
BIN=$1; P=${2:-16}; R=${3:-1}; OUT=${4:-/tmp/s29/pp}
taskset -c 0 $BIN --bind 127.0.0.1:7101 --threads 1 --save "" >/dev/null 2>&1 &
PP=$!
sleep 0.5
if [ "$R" = 1 ]; then taskset -c 1 $BIN --bind 127.0.0.1:7102 --threads 1 --save "" --replicaof 127.0.0.1:7101 >/dev/null 2>&1 & RP=$!; fi
sleep 1
perf stat -e task-clock,context-switches -p $PP -o $OUT.stat &
ST=$!
[ -n "$REC" ] && { perf record -F 2999 -g -p $PP -o $OUT.data 2>/dev/null & REC_PID=$!; }
taskset -c 1 redis-benchmark -p 7101 -t set -n ${N:-2000000} -r 100000 -d 64 -P $P -c 50 -q 2>/dev/null | tr '\r' '\n' | tail -1
kill -INT $ST; [ -n "$REC" ] && kill -INT $REC_PID; sleep 1
grep -E "task-clock|context-switches" $OUT.stat
kill $PP $RP 2>/dev/null; wait 2>/dev/null
