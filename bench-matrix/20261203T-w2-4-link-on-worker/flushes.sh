#!/bin/bash
# usage: flushes.sh BIN PIPELINE
BIN=$1; P=$2
taskset -c 0 $BIN --bind 127.0.0.1:7101 --threads 1 --save "" >/dev/null 2>&1 &
PP=$!
sleep 0.5
taskset -c 1 $BIN --bind 127.0.0.1:7102 --threads 1 --save "" --replicaof 127.0.0.1:7101 >/dev/null 2>&1 &
RP=$!
sleep 1
c0=$(awk '{print $14+$15}' /proc/$PP/stat); r0=$(awk '{print $14+$15}' /proc/$RP/stat)
s=$(date +%s.%N)
taskset -c 1 redis-benchmark -p 7101 -t set -n ${N:-1000000} -r 100000 -d 64 -P $P -c 50 -q 2>/dev/null | tail -1
e=$(date +%s.%N)
c1=$(awk '{print $14+$15}' /proc/$PP/stat); r1=$(awk '{print $14+$15}' /proc/$RP/stat)
redis-cli -p 7101 info replication | grep -E "master_repl_offset|repl_idle_flushes|repl_idle_deferred|repl_busy_flushes|repl_sent_bytes" | tr -d '\r' | tr '\n' ' '
echo " primary_ticks=$((c1-c0)) replica_ticks=$((r1-r0)) secs=$(echo "$e - $s" | bc)"
kill $PP $RP; wait 2>/dev/null
