BIN=$1
taskset -c 0 $BIN --bind 127.0.0.1:7101 --threads 1 --save "" >/dev/null 2>&1 &
PP=$!
sleep 0.5
taskset -c 1 $BIN --bind 127.0.0.1:7102 --threads 1 --save "" --replicaof 127.0.0.1:7101 >/dev/null 2>&1 &
RP=$!
sleep 1
redis-cli -p 7101 set key:__rand_int__ x >/dev/null
taskset -c 1 redis-benchmark -p 7101 -t get -n 30000000 -P 32 -c 8 -q >/dev/null 2>&1 &
LB=$!
sleep 1
taskset -c 1 python3 /tmp/s28/sparse.py 7101 7102 300
redis-cli -p 7101 info replication | grep -E "repl_idle_flushes|repl_busy_flushes|repl_idle_deferred" | tr -d '\r' | tr '\n' ' '; echo
kill $LB $PP $RP; wait 2>/dev/null
