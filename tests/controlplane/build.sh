#!/usr/bin/env bash
# Builds the real control plane the kubectl-sched tests run against: etcd, kube-apiserver,
# kube-scheduler, kube-controller-manager and kubectl of the Kubernetes release pinned in go.mod,
# from the Go module proxy, into a cache directory outside the repository.
#
#   tests/controlplane/build.sh          # builds what is missing, prints the bin directory
#   tests/controlplane/build.sh v1.35    # kube-apiserver and kube-scheduler of releases/v1.35/go.mod
#   tests/controlplane/build.sh --releases   # those two of every releases/v1.*/ (add.sh there adds one)
#   tests/controlplane/build.sh --all        # the pinned release, then every releases/v1.*/, newest first
#
# KUBECTL_SCHED_K8S_BIN=/some/dir overrides the pinned release's directory (both for this script and for
# the tests); the other releases go to ${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-sched/k8s-vX.Y.Z/bin.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here"

# A private Go build cache, removed when the script ends: the binaries are what is kept, and the
# ~4 GB of compiled packages would otherwise stay on disks that CI runs share with the Rust build.
# --all and --releases share one cache between the releases they build: the third-party modules
# most releases require at the same versions (etcd's client, gRPC, protobuf, CEL, OpenTelemetry)
# are then compiled once, not once per release.
if [ -z "${KUBECTL_SCHED_SHARED_GOCACHE:-}" ]; then
  GOCACHE=$(mktemp -d "${TMPDIR:-/tmp}/kubectl-sched-gocache.XXXXXX")
  export GOCACHE
  trap 'chmod -R u+w "$GOCACHE" 2>/dev/null; rm -rf "$GOCACHE"' EXIT
fi

if [ "${1:-}" = --releases ] || [ "${1:-}" = --all ]; then
  export KUBECTL_SCHED_SHARED_GOCACHE=1
  # $here/build.sh, not $0: $0 may be relative to the directory this script left.
  [ "$1" = --all ] && "$here/build.sh"
  mapfile -t releases < <(cd "$here/releases" && ls -d v1.*/ | tr -d / | sort -t. -k2,2nr)
  for release in "${releases[@]}"; do "$here/build.sh" "$release"; done
  exit 0
fi
names=(etcd kube-apiserver kube-scheduler kube-controller-manager kubectl)
if [ -n "${1:-}" ]; then
  [ -f "releases/$1/go.mod" ] || { echo "build.sh: no release $1 in $here/releases (add it with releases/add.sh vX.Y.Z)" >&2; exit 1; }
  cd "releases/$1"
  # The version tests compare against another release's API server and scheduler; etcd, kubectl and
  # kube-controller-manager stay at the pinned release.
  names=(kube-apiserver kube-scheduler)
  unset KUBECTL_SCHED_K8S_BIN
fi

# The one place a release is pinned is its go.mod; everything else reads it from there.
version=$(awk '{for (i = 1; i < NF; i++) if ($i == "k8s.io/kubernetes" && $(i+1) ~ /^v/) {print $(i+1); exit}}' go.mod)
[ -n "$version" ] || { echo "build.sh: no k8s.io/kubernetes version in $PWD/go.mod" >&2; exit 1; }
bin=${KUBECTL_SCHED_K8S_BIN:-${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-sched/k8s-$version/bin}
mkdir -p "$bin"

declare -A packages=(
  [etcd]=./cmd/etcd
  [kube-apiserver]=k8s.io/kubernetes/cmd/kube-apiserver
  [kube-scheduler]=k8s.io/kubernetes/cmd/kube-scheduler
  [kube-controller-manager]=k8s.io/kubernetes/cmd/kube-controller-manager
  [kubectl]=k8s.io/kubernetes/cmd/kubectl
)
# Version stamp, so `kube-apiserver --version` and /version report the pinned release.
ldflags="-s -w"
for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
  ldflags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$(echo "$version" | cut -d. -f2)"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

for name in "${names[@]}"; do
  if [ -x "$bin/$name" ]; then
    echo "build.sh: $name already built in $bin" >&2
    continue
  fi
  # Go is needed only when something must be built: cached binaries run without it.
  if ! command -v go >/dev/null 2>&1; then
    echo "build.sh: $name is missing from $bin and 'go' is not on PATH;" \
      "install Go $(awk '$1=="go"{print $2}' go.mod) or newer (https://go.dev/dl/)" >&2
    exit 1
  fi
  echo "build.sh: building $name ($version) ..." >&2
  start=$SECONDS
  CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$bin/$name.tmp" "${packages[$name]}"
  mv "$bin/$name.tmp" "$bin/$name"
  echo "build.sh: built $name in $((SECONDS - start)) s" >&2
done
echo "$version" > "$bin/VERSION"
echo "$bin"
