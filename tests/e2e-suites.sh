#!/usr/bin/env bash
# Runs every e2e suite (each test binary of tests/tests/, plus the e2e crate's own unit tests),
# E2E_JOBS at a time (default 2): part of make test.
#
#   tests/e2e-suites.sh [LIBTEST_ARG ...]
#
# Each suite starts its own control plane (its own ports and directory), and most of their time is
# spent waiting on kube-scheduler's backoff, the controllers and the watches, not on the CPU: two at
# a time take about half as long as one after another. The slowest suites start first (SLOW_FIRST,
# from make test's logs) so that the last ones to run are short. Each suite's output is printed
# whole when it ends; a failing suite does not stop the others, the failures are listed at the end
# (exit 1). Arguments go to every test binary (e.g. --nocapture).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cargo=${CARGO:-cargo}
POOL_JOBS=${E2E_JOBS:-2}
# shellcheck source=tests/job-pool.sh
source tests/job-pool.sh

SLOW_FIRST="versions faults simulate dra_differential webhook_churn differential preemption webhook feature_gates gang"

suites=()
for file in tests/tests/*.rs tests/tests/*/main.rs; do
  case $file in
    */main.rs) suites+=("$(basename "$(dirname "$file")")") ;;
    *) suites+=("$(basename "$file" .rs)") ;;
  esac
done
ordered=()
for suite in $SLOW_FIRST; do
  [[ " ${suites[*]} " == *" $suite "* ]] && ordered+=("$suite")
done
for suite in "${suites[@]}"; do
  [[ " $SLOW_FIRST " == *" $suite "* ]] || ordered+=("$suite")
done

# Build them all once before the runs start, so that they do not queue on cargo's build lock.
"$cargo" test -p e2e --tests --no-run

pool_start "e2e (unit tests)" "$cargo" test -p e2e --lib -- "$@"
# Suites that start a program listening on every interface (Karpenter) run in a network namespace
# of their own, whose only interface is loopback: nothing they start is reachable from elsewhere.
NETNS_SUITES="node_pools"
netns=(unshare --net)
[ "$(id -u)" = 0 ] || netns+=(--map-root-user)
for suite in "${ordered[@]}"; do
  if [[ " $NETNS_SUITES " == *" $suite "* ]]; then
    pool_start "$suite" "${netns[@]}" -- sh -c 'ip link set lo up && exec "$@"' sh \
      "$cargo" test -p e2e --test "$suite" -- "$@"
  else
    pool_start "$suite" "$cargo" test -p e2e --test "$suite" -- "$@"
  fi
done
pool_finish
