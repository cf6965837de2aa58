#!/usr/bin/env bash
# Runs e2e test suites once per Kubernetes release, against that release's real kube-apiserver and
# kube-scheduler (KUBECTL_SCHED_K8S_RELEASE; the binaries come from tests/controlplane/build.sh).
#
#   tests/per-release.sh "v1.33 v1.34" "simulate dra_differential" [TEST_NAME_FILTER ...]
#
# Releases run side by side, PER_RELEASE_JOBS at a time (default 2): each runs on its own control
# plane (its own ports and directory), and these suites mostly wait on kube-scheduler's backoff and
# settling, not on the CPU. The suites of one release run one after another; each release's output
# is printed whole once it ends. A failing suite does not stop the others; the failures are listed
# at the end (exit 1). The DRA suites (dra_*) skip the releases of NO_DRA_RELEASES (default v1.33: it
# serves no resource.k8s.io/v1 and its DynamicResources plugin is off by default). Filters are
# passed to the test binaries as libtest filters (a test runs when its name contains one of them).
set -euo pipefail
releases=${1:?usage: per-release.sh RELEASES SUITES [FILTER ...]}
suites=${2:?usage: per-release.sh RELEASES SUITES [FILTER ...]}
shift 2
cargo=${CARGO:-cargo}
jobs=${PER_RELEASE_JOBS:-2}
no_dra=" ${NO_DRA_RELEASES-v1.33} "
[[ $jobs =~ ^[1-9][0-9]*$ ]] || { echo "per-release.sh: PER_RELEASE_JOBS must be a positive integer, not '$jobs'" >&2; exit 2; }

# Build every suite once before the runs start, so that they do not queue on cargo's build lock.
build_args=()
for suite in $suites; do build_args+=(--test "$suite"); done
"$cargo" test -p e2e "${build_args[@]}" --no-run

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

# One release: its suites in turn; a line per failed suite in $logs/RELEASE.failed.
run_release() {
  local release=$1 suite
  for suite in $suites; do
    if [[ $suite == dra_* && $no_dra == *" $release "* ]]; then continue; fi
    echo "per-release.sh: $suite on $release"
    KUBECTL_SCHED_K8S_RELEASE=$release "$cargo" test -p e2e --test "$suite" -- "$@" 2>&1 \
      || echo "$release/$suite" >>"$logs/$release.failed"
  done
}

running=()
running_release=()
for release in $releases; do
  if [ "${#running[@]}" -ge "$jobs" ]; then
    wait "${running[0]}" || true
    cat "$logs/${running_release[0]}.log"
    running=("${running[@]:1}")
    running_release=("${running_release[@]:1}")
  fi
  echo "per-release.sh: started $release" >&2
  run_release "$release" "$@" >"$logs/$release.log" 2>&1 &
  running+=("$!")
  running_release+=("$release")
done
for i in "${!running[@]}"; do
  wait "${running[$i]}" || true
  cat "$logs/${running_release[$i]}.log"
done

failed=()
for release in $releases; do
  if [ -f "$logs/$release.failed" ]; then mapfile -t -O "${#failed[@]}" failed <"$logs/$release.failed"; fi
done
if [ "${#failed[@]}" -gt 0 ]; then
  echo "per-release.sh: failed: ${failed[*]}" >&2
  exit 1
fi
