#!/usr/bin/env bash
# Gang benchmark (issue 31's acceptance): on a generated 1,000-node cluster with a 64-pod gang added
# (a PodGroup of minCount 64 and its 64 pending pods, which turn GenericWorkload on), `kubectl sched
# explain` of a gang pod — the pod group cycle places the 64 pods one after the other — against explain
# of a single pending pod outside the gang, and `explain podgroup/llama` (the whole group, node by node,
# its fixes checked), on the same file, in the same run. Prints the median wall time of each (file
# loading included, as a user waits for it), their ratios, and triage's line for the gang.
# Usage: tests/bench-gang.sh [RUNS]   (env: BENCH_DIR, default /tmp/kubectl-sched-bench; CARGO;
# CARGO_TARGET_DIR). Not part of `make test`: it takes minutes.
set -euo pipefail
runs=${1:-5}
dir=${BENCH_DIR:-/tmp/kubectl-sched-bench}
cargo=${CARGO:-cargo}
profile=${BENCH_PROFILE:-release}
mkdir -p "$dir"
root=$(cd "$(dirname "$0")/.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
flag=(--release)
[[ $profile == debug ]] && flag=()
$cargo build "${flag[@]}" -q -p kubectl-sched
$cargo build "${flag[@]}" -q -p sched-core --features testing --example generate_snapshot
bin="$target/$profile/kubectl-sched"
base="$dir/cluster-1k.json"
snapshot="$dir/cluster-1k-gang64.json"
[[ -s $base ]] || "$target/$profile/examples/generate_snapshot" "$base" 1000 30000 3 42
# The gang: 64 pods of 1 cpu in namespace gang-bench, PodGroup llama (minCount 64); the file's first
# pending pod outside it is the single-pod baseline.
python3 - "$base" "$snapshot" "$dir/single-pod" <<'PY'
import copy, json, sys
cluster = json.load(open(sys.argv[1]))
items = cluster["items"]
single = next(o for o in items if o["kind"] == "Pod" and not o.get("spec", {}).get("nodeName"))
open(sys.argv[3], "w").write(f'{single["metadata"]["namespace"]} {single["metadata"]["name"]}\n')
items.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gang-bench"}})
items.append({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
              "metadata": {"name": "llama", "namespace": "gang-bench"},
              "spec": {"schedulingPolicy": {"gang": {"minCount": 64}}}})
for i in range(64):
    items.append({"apiVersion": "v1", "kind": "Pod",
                  "metadata": {"name": f"llama-{i}", "namespace": "gang-bench",
                               "uid": f"00000000-0000-0000-0000-{i:012d}",
                               "creationTimestamp": "2026-01-01T00:00:00Z"},
                  "spec": {"schedulingGroup": {"podGroupName": "llama"},
                           "containers": [{"name": "worker", "image": "example.com/llama:1",
                                           "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]},
                  "status": {"phase": "Pending"}})
json.dump(cluster, open(sys.argv[2], "w"))
PY
read -r single_ns single_pod <"$dir/single-pod"

seconds() { # runs "$@", prints wall seconds; output to /dev/null. Exit 3 is explain's "not
  # schedulable" (--exit-code is not given, so it should not occur); anything else non-zero stops the bench.
  local start end status=0
  start=$(date +%s.%N)
  "$@" >/dev/null 2>"$dir/last.err" || status=$?
  end=$(date +%s.%N)
  if [ "$status" -ne 0 ]; then
    echo "bench-gang.sh: '$*' failed (exit $status): $(head -c 500 "$dir/last.err")" >&2
    exit 1
  fi
  awk -v a="$start" -v b="$end" 'BEGIN {printf "%.2f\n", b - a}'
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

"$bin" explain llama-0 -n gang-bench --from "$snapshot" 2>/dev/null | sed -n 1,2p
gang=$(for _ in $(seq "$runs"); do seconds "$bin" explain llama-0 -n gang-bench --from "$snapshot"; done | median)
single=$(for _ in $(seq "$runs"); do seconds "$bin" explain "$single_pod" -n "$single_ns" --from "$snapshot"; done | median)
group=$(for _ in $(seq "$runs"); do seconds "$bin" explain podgroup/llama -n gang-bench --from "$snapshot"; done | median)
echo "explain of a gang pod (64-pod gang, 1,000 nodes): median ${gang} s over $runs run(s)"
echo "explain podgroup/llama (the whole group): median ${group} s over $runs run(s)"
echo "explain of a single pod ($single_ns/$single_pod, same file): median ${single} s over $runs run(s)"
awk -v g="$gang" -v p="$group" -v s="$single" 'BEGIN {printf "ratio gang pod/single: %.2f; group/single: %.2f\n", g / s, p / s}'
echo "triage -n gang-bench (the gang's line):"
"$bin" triage -n gang-bench --from "$snapshot" 2>/dev/null | grep -i llama || { echo "bench-gang.sh: triage has no line for llama" >&2; exit 1; }
