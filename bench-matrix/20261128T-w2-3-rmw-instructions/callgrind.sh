#!/bin/bash
# callgrind.sh fc|redis BIN N PORT get|rmw [callgrind options]: total instructions of fc-server (1 worker) or redis-server serving N EVALSHA
# (redis-benchmark -P 16 -c 4) of the GET script or the two-key INCRBY+SET script; instructions per EVALSHA = (N run - N=0 run) / N.
# usage: cg.sh fc|redis BIN N PORT SHAPE(get|rmw) [extra callgrind args]
KIND=$1; BIN=$2; N=$3; PORT=$4; SHAPE=$5; shift 5
OUT=/tmp/cg.$KIND.$SHAPE.$N.out
rm -f $OUT
if [ $KIND = fc ]; then
valgrind --tool=callgrind "$@" --callgrind-out-file=$OUT $BIN --bind 127.0.0.1:$PORT --threads 1 --save "" >/dev/null 2>&1 &
else
valgrind --tool=callgrind "$@" --callgrind-out-file=$OUT $BIN --port $PORT --save "" --appendonly no >/dev/null 2>&1 &
fi
VP=$!
for i in $(seq 600); do redis-cli -p $PORT ping >/dev/null 2>&1 && break; sleep 0.2; done
if [ $SHAPE = get ]; then
SHA=$(redis-cli -p $PORT script load "return redis.call('GET', KEYS[1])")
redis-cli -p $PORT set key:1 hello >/dev/null
ARGS="1 key:1"
else
SHA=$(redis-cli -p $PORT script load "local v = redis.call('INCRBY', KEYS[1], ARGV[1]) redis.call('SET', KEYS[2], v) return v")
ARGS="2 {user:1}:counter {user:1}:last 1"
fi
redis-cli -p $PORT evalsha $SHA $ARGS >/dev/null
[ "$N" -gt 0 ] && redis-benchmark -p $PORT -n $N -P 16 -c 4 -q evalsha $SHA $ARGS >/dev/null 2>&1
redis-cli -p $PORT shutdown nosave >/dev/null 2>&1
wait $VP
grep -E "^summary|^totals" $OUT | head -1
