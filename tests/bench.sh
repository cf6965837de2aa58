#!/usr/bin/env bash
# Every figure of BENCHMARKS.md, in one run: kubectl-sched and the real kube-scheduler side by side
# (sched-bench: generated clusters loaded into a real kube-apiserver + etcd on 127.0.0.1), then the
# webhook's /mutate latency with its caches filled from a real kube-apiserver (loadgen).
#
#   tests/bench.sh                       # 100, 1,000 and 5,000 nodes, 30 pods per node
#   BENCH_NODES=100,1000 tests/bench.sh  # fewer sizes; BENCH_RUNS=5 for more runs per measure
#   BENCH_NODES=5000 BENCH_PODS_PER_NODE=10 tests/bench.sh   # BENCHMARKS.md's 5,000-node row
#   BENCH_NODES=5000 BENCH_FLAGS=--live-only tests/bench.sh  # 150,000 pods: the live path only
#
# Output: Markdown tables on stdout (what BENCHMARKS.md holds), raw figures in
# $BENCH_DIR/results.json (default /tmp/kubectl-sched-bench). Not part of `make test`: at 5,000
# nodes it runs for tens of minutes. Every server listens on 127.0.0.1 and is stopped at the end.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
cargo=${CARGO:-cargo}
nodes=${BENCH_NODES:-100,1000,5000}
runs=${BENCH_RUNS:-3}
pods_per_node=${BENCH_PODS_PER_NODE:-30}
dir=${BENCH_DIR:-/tmp/kubectl-sched-bench}
read -r -a flags <<<"${BENCH_FLAGS:-}"
mkdir -p "$dir"

echo "## Machine" 
echo
echo "- $(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); $(free -g | awk '/Mem:/ {print $2}') GiB RAM"
echo "- $(uname -sr); $(rustc --version); kube-scheduler $(cat "${KUBECTL_SCHED_K8S_BIN:?run through make bench}/VERSION")"
echo "- load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo

$cargo build --release -q -p kubectl-sched -p e2e --bin kubectl-sched --bin sched-bench
$cargo build --release -q -p sched-webhook --example loadgen --bin sched-webhook

echo "## kubectl-sched and kube-scheduler"
"$root/target/release/sched-bench" --nodes "$nodes" --pods-per-node "$pods_per_node" --runs "$runs" --out "$dir" \
  --kubectl-sched "$root/target/release/kubectl-sched" "${flags[@]}"

echo
echo "## sched-webhook: POST /mutate, caches from a real kube-apiserver (10,000 bound PV/PVC pairs)"
echo
echo '```'
"$root/target/release/examples/loadgen" --mode bound-claim --rate 1000 --seconds 10 --pvs 10000 --nodes 100 \
  --apiserver --webhook-bin "$root/target/release/sched-webhook"
echo '```'
