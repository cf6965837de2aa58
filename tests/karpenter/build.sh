#!/usr/bin/env bash
# Builds the real Karpenter the node-pool tests compare against: Karpenter's KWOK cloud provider
# (sigs.k8s.io/karpenter/kwok, fake instance types, nodes created as API objects), from the Go module
# proxy, into a cache directory outside the repository, with the CRDs it serves (NodePool, NodeClaim,
# KWOKNodeClass) beside it.
#
#   tests/karpenter/build.sh     # builds what is missing, prints the directory
#
# KUBECTL_SCHED_KARPENTER_DIR=/some/dir overrides ${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-sched/karpenter-vX.Y.Z.
set -euo pipefail

# The one place Karpenter is pinned. v1.14.0 is the newest release whose go.mod accepts the Go this
# project builds with (1.26.x; v1.14.3 and later ask for 1.26.10+).
version=v1.14.0
module=sigs.k8s.io/karpenter
dir=${KUBECTL_SCHED_KARPENTER_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-sched/karpenter-$version}
if [ -x "$dir/bin/karpenter-kwok" ] && [ -d "$dir/crds" ]; then
  echo "build.sh: karpenter-kwok $version already built in $dir" >&2
  echo "$dir"
  exit 0
fi
command -v go >/dev/null 2>&1 || { echo "build.sh: karpenter-kwok is missing from $dir and 'go' is not on PATH" >&2; exit 1; }

# A private Go build cache, removed when the script ends: the binary is what is kept.
GOCACHE=$(mktemp -d "${TMPDIR:-/tmp}/kubectl-sched-gocache.XXXXXX")
export GOCACHE
trap 'chmod -R u+w "$GOCACHE" 2>/dev/null; rm -rf "$GOCACHE"' EXIT

mkdir -p "$dir/bin" "$dir/crds"
echo "build.sh: building karpenter-kwok ($version) ..." >&2
start=$SECONDS
tmpbin=$(mktemp -d "$dir/bin.XXXXXX")
GOBIN=$tmpbin CGO_ENABLED=0 GOFLAGS=-mod=mod go install -trimpath -ldflags "-s -w" "$module/kwok@$version"
mv "$tmpbin/kwok" "$dir/bin/karpenter-kwok"
rmdir "$tmpbin"

# The CRDs ship in the module: the NodePool and NodeClaim of karpenter.sh/v1 and the provider's
# KWOKNodeClass.
src=$(go env GOMODCACHE)/$module@$version
for crd in kwok/charts/crds/karpenter.sh_nodepools.yaml kwok/charts/crds/karpenter.sh_nodeclaims.yaml \
  kwok/apis/crds/karpenter.kwok.sh_kwoknodeclasses.yaml; do
  install -m 0644 "$src/$crd" "$dir/crds/"
done
echo "$version" > "$dir/VERSION"
echo "build.sh: built karpenter-kwok in $((SECONDS - start)) s" >&2
echo "$dir"
