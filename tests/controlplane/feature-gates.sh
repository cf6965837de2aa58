#!/usr/bin/env bash
# Writes core/src/features/gates/v1.X.tsv, the feature gates each supported release's kube-scheduler
# accepts in --feature-gates (default at the binary's default compatibility version, stage, locked,
# dependencies), by running featuregates/main.go built against that release's module: the pinned
# release's go.mod here and every releases/v1.*/go.mod. Not part of `make test` (a Go build per
# release, minutes each the first time); run it when a release is added or bumped. `make feature-gates`
# runs it and then rewrites docs/versions.md's gate table from the new files.
#
#   tests/controlplane/feature-gates.sh          # every release
#   tests/controlplane/feature-gates.sh v1.35    # one release
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=$here/../../core/src/features/gates
mkdir -p "$out"
cd "$here"

minor_of() { awk '{for (i = 1; i < NF; i++) if ($i == "k8s.io/kubernetes" && $(i+1) ~ /^v/) {print $(i+1); exit}}' "$1" | cut -d. -f1,2; }

modfiles=(go.mod releases/v1.*/go.mod)
for modfile in "${modfiles[@]}"; do
  minor=$(minor_of "$modfile")
  [ -n "$minor" ] || { echo "feature-gates.sh: no k8s.io/kubernetes version in $modfile" >&2; exit 1; }
  if [ -n "${1:-}" ] && [ "$1" != "$minor" ]; then continue; fi
  echo "feature-gates.sh: $minor from $modfile" >&2
  # Go builds are heavy on the shared machine: lowest priority, one at a time.
  nice -n 19 go run -modfile="$modfile" ./featuregates > "$out/$minor.tsv.tmp"
  mv "$out/$minor.tsv.tmp" "$out/$minor.tsv"
done
