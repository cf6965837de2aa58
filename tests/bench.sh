#!/usr/bin/env bash
# Every figure of BENCHMARKS.md, in one run: kubectl-sched and the real kube-scheduler side by side
# (sched-bench: generated clusters loaded into a real kube-apiserver + etcd on 127.0.0.1), the
# webhook's /mutate latency with its caches filled from a real kube-apiserver (loadgen), and the
# engine alone on 5,000 nodes / 150,000 pods in memory (profile_schedule).
#
#   tests/bench.sh                       # the page: 100 and 1,000 nodes at 30 pods per node, 5,000
#                                        # at 10, 5,000 at 30 for the live path only (about 1.5 h)
#   BENCH_NODES=100,1000 tests/bench.sh  # these sizes only, 30 pods per node (BENCH_PODS_PER_NODE);
#                                        # BENCH_RUNS=5 for more runs per measure
#   BENCH_NODES=5000 BENCH_FLAGS=--live-only tests/bench.sh  # extra sched-bench flags
#
# Output: Markdown tables on stdout (what BENCHMARKS.md holds), raw figures in
# $BENCH_DIR/<part>/results.json (default /tmp/kubectl-sched-bench). Not part of `make test`.
# Every server listens on 127.0.0.1 and is stopped at the end.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
cargo=${CARGO:-cargo}
runs=${BENCH_RUNS:-3}
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
$cargo build --release -q -p sched-core --features testing --example profile_schedule

# sched-bench into $dir/<part>, with the run's common flags.
bench() {
  local part=$1
  shift
  "$root/target/release/sched-bench" --runs "$runs" --out "$dir/$part" \
    --kubectl-sched "$root/target/release/kubectl-sched" "$@" ${flags[@]+"${flags[@]}"}
}

echo "## kubectl-sched and kube-scheduler"
if [ -n "${BENCH_NODES:-}" ]; then
  bench custom --nodes "$BENCH_NODES" --pods-per-node "${BENCH_PODS_PER_NODE:-30}"
else
  bench small --nodes 100,1000 --pods-per-node 30
  # At 30 pods per node the loopback kube-apiserver does not last a full run at 5,000 nodes: the
  # side-by-side row uses 10, and 30 is measured for the live path alone.
  bench 5000 --nodes 5000 --pods-per-node 10
  bench 5000-live --nodes 5000 --pods-per-node 30 --live-only
fi

echo
echo "## sched-webhook: POST /mutate, caches from a real kube-apiserver (10,000 bound PV/PVC pairs)"
echo
echo '```'
"$root/target/release/examples/loadgen" --mode bound-claim --rate 1000 --seconds 10 --pvs 10000 --nodes 100 \
  --apiserver --webhook-bin "$root/target/release/sched-webhook"
echo '```'

echo
echo "## The engine alone: 5,000 nodes, 150,000 pods in memory (profile_schedule)"
for namespaces in "" namespaces=1; do
  echo
  echo "${namespaces:-workloads in 100 namespaces (the default)}:"
  echo '```'
  "$root/target/release/examples/profile_schedule" 5000 150000 1 pending ${namespaces:+"$namespaces"} 2>&1
  echo '```'
done
