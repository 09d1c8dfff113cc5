#!/usr/bin/env bash
# The device kit: the rows that need the 16-core GPU machine (issues #29, #31, #32), in one
# prepared run that fits its 15 minutes. That machine has no Rust toolchain and no Redis, and
# reaches nothing: everything it runs is built here and carried.
#
#   bash scripts/device-kit.sh build        # here: target/device-kit/ (about 30 MiB)
#   bash scripts/device-kit.sh run [--quick] # there: results under $OUT (or target/device-out)
#
# The device tool's call (one command, the kit carried):
#   run(command="bash scripts/device-kit.sh run", carry=["target/device-kit"], timeout_s=540)
#
# `run` on 16 cores (a plain `run` takes about 6 minutes; `--quick` a minute):
#   1. GPU: fc-gpu's gpu_bench (host<->device GB/s of session batches, against one contiguous
#      pinned copy and the naive path), #31;
#   2. replication: bench-repl with the primary on cores 0-7, the load on 8-11 and the
#      replicas on 12-15 (throughput 0/1/2 replicas for fast-cache and Redis, lag at 50%
#      load, catch-up), #29;
#   3. TLS: bench-server --tls with fc-server and Redis on cores 0-3 and the loads on 4-11
#      (the xtask load plain and through rustls; redis-benchmark with 8 threads), #32.
# Each step's output is kept whatever the others do; `$OUT/results.tar.gz` holds every file
# (`tar xzf` it into bench-matrix/<run>/), `$OUT/log` the whole log.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
kit="$root/target/device-kit"

build() {
  set -e
  cd "$root"
  rm -rf "$kit"
  mkdir -p "$kit/bin" "$kit/real" "$kit/lib"
  cargo build --release -p fc-server -p xtask
  cargo build --release -p fc-gpu --example gpu_bench --features cuda,unsafe
  strip -o "$kit/bin/fc-server" target/release/fc-server
  strip -o "$kit/bin/xtask" target/release/xtask
  strip -o "$kit/bin/gpu_bench" target/release/examples/gpu_bench
  # Debian's Redis (the peer in every row), with the libraries it loads that a CUDA image
  # may lack; run through wrappers that point the loader at them. redis-server is the
  # binary that /usr/bin/redis-server links to (it picks its mode from its name).
  for tool in redis-server redis-benchmark redis-cli; do
    src=$(command -v "$tool") || { echo "device-kit: $tool is not installed here" >&2; exit 1; }
    cp "$(readlink -f "$src")" "$kit/real/$tool"
    printf '#!/bin/sh\nkit=$(cd "$(dirname "$0")/.." && pwd)\nLD_LIBRARY_PATH="$kit/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$kit/real/%s" "$@"\n' \
      "$tool" >"$kit/bin/$tool"
    chmod +x "$kit/bin/$tool"
  done
  ldd "$kit/real/redis-server" "$kit/real/redis-benchmark" |
    awk '/=> \// { print $3 }' | sort -u |
    grep -v -E '/(libc|libm|libpthread|libdl|librt|libstdc\+\+|libgcc_s)\.so' |
    while read -r lib; do cp -L "$lib" "$kit/lib/"; done
  git rev-parse --short HEAD >"$kit/COMMIT"
  du -sh "$kit"
}

run() {
  local quick=0
  [ "${1:-}" = "--quick" ] && quick=1
  # Only two files go to $OUT (the tool brings back at most 8): the log and a tarball.
  local out="${OUT:-$root/target/device-out}"
  local work
  work=$(mktemp -d)
  local results="$work/results"
  mkdir -p "$out" "$results"
  export PATH="$kit/bin:$PATH"
  export FC_SERVER_BIN="$kit/bin/fc-server"
  steps "$quick" "$results" 2>&1 | tee "$out/log"
  tar -czf "$out/results.tar.gz" -C "$work" results
  rm -rf "$work"
}

steps() {
  local quick=$1 results=$2
  echo "device-kit: fc-server $(cat "$kit/COMMIT" 2>/dev/null), $(nproc) cores, $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.width.current \
    --format=csv,noheader 2>&1 | head -2
  local cores
  cores=$(nproc)
  local server="0,1,2,3,4,5,6,7" load="8,9,10,11" replicas="12,13,14,15"
  local tls_server="0,1,2,3" tls_load="4,5,6,7,8,9,10,11"
  if [ "$cores" -lt 16 ]; then
    echo "device-kit: $cores cores, not 16: the core sets shrink (rows are not the device's)"
    server="0" load="1" replicas="1" tls_server="0" tls_load="1"
  fi
  # bench-repl runs Redis's throughput rows too: two rounds a row keep it inside its limit
  # (171 s on the 2-core VM), and it writes each section as it ends.
  local gpu_iterations=10 repl_args=(--rounds 2) tls_args=(--rounds 2 --duration 3)
  if [ "$quick" = 1 ]; then
    gpu_iterations=2
    repl_args=(--quick)
    tls_args=(--rounds 1 --duration 1)
  fi

  echo "== 1. fc-gpu: gpu_bench ($(date -u +%T))"
  timeout 150 "$kit/bin/gpu_bench" --iterations "$gpu_iterations" --out "$results/gpu.csv" ||
    echo "device-kit: gpu_bench failed or found no GPU (exit $?)"

  echo "== 2. bench-repl ($(date -u +%T))"
  timeout 240 xtask bench-repl --server-cores "$server" --load-cores "$load" \
    --replica-cores "$replicas" "${repl_args[@]}" --out "$results/repl" ||
    echo "device-kit: bench-repl failed (exit $?)"

  echo "== 3. bench-server --tls ($(date -u +%T))"
  timeout 150 xtask bench-server --tls --mixes get,set --values 64 --pipelines 16 \
    --scripts none --fanout 0 --queue-consumers 0 --stream-consumers 0 \
    --server-cores "$tls_server" --load-cores "$tls_load" "${tls_args[@]}" \
    --out "$results/tls" ||
    echo "device-kit: bench-server --tls failed (exit $?)"

  echo "== done ($(date -u +%T))"
  for f in "$results/repl/summary.md" "$results/tls/server-summary.md" "$results/gpu.csv"; do
    [ -f "$f" ] && { echo "---- $f"; cat "$f"; }
  done
  true
}

case "${1:-}" in
  build) build ;;
  run) shift; run "$@" ;;
  *) echo "usage: $0 build | run [--quick]" >&2; exit 2 ;;
esac
