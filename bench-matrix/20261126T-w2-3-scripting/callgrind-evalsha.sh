#!/bin/bash
# usage: callgrind-evalsha.sh BIN N PORT -> total instructions of fc-server (1 worker) serving N EVALSHA of a GET script (redis-benchmark -P 16 -c 4); run with N=0 for the baseline
BIN=$1; N=$2; PORT=$3
OUT=/tmp/cg.eval.$PORT.out
rm -f $OUT
valgrind --tool=callgrind --callgrind-out-file=$OUT $BIN --bind 127.0.0.1:$PORT --threads 1 --save "" >/dev/null 2>&1 &
VP=$!
for i in $(seq 200); do redis-cli -p $PORT ping >/dev/null 2>&1 && break; sleep 0.2; done
SHA=$(redis-cli -p $PORT script load "return redis.call('GET', KEYS[1])")
redis-cli -p $PORT set key:1 hello >/dev/null
redis-cli -p $PORT evalsha $SHA 1 key:1 >/dev/null
redis-benchmark -p $PORT -n $N -P 16 -c 4 -q evalsha $SHA 1 key:1 >/dev/null 2>&1
redis-cli -p $PORT shutdown nosave >/dev/null 2>&1
wait $VP
grep -E "^summary|^totals" $OUT | head -1
