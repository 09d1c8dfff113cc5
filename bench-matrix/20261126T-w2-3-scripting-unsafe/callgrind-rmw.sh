#!/bin/bash
BIN=$1; N=$2; PORT=$3
OUT=/tmp/cg.rmw.$PORT.out
rm -f $OUT
valgrind --tool=callgrind --callgrind-out-file=$OUT $BIN --bind 127.0.0.1:$PORT --threads 1 --save "" >/dev/null 2>&1 &
VP=$!
for i in $(seq 200); do redis-cli -p $PORT ping >/dev/null 2>&1 && break; sleep 0.2; done
SHA=$(redis-cli -p $PORT script load "local v = redis.call('INCRBY', KEYS[1], ARGV[1]) redis.call('SET', KEYS[2], v) return v")
redis-cli -p $PORT evalsha $SHA 2 {u:1}:c {u:1}:l 5 >/dev/null
redis-benchmark -p $PORT -n $N -P 16 -c 4 -q evalsha $SHA 2 {u:1}:c {u:1}:l 5 >/dev/null 2>&1
redis-cli -p $PORT shutdown nosave >/dev/null 2>&1
wait $VP
grep -E "^summary|^totals" $OUT | head -1
