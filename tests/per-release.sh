#!/usr/bin/env bash
# Runs e2e test suites once per Kubernetes release, against that release's real kube-apiserver and
# kube-scheduler (KUBECTL_SCHED_K8S_RELEASE; the binaries come from tests/controlplane/build.sh).
#
#   tests/per-release.sh "v1.33 v1.34" "simulate dra_differential" [TEST_NAME_FILTER ...]
#
# A failing suite does not stop the others; the failures are listed at the end (exit 1). The DRA
# suites (dra_*) skip the releases of NO_DRA_RELEASES (default v1.33: it serves no
# resource.k8s.io/v1 and its DynamicResources plugin is off by default). Filters are passed to the
# test binaries as libtest filters (a test runs when its name contains one of them).
set -euo pipefail
releases=${1:?usage: per-release.sh RELEASES SUITES [FILTER ...]}
suites=${2:?usage: per-release.sh RELEASES SUITES [FILTER ...]}
shift 2
cargo=${CARGO:-cargo}
no_dra=" ${NO_DRA_RELEASES-v1.33} "
failed=()
for release in $releases; do
  for suite in $suites; do
    if [[ $suite == dra_* && $no_dra == *" $release "* ]]; then continue; fi
    echo "per-release.sh: $suite on $release" >&2
    KUBECTL_SCHED_K8S_RELEASE=$release "$cargo" test -p e2e --test "$suite" -- "$@" \
      || failed+=("$release/$suite")
  done
done
if [ "${#failed[@]}" -gt 0 ]; then
  echo "per-release.sh: failed: ${failed[*]}" >&2
  exit 1
fi
