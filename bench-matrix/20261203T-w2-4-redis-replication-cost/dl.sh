#!/bin/bash
# DELAY -> primary CPU ms for N writes at P16 with one replica, and SET/s
D=$1
taskset -c 0 /tmp/fc-tip --bind 127.0.0.1:7101 --threads 1 --save "" --config /tmp/s29/dl/d$D.toml >/dev/null 2>&1 & PP=$!
sleep 0.5
taskset -c 1 /tmp/fc-tip --bind 127.0.0.1:7102 --threads 1 --save "" --replicaof 127.0.0.1:7101 >/dev/null 2>&1 & RP=$!
sleep 1
c0=$(awk '{print $14+$15}' /proc/$PP/stat); r0=$(awk '{print $14+$15}' /proc/$RP/stat)
ops=$(taskset -c 1 redis-benchmark -p 7101 -t set -n 2000000 -r 100000 -d 64 -P 16 -c 50 --csv 2>/dev/null | tail -1 | cut -d, -f2 | tr -d '"')
sleep 0.5
c1=$(awk '{print $14+$15}' /proc/$PP/stat); r1=$(awk '{print $14+$15}' /proc/$RP/stat)
echo "delay=$D set/s=$ops primary_ticks=$((c1-c0)) replica_ticks=$((r1-r0)) $(redis-cli -p 7101 info replication | grep -E 'repl_idle_flushes|repl_busy' | tr -d '\r' | tr '\n' ' ')"
kill $PP $RP; wait 2>/dev/null
