#!/usr/bin/env bash
# Triage benchmark: `kubectl sched triage -A` against `explain --all-pending -A` (the one-line-per-pod
# view, the baseline) on the same generated 5,000-node / 150,000-pod snapshot, in the same run.
# Usage: tests/bench-triage.sh [RUNS]   (env: BENCH_DIR, default /tmp/kubectl-sched-bench;
# SKIP_BASELINE=1 skips the slow baseline). Not part of `make test`: it takes minutes.
set -euo pipefail
runs=${1:-3}
dir=${BENCH_DIR:-/tmp/kubectl-sched-bench}
cargo=${CARGO:-cargo}
mkdir -p "$dir"
$cargo build --release -q -p kubectl-sched
$cargo build --release -q -p sched-core --features testing --example generate_snapshot
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/target/release/kubectl-sched"
snapshot="$dir/cluster-5k.json"
[[ -s $snapshot ]] || "$root/target/release/examples/generate_snapshot" "$snapshot" 5000 150000 3 42

seconds() { # runs "$@", prints wall seconds; output to /dev/null, exit 3 (pods stuck) is an answer
  local start end
  start=$(date +%s.%N)
  "$@" >/dev/null 2>&1 || [[ $? -eq 3 ]]
  end=$(date +%s.%N)
  awk -v a="$start" -v b="$end" 'BEGIN {printf "%.2f\n", b - a}' 
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

triage=$(for _ in $(seq "$runs"); do seconds "$bin" triage -A --from "$snapshot"; done | tee /dev/stderr | median)
echo "triage -A: median ${triage} s over $runs run(s)"
"$bin" triage -A --from "$snapshot" -v 1 2>&1 >/dev/null | grep -E "^(read|built|evaluated [0-9]+ pod)" || true
if [[ ${SKIP_BASELINE:-0} != 1 ]]; then
  baseline=$(seconds "$bin" explain --all-pending -A --from "$snapshot")
  echo "explain --all-pending -A (baseline): ${baseline} s"
  awk -v a="$baseline" -v b="$triage" 'BEGIN {printf "ratio: %.1fx\n", a / b}' 
fi
