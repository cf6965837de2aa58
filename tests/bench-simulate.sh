#!/usr/bin/env bash
# Simulation benchmark: `kubectl sched simulate --from` on a generated 5,000-node cluster with 10,000
# pending pods (90,000 bound), with kube-scheduler's default sampling and with --all-nodes (full scan),
# in the same run. Reports pods/s of the simulation proper (its own timer, without loading the file),
# the wall time, and the peak memory (max RSS).
# Usage: tests/bench-simulate.sh [RUNS]   (env: BENCH_DIR, default /tmp/kubectl-sched-bench).
# Not part of `make test`: it takes minutes.
set -euo pipefail
runs=${1:-3}
dir=${BENCH_DIR:-/tmp/kubectl-sched-bench}
cargo=${CARGO:-cargo}
mkdir -p "$dir"
$cargo build --release -q -p kubectl-sched
$cargo build --release -q -p sched-core --features testing --example generate_snapshot
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/target/release/kubectl-sched"
snapshot="$dir/cluster-5k-10k-pending.json"
[[ -s $snapshot ]] || "$root/target/release/examples/generate_snapshot" "$snapshot" 5000 100000 3 42 10

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

# One run: prints "PODS_PER_S WALL_S MAX_RSS_MIB SCHEDULED PENDING" (exit 3, pods left pending, is an answer).
measure() {
  local out=$dir/simulate.json err=$dir/simulate.time start end
  start=$(date +%s.%N)
  /usr/bin/time -f '%M' -o "$err" "$bin" simulate --from "$snapshot" -o json "$@" >"$out" 2>/dev/null || [[ $? -eq 3 ]]
  end=$(date +%s.%N)
  python3 - "$out" "$err" "$start" "$end" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
s = report["summary"]
rss = int(open(sys.argv[2]).read().split()[-1]) / 1024
print(f'{s["pods"] / (s["millis"] / 1000):.0f} {float(sys.argv[4]) - float(sys.argv[3]):.2f} {rss:.0f} {s["scheduled"]} {s["pending"]}')
PY
}

for mode in sampled full; do
  flags=()
  [[ $mode == full ]] && flags=(--all-nodes)
  results=$(for _ in $(seq "$runs"); do measure "${flags[@]}"; done)
  echo "$results" | sed "s/^/$mode run: pods\/s wall_s max_rss_MiB scheduled pending = /" >&2
  rate=$(echo "$results" | awk '{print $1}' | median)
  wall=$(echo "$results" | awk '{print $2}' | median)
  rss=$(echo "$results" | awk '{print $3}' | median)
  echo "simulate ($mode): median ${rate} pods/s, ${wall} s wall (file loading included), ${rss} MiB max RSS, over $runs run(s)"
done
