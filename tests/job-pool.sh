# shellcheck shell=bash
# A pool of at most POOL_JOBS background jobs whose output is printed whole once each ends
# (interleaved lines from two control planes would be unreadable). Needs bash 5.1 (wait -n -p). Sourced by
# tests/per-release.sh and tests/e2e-suites.sh.
#
#   pool_start LABEL COMMAND [ARG ...]   start a job (waits for a free slot first)
#   pool_finish                          wait for every job; exits 1 listing the failed labels
#
# A job fails when its command exits non-zero; a failure does not stop the other jobs.
pool_jobs=${POOL_JOBS:-2}
[[ $pool_jobs =~ ^[1-9][0-9]*$ ]] || { echo "job-pool.sh: the job count must be a positive integer, not '$pool_jobs'" >&2; exit 2; }
pool_logs=$(mktemp -d)
trap 'rm -rf "$pool_logs"' EXIT
pool_pids=()
pool_labels=()
pool_failed=()
pool_seq=0

# Waits for whichever running job ends first and prints its output.
pool_reap_one() {
  local pid i status=0
  wait -n -p pid "${pool_pids[@]}" || status=$?
  for i in "${!pool_pids[@]}"; do
    if [ "${pool_pids[$i]}" = "$pid" ]; then
      if [ "$status" -ne 0 ]; then pool_failed+=("${pool_labels[$i]}"); fi
      cat "$pool_logs/$pid.log"
      unset "pool_pids[$i]" "pool_labels[$i]"
      pool_pids=("${pool_pids[@]}")
      pool_labels=("${pool_labels[@]}")
      return
    fi
  done
}

pool_start() {
  local label=$1
  shift
  if [ "${#pool_pids[@]}" -ge "$pool_jobs" ]; then pool_reap_one; fi
  pool_seq=$((pool_seq + 1))
  echo "job-pool: started $label" >&2
  local started=$SECONDS
  (
    status=0
    "$@" || status=$?
    echo "job-pool: $label ended after $((SECONDS - started)) s (exit $status)"
    exit "$status"
  ) >"$pool_logs/tmp.$pool_seq" 2>&1 &
  local pid=$!
  ln -s "tmp.$pool_seq" "$pool_logs/$pid.log"
  pool_pids+=("$pid")
  pool_labels+=("$label")
}

pool_finish() {
  while [ "${#pool_pids[@]}" -gt 0 ]; do pool_reap_one; done
  if [ "${#pool_failed[@]}" -gt 0 ]; then
    echo "job-pool: failed: ${pool_failed[*]}" >&2
    exit 1
  fi
}
