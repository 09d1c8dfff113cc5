#!/bin/bash
# usage: skew.sh BIN  — one hot key while the replica is cut off, 16 MiB backlog
BIN=$1
printf '[replication]\nenabled = true\nbacklog_bytes = "16mb"\n' > /tmp/skew.toml
taskset -c 0 $BIN --config /tmp/skew.toml --bind 127.0.0.1:7201 --threads 1 --save "" >/dev/null 2>&1 &
PP=$!
sleep 0.5
taskset -c 1 $BIN --bind 127.0.0.1:7202 --threads 1 --save "" --replicaof 127.0.0.1:7201 >/dev/null 2>&1 &
RP=$!
for i in $(seq 100); do redis-cli -p 7202 info replication | grep -q "master_link_status:up" && break; sleep 0.1; done
kill -STOP $RP
redis-cli -p 7201 CLIENT KILL TYPE replica >/dev/null
taskset -c 1 redis-benchmark -p 7201 -t set -n 50000 -r 1 -d 64 -P 1 -c 1 -q >/dev/null 2>&1
redis-cli -p 7201 info replication | grep -E "repl_backlog_histlen|repl_shard_snapshots_sent" | tr -d '\r' | tr '\n' ' '
kill -CONT $RP
s=$(date +%s.%N)
for i in $(seq 200); do [ "$(redis-cli -p 7201 WAIT 1 100)" = "1" ] && break; done
e=$(date +%s.%N)
echo; redis-cli -p 7201 info replication | grep -E "repl_shard_snapshots_sent" | tr -d '\r'
echo "caught up in $(echo "$e - $s" | bc) s; replica key: $(redis-cli -p 7202 exists key:000000000000)"
kill $PP $RP; wait 2>/dev/null
