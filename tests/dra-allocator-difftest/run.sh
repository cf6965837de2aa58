#!/usr/bin/env bash
# Differential test of sched-dra's structured allocator (dra/src/structured/) against
# upstream Go k8s.io/dynamic-resource-allocation/structured (the version go/go.mod pins; incubating
# implementation, a v1.37.1 kube-scheduler's default feature gates): both allocate the same random
# cases, and must choose the same devices. Not part of `make test`; `make dra-difftest` runs it.
#
#   tests/dra-allocator-difftest/run.sh [-n CASES] [-s SEED] [-t SECONDS] [-k]
#
#   -n  how many cases (default 500)           -s  the first seed (default 1; case i uses seed+i)
#   -t  how long upstream's allocator may search one case (default 10 s; a case that takes longer
#       is a "Go timeout", not compared); each side is killed after SECONDS+30 s
#   -k  keep the case directory (it is also kept, and printed, when cases differ)
#
# Prints `N cases, M identical, K differ, T Go timeouts` and exits 1 when any case differs, listing
# the differing case files. Needs Go, python3 and cargo (CARGO=... overrides the command); the Go
# program builds offline from the module cache (GOPROXY=off). No network: both sides only read files.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)

n=500 seed=1 secs=10 keep=0
usage() { sed -n '7,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while getopts "n:s:t:kh" opt; do
  case $opt in
    n) n=$OPTARG ;;
    s) seed=$OPTARG ;;
    t) secs=$OPTARG ;;
    k) keep=1 ;;
    *) usage ;;
  esac
done
[[ $n =~ ^[0-9]+$ && $seed =~ ^[0-9]+$ && $secs =~ ^[1-9][0-9]*$ ]] || usage
cargo=${CARGO:-cargo}
for tool in go python3 "$cargo" timeout; do
  command -v "$tool" >/dev/null 2>&1 || { echo "run.sh: '$tool' is not on PATH" >&2; exit 1; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/dra-difftest.XXXXXX")
cases=$work/cases
cleanup() { [ "$keep" = 1 ] || rm -rf "$work"; }
trap cleanup EXIT

echo "run.sh: building the Go side (upstream allocator) ..." >&2
(cd "$here/go" && GOPROXY=off GOWORK=off GOFLAGS='-mod=readonly -buildvcs=false' go build -o "$work/godiff" .)

echo "run.sh: building the Rust side (sched-dra's examples/dra_allocate) ..." >&2
rust=$(cd "$repo" && "$cargo" build --release -p sched-dra --example dra_allocate \
  --message-format=json-render-diagnostics |
  python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "dra_allocate" and m.get("executable"):
        print(m["executable"])')
[ -x "$rust" ] || { echo "run.sh: cargo built no dra_allocate example" >&2; exit 1; }

echo "run.sh: $n cases from seed $seed in $cases ..." >&2
python3 "$here/gen.py" "$cases" "$seed" "$n"
kill_after=$((secs + 30))
for input in "$cases"/*.in.json; do
  base=${input%.in.json}
  # A side that fails or is killed leaves no output file (a difference for cmp.py); a Go side killed
  # by timeout leaves CASE.go.timeout (a Go timeout).
  rc=0
  timeout "$kill_after" "$work/godiff" -timeout "${secs}s" "$input" >"$base.go.tmp" 2>"$base.go.err" || rc=$?
  if [ "$rc" = 0 ]; then mv "$base.go.tmp" "$base.go.json"; elif [ "$rc" = 124 ]; then : >"$base.go.timeout"; fi
  timeout "$kill_after" "$rust" "$input" >"$base.rust.tmp" 2>"$base.rust.err" &&
    mv "$base.rust.tmp" "$base.rust.json" || true
done

if python3 "$here/cmp.py" "$cases"; then
  exit 0
fi
keep=1
echo "run.sh: cases kept in $cases (regenerate one with: gen.py DIR SEED 1)" >&2
exit 1
