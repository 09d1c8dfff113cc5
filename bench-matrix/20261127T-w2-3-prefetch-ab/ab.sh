#!/usr/bin/env bash
# A/B of fc-server builds on the scripting rows: ab.sh ROUNDS LABEL=BIN [LABEL=BIN ...]
# Each round runs every build in turn (order rotated per round), one xtask bench-server run
# each (fc-server on CPU 0, the load on CPU 1, EVALSHA get/rmw and plain GET at pipeline 16),
# then redis-server once. Builds: `cargo build --release -p fc-server --features monoio,unsafe`
# of each commit, copied aside. FAST_CACHE_USE_MONOIO=1 runs them on monoio.
set -euo pipefail
rounds=$1; shift
here=$(cd "$(dirname "$0")" && pwd)
builds=("$@")
for ((r = 1; r <= rounds; r++)); do
  n=${#builds[@]}
  for ((i = 0; i < n; i++)); do
    spec=${builds[$(((i + r - 1) % n))]}
    label=${spec%%=*}; bin=${spec#*=}
    FC_SERVER_BIN=$bin FAST_CACHE_USE_MONOIO=1 cargo xtask bench-server --servers fc-server \
      --mixes get --scripts evalsha-get,evalsha-rmw --values 64 --pipelines 16 --rounds 1 \
      --duration 2 --fanout 0 --queue-consumers 0 --stream-consumers 0 --no-redis-benchmark \
      --out "/tmp/ab/$label-$r" 2>&1 | grep 'round' | sed "s/^/$label /"
  done
  cargo xtask bench-server --servers redis --mixes get --scripts evalsha-get,evalsha-rmw \
    --values 64 --pipelines 16 --rounds 1 --duration 2 --fanout 0 --queue-consumers 0 \
    --stream-consumers 0 --no-redis-benchmark --out "/tmp/ab/redis-$r" 2>&1 | grep 'round' | sed "s/^/redis /"
done
