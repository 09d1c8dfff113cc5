#!/bin/bash
# usage: cg.sh BIN N PORT -> prints total Ir
BIN=$1; N=$2; PORT=$3
OUT=/tmp/cg.$PORT.$N.out
rm -f $OUT
valgrind --tool=callgrind --callgrind-out-file=$OUT $BIN --bind 127.0.0.1:$PORT --threads 1 --save "" >/dev/null 2>&1 &
VP=$!
for i in $(seq 200); do redis-cli -p $PORT ping >/dev/null 2>&1 && break; sleep 0.2; done
redis-benchmark -p $PORT -n $N -P 16 -c 4 -t set,get -r 10000 -d 64 -q >/dev/null 2>&1
redis-cli -p $PORT shutdown nosave >/dev/null 2>&1
wait $VP
grep -E "^summary|^totals" $OUT | head -1
