#!/usr/bin/env bash
# What listing pods costs kube-apiserver, asked in several ways (pages of 500 as kubectl, pages of
# 5,000, one request, resourceVersion=0, protobuf): wall time, bytes, and kube-apiserver's CPU
# seconds (utime+stime from /proc) per way, with curl as the client (it only writes the body out).
# Then it saves the pods list once as JSON and once as protobuf, for the decode tool beside it:
#
#   sched-bench --nodes 5000 --pods-per-node 10 --hold-seconds 1200 ...   # prints KUBECONFIG
#   tests/list-cost/listcost.sh KUBECONFIG "$(pgrep -x kube-apiserver)" [runs] [out-dir]
#   cargo run --release --manifest-path tests/list-cost/Cargo.toml -- out-dir/pods.json out-dir/pods.pb
#
# Loopback only: the server is the one in KUBECONFIG (the harness's, on 127.0.0.1).
set -euo pipefail
K=$1; PID=$2; RUNS=${3:-3}; OUT=${4:-/tmp}
field() { grep -m1 " $1:" "$K" | awk '{print $2}'; }
server=$(field server); ca=$(field certificate-authority); cert=$(field client-certificate); key=$(field client-key)
tick=$(getconf CLK_TCK)
cpu() { awk -v t="$tick" '{print ($14+$15)/t}' /proc/$PID/stat; }
get() { # url accept out
  curl -s -A kubectl-sched-listcost --cacert "$ca" --cert "$cert" --key "$key" -H "Accept: $2" -o "$3" "$server$1"; }
paged() { # limit accept
  local cont="" n=0 bytes=0
  while :; do
    local url="/api/v1/pods?limit=$1&fieldSelector=status.phase!%3DSucceeded,status.phase!%3DFailed"
    [ -z "$cont" ] || url="$url&continue=$cont"
    get "$url" "$2" "$OUT/lc.page"
    bytes=$((bytes + $(stat -c %s "$OUT/lc.page")))
    cont=$(head -c 4000 "$OUT/lc.page" | python3 -c 'import sys,re,urllib.parse; m=re.search(r"\"continue\": *\"([^\"]*)\"", sys.stdin.read()); print(urllib.parse.quote(m.group(1)) if m else "")')
    n=$((n+1)); [ -n "$cont" ] || break
  done
  echo "pages=$n bytes=$bytes"
}
measure() { # name cmd...
  local name=$1; shift
  for r in $(seq "$RUNS"); do
    local c0 t0 c1 t1 out; c0=$(cpu); t0=$(date +%s.%N)
    out=$("$@")
    t1=$(date +%s.%N); c1=$(cpu)
    printf '%-34s run %d: %6.2f s wall, apiserver %6.2f s CPU, %s\n' "$name" "$r" "$(echo "$t1-$t0"|bc)" "$(echo "$c1-$c0"|bc)" "$out"
  done
}
one() { get "$1" "$2" "$OUT/lc.page"; echo "bytes=$(stat -c %s "$OUT/lc.page")"; }
FS='fieldSelector=status.phase!%3DSucceeded,status.phase!%3DFailed'
measure "json limit=500 (ours today)" paged 500 application/json
measure "json limit=5000" paged 5000 application/json
measure "json one request (limit=0)" one "/api/v1/pods?$FS" application/json
measure "json resourceVersion=0" one "/api/v1/pods?resourceVersion=0&$FS" application/json
measure "protobuf one request" one "/api/v1/pods?$FS" application/vnd.kubernetes.protobuf
measure "protobuf resourceVersion=0" one "/api/v1/pods?resourceVersion=0&$FS" application/vnd.kubernetes.protobuf
get "/api/v1/pods?$FS" application/json "$OUT/pods.json"
get "/api/v1/pods?$FS" application/vnd.kubernetes.protobuf "$OUT/pods.pb"
echo "saved $OUT/pods.json and $OUT/pods.pb"
