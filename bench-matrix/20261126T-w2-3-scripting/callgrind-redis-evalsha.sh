#!/bin/bash
# usage: callgrind-redis-evalsha.sh N PORT [evalsha|none] -> total instructions of redis-server serving N EVALSHA of the same script ("none": the baseline)
N=$1; PORT=$2; CMD=${3:-evalsha}
OUT=/tmp/cg.redis.$PORT.out
rm -f $OUT
valgrind --tool=callgrind --callgrind-out-file=$OUT redis-server --port $PORT --save '' --appendonly no >/dev/null 2>&1 &
VP=$!
for i in $(seq 200); do redis-cli -p $PORT ping >/dev/null 2>&1 && break; sleep 0.2; done
SHA=$(redis-cli -p $PORT script load "return redis.call('GET', KEYS[1])")
redis-cli -p $PORT set key:1 hello >/dev/null
redis-cli -p $PORT evalsha $SHA 1 key:1 >/dev/null
if [ "$CMD" = evalsha ]; then redis-benchmark -p $PORT -n $N -P 16 -c 4 -q evalsha $SHA 1 key:1 >/dev/null 2>&1; fi
redis-cli -p $PORT shutdown nosave >/dev/null 2>&1
wait $VP
grep -E "^summary|^totals" $OUT | head -1
