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
no_dra=" ${NO_DRA_RELEASES-v1.33} "
POOL_JOBS=${PER_RELEASE_JOBS:-2}
# shellcheck source=tests/job-pool.sh
source "$(dirname "${BASH_SOURCE[0]}")/job-pool.sh"

# Build every suite once before the runs start, so that they do not queue on cargo's build lock.
build_args=()
for suite in $suites; do build_args+=(--test "$suite"); done
"$cargo" test -p e2e "${build_args[@]}" --no-run

# One release: its suites in turn; fails when one of them fails (the others still run).
run_release() {
  local release=$1 suite failed=()
  shift
  for suite in $suites; do
    if [[ $suite == dra_* && $no_dra == *" $release "* ]]; then continue; fi
    echo "per-release.sh: $suite on $release"
    KUBECTL_SCHED_K8S_RELEASE=$release "$cargo" test -p e2e --test "$suite" -- "$@" 2>&1 || failed+=("$release/$suite")
  done
  if [ "${#failed[@]}" -gt 0 ]; then
    echo "per-release.sh: failed: ${failed[*]}"
    return 1
  fi
}

for release in $releases; do
  pool_start "$release" run_release "$release" "$@"
done
pool_finish
